"""The Kubernetes backend: submit, gang, status, logs, wait, delete against the real API.

Where arena and the MPI Operator disappoint, this backend is strict:
- all or nothing: without a gang scheduler, capacity is re-checked right before creating;
  the launcher Job is created suspended, and if the workers are not all scheduled within
  `schedule_timeout` the whole job is deleted and the scheduler's reasons are reported;
- a job is Running only when the launcher and every worker run (see k8s_status);
- `logs` reads any pod, or all of them, and follows across restarts;
- finished jobs keep no idle workers (docs/cleanup.md), and `delete` leaves nothing that
  would block a resubmit;
- reading a job (get, list, wait, logs, top) never writes, for any user.

KubernetesBackend is a facade; each part lives by what it does: connection.py (client,
namespace, the job's root and pods), submit.py (preflight, admit, submit, gate release,
rollback), observe.py (status, get, list), waiting.py (wait, get --watch), job_logs.py
(logs) and tidying.py (`hvdk8s tidy`: the writes a job's state calls for, which the read
commands name: owed.py).
Here: what plans a job (snapshot, gang detection, Pod Security), scale and delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.backends.kubernetes import elastic
from launcher.backends.kubernetes import gang as gang_control
from launcher.backends.kubernetes.apply import delete_job_objects
from launcher.backends.kubernetes.client import NAMESPACE, ApiError
from launcher.backends.kubernetes.connection import _api_errors
from launcher.backends.kubernetes.job_logs import JobLogs
from launcher.backends.kubernetes.kubeconfig import kubeconfig_usable
from launcher.backends.kubernetes.listing import gc_paused
from launcher.backends.kubernetes.snapshot import Snapshot, SnapshotUnreadable, take_snapshot
from launcher.backends.kubernetes.submit import (
    DEFAULT_SCHEDULE_TIMEOUT,
    OPERATOR_MISSING,
    KubernetesOptions,
    Submitting,
)
from launcher.backends.kubernetes.tidying import Tidying
from launcher.backends.kubernetes.waiting import Waiting
from launcher.errors import UsageError
from launcher.output import note
from mpijob import gang as gangs

if TYPE_CHECKING:  # types only: the models load when a job is planned or rendered
    from mpijob.jobspec.spec import JobSpec, Network

# The namespace label the PodSecurity admission plugin enforces (k8s.io/pod-security-admission
# api/constants.go: EnforceLevelLabel).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"

__all__ = ["DEFAULT_SCHEDULE_TIMEOUT", "OPERATOR_MISSING", "KubernetesBackend", "KubernetesOptions",
           "cluster_snapshot", "kubeconfig_usable"]


def cluster_snapshot(context: str | None = None, namespace: str | None = None,
                     kubeconfig: str | None = None, *, nodes_optional: bool = False,
                     gpu_nodes_only: bool = False):
    """The live cluster as placement sees it, read from the API server's watch cache (plans
    tolerate a view a moment old; submit re-checks the planned nodes). What RBAC kept it
    from reading is said in one line each; with `nodes_optional`, a user who may not list
    nodes gets None (the scheduler places the job) instead of an error."""
    try:
        snap = KubernetesBackend(context, namespace, kubeconfig=kubeconfig).snapshot(
            cached=True, gpu_nodes_only=gpu_nodes_only)
    except SnapshotUnreadable as exc:
        if not nodes_optional:
            raise
        note(f"note: {exc}")
        return None
    for line in snap.skipped:
        note(f"note: {line}")
    return snap.cluster


class KubernetesBackend(Submitting, Waiting, JobLogs, Tidying):
    name = "kubernetes"

    @_api_errors
    def snapshot(self, *, cached: bool = False, gpu_nodes_only: bool = False) -> Snapshot:
        # Where RBAC allows no cluster-wide pod list, the context's namespace is read.
        with gc_paused():  # 0.2 s of a 2,000-node snapshot's 1.1 s of CPU
            return take_snapshot(self.client, self.namespace, cached=cached,
                                 gpu_nodes_only=gpu_nodes_only)

    @_api_errors
    def detect_gang_scheduler(self) -> str | None:
        """The installed gang scheduler `--gang` uses, from API discovery (one call)."""
        return gang_control.detect(self.client)

    def pod_security_for(self, spec: JobSpec, cluster) -> str | None:
        wants_rdma = spec.gpus_per_worker and spec.rdma != "off" and cluster is not None
        return self.pod_security(spec.namespace) if wants_rdma else None

    @_api_errors
    def networks_for(self, spec: JobSpec) -> tuple[Network, ...]:
        """--network: each NetworkAttachmentDefinition must exist, and the device resource
        it names goes on the worker pods (a pod that does not request it gets no interface)."""
        from launcher.backends.kubernetes.networks import resolve_networks

        return resolve_networks(self.client, spec)

    def pod_security(self, namespace: str) -> str | None:
        """The Pod Security level the namespace enforces (its label, which the built-in
        PodSecurity admission plugin reads), or None where unset or unreadable."""
        try:
            ns = self.client.get(NAMESPACE, namespace)
        except ApiError:  # no get on namespaces (RBAC): the API server will say at create
            return None
        labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
        return labels.get(POD_SECURITY_ENFORCE)

    def cluster_for(self, spec, *, context: str | None):
        # Only GPU jobs are placed by hvdk8s; CPU workers are left to the scheduler.
        if not spec.gpus_per_worker:
            return None
        if spec.queue and getattr(gangs.get(spec.gang), "multicluster", False):
            worker, why = self.multikueue_target(spec.queue, spec.namespace)
            if why is not None:
                note(f"note: {why}")
                if worker is None:
                    return None
                context = worker  # MultiKueue's only worker cluster, which hvdk8s can see
        return cluster_snapshot(context=context, namespace=spec.namespace, nodes_optional=True,
                                gpu_nodes_only=True)

    @_api_errors
    def scale(self, name: str, namespace: str | None = None, *, workers: int,
              timeout: float = 60.0) -> str:
        """`hvdk8s scale`: an elastic job's workers, within its bounds, confirmed by the
        cluster within `timeout` seconds."""
        ns = self._job_ns(name, namespace)
        root, mode = self._root(name, ns)
        if mode != "pods" and root is not None:
            raise UsageError(f"job {name} runs in {mode} mode, which has no elastic jobs")
        return elastic.scale(self.client, root, name, ns, workers, timeout=timeout,
                             poll=self.poll)

    @_api_errors
    def delete(self, name: str, namespace: str | None = None) -> bool:
        """Delete every object of the job and wait until they are gone; False if none was."""
        return delete_job_objects(self.client, name, self._job_ns(name, namespace))
