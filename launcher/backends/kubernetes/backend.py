"""The Kubernetes backend: submit, gang, status, logs, wait, delete against the real API.

Where arena and the MPI Operator disappoint, this backend is strict:
- all or nothing: without a gang scheduler, capacity is re-checked right before creating;
  the launcher Job is created suspended, and if the workers are not all scheduled within
  `schedule_timeout` the whole job is deleted and the scheduler's reasons are reported;
- a job is Running only when the launcher and every worker run (see k8s_status);
- `logs` reads any pod, or all of them, and follows across restarts;
- finished jobs keep no idle workers (docs/cleanup.md), and `delete` leaves nothing that
  would block a resubmit.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NoReturn

from launcher.backends.base import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    JobStatus,
    Prepared,
    SubmitOptions,
    SubmitResult,
    check_job,
    check_namespace,
    status_key,
)
from launcher.backends.kubernetes import elastic, operator_schema, start_guard
from launcher.backends.kubernetes import gang as gang_control
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.admission_check import (
    check_admission,
    webhook_wants_earlier_object,
)
from launcher.backends.kubernetes.apply import (
    create,
    delete_job_objects,
    find_job_objects,
    new_submission_id,
)
from launcher.backends.kubernetes.client import (
    EVENT,
    JOB,
    MPIJOB,
    NAMESPACE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ApiError,
    KubeClient,
    connect,
)
from launcher.backends.kubernetes.dra_status import add_to_placement, allocated_devices
from launcher.backends.kubernetes.gpu_status import agent_allocations, apply_view, worker_gpu_view
from launcher.backends.kubernetes.kubeconfig import default_namespace, kubeconfig_usable
from launcher.backends.kubernetes.listing import gc_paused, list_jobs, owned_by_mpijob
from launcher.backends.kubernetes.logs import follow_pod, merge_streams, pod_log_lines, started
from launcher.backends.kubernetes.networks import resolve_networks
from launcher.backends.kubernetes.queue import queued
from launcher.backends.kubernetes.rendering import KubernetesObjects
from launcher.backends.kubernetes.snapshot import (
    UNSCHEDULABLE_TAINT,
    Snapshot,
    SnapshotUnreadable,
    build_snapshot,
    network_label_keys,
    planned_nodes_view,
    take_snapshot,
)
from launcher.backends.kubernetes.stallcheck import StallCheck
from launcher.backends.kubernetes.start_gate import GatedCreation, hand_over
from launcher.backends.kubernetes.watching import WATCH_TIMEOUT_SECONDS, JobWatch
from launcher.errors import NotFound, Refused, Timeout, UsageError, UserError
from launcher.formats.causes import replica_cause, why
from launcher.formats.job_progress import summarize
from launcher.formats.rank_reports import iter_reports
from launcher.formats.preflight_reports import HEAD_BYTES, failure_reason, preflight_status
from launcher.output import note
from launcher.preparing.planning import Plan
from launcher.timestamps import parse_utc
from mpijob import gang as gangs
from mpijob.jobspec import defaults, names

if TYPE_CHECKING:  # types only: the models load when a job is planned or rendered
    from mpijob.jobspec.spec import JobSpec
    from mpijob.k8s.modes import Installed

# The namespace label the PodSecurity admission plugin enforces (k8s.io/pod-security-admission
# api/constants.go: EnforceLevelLabel).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"

__all__ = ["KubernetesBackend", "cluster_snapshot", "kubeconfig_usable"]

OPERATOR_MISSING = ("--mode operator: the Kubeflow MPI Operator is not installed (no kubeflow.org/v2beta1 MPIJob "
                    "in the API); install it, or use --mode pods")
DEFAULT_SCHEDULE_TIMEOUT = defaults.SCHEDULE_TIMEOUT_SECONDS
LOG_TAIL_FOR_RESULT = 500


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


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "?"
    try:
        then = parse_utc(timestamp)
    except ValueError:
        return "?"
    seconds = max(0, int((datetime.now(timezone.utc) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _api_errors(fn):
    """Public methods raise UserError, never the client's ApiError."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ApiError as exc:
            raise exc.user_error() from None

    return wrapper


def _api_errors_gen(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except ApiError as exc:
            raise exc.user_error() from None

    return wrapper


@dataclass(frozen=True)
class KubernetesOptions(SubmitOptions):
    """Submit options of the Kubernetes backend."""

    server_dry_run: bool = False  # --dry-run=server: the API server validates, creates nothing
    schedule_timeout: float | None = DEFAULT_SCHEDULE_TIMEOUT  # all workers scheduled within
    # On schedule timeout: None deletes the job unless a gang scheduler holds it (queued).
    delete_on_timeout: bool | None = None


class KubernetesBackend(KubernetesObjects):
    name = "kubernetes"

    def __init__(self, context: str | None = None, namespace: str | None = None, *,
                 kubeconfig: str | None = None, client: KubeClient | None = None,
                 poll: float = 0.5):
        self.watch_timeout = WATCH_TIMEOUT_SECONDS  # tests shorten it to count reconnections
        self.context = context
        self._namespace = namespace
        self._kubeconfig = kubeconfig
        self._client = client
        self.poll = poll

    # -- connection --------------------------------------------------------------------------
    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = connect(self.context, self._namespace, self._kubeconfig)
        return self._client

    @property
    def namespace(self) -> str:
        """-n, else the context's namespace, else the service account's, else 'default'."""
        if self._namespace:
            return self._namespace
        if self._client is not None:
            return self._client.namespace
        return default_namespace(self.context, self._kubeconfig)

    def _ns(self, namespace: str | None) -> str:
        return check_namespace(namespace or self.namespace)

    def _job_ns(self, name: str, namespace: str | None) -> str:
        return check_job(name, namespace or self.namespace)

    # -- cluster -----------------------------------------------------------------------------
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

    def plan(self, spec: JobSpec, cluster, assumptions, *, rdma_fix: str | None = None) -> Plan:
        from launcher.preparing.planning import plan_job

        wants_rdma = spec.gpus_per_worker and spec.rdma != "off" and cluster is not None
        return plan_job(spec, cluster, assumptions,
                        pod_security=self.pod_security(spec.namespace) if wants_rdma else None,
                        rdma_fix=rdma_fix)

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
    def multikueue_target(self, queue: str, namespace: str) -> tuple[str | None, str | None]:
        """(the context to plan on, what to say) for a Kueue queue that dispatches through
        MultiKueue: its only worker cluster where the kubeconfig has that context, else
        none (the job runs where Kueue admits it, unknown until then); (None, None) for a
        queue that runs jobs here."""
        from launcher.backends.kubernetes import multikueue
        from launcher.backends.kubernetes.kubeconfig import context_names

        clusters = multikueue.worker_clusters(self.client, queue, namespace)
        if clusters is None:
            return None, None
        if len(clusters) == 1 and clusters[0] in context_names(self._kubeconfig):
            return clusters[0], (f"--queue {queue} dispatches through Kueue's MultiKueue to "
                                 f"its only worker cluster {clusters[0]}: planned there "
                                 f"(context {clusters[0]})")
        seen = ("" if len(clusters) != 1 else
                f"; no kubeconfig context {clusters[0]} shows its nodes")
        return None, (f"--queue {queue} dispatches through Kueue's MultiKueue: the job runs on "
                      "the worker cluster Kueue admits it on"
                      + (f" ({', '.join(clusters)})" if clusters else "") + seen
                      + ", so no placement is planned (that cluster's scheduler places it)")

    # -- submit ------------------------------------------------------------------------------
    @_api_errors
    def submit_options(self, *, mode: defaults.Mode, server_dry_run: bool,
                       schedule_timeout: float | None) -> KubernetesOptions:
        """`mode` as chosen (mpijob.k8s.modes); trainer mode speaks the newest Trainer API
        version served."""
        kind = trainer.trainjob_kind(self.client) if mode == "trainjob" else None
        version = kind.api_version.rsplit("/", 1)[1] if kind else "v1alpha1"
        return KubernetesOptions(mode=mode, server_dry_run=server_dry_run,
                                 schedule_timeout=schedule_timeout, trainer_version=version)

    @_api_errors
    def installed_modes(self, spec: JobSpec) -> Installed:
        """What the cluster serves for each mode (API discovery, cached) and whether
        hvdk8s's Trainer runtime for the job's image is there: --mode auto's inputs."""
        from mpijob.k8s.modes import Installed

        has_trainer = trainer.trainjob_kind(self.client) is not None
        return Installed(operator=self.client.serves(MPIJOB), trainer=has_trainer,
                         runtime_problem=trainer.runtime_problem(self.client, spec)
                         if has_trainer else None)

    @_api_errors
    def job_options(self, spec: JobSpec, options: KubernetesOptions) -> KubernetesOptions:
        """A Kueue queue whose ClusterQueue dispatches through MultiKueue: the job is
        created for Kueue to copy to a worker cluster (managedBy), not run here."""
        from launcher.backends.kubernetes import multikueue

        if (not spec.queue or options.mode == "pods"
                or not getattr(gangs.get(spec.gang), "multicluster", False)):
            return options
        manager = multikueue.manager_for(self.client, spec.queue, spec.namespace)
        return dataclasses.replace(options, managed_by=manager) if manager else options

    @_api_errors
    def preflight(self, plan: Plan, options: KubernetesOptions) -> tuple[Plan, builtins.list[str]]:
        """Refuse what the cluster cannot take (no MPI Operator, a gang scheduler missing or
        misconfigured, the name taken) and, without a gang scheduler, re-check capacity on a
        fresh snapshot: keep the plan if it still fits, else place again."""
        spec, client = plan.spec, self.client
        self._require_namespace(spec.namespace)
        if options.mode == "operator" and not client.serves(MPIJOB):
            raise UsageError(OPERATOR_MISSING)
        if options.mode == "trainjob":  # the runtime the TrainJob names exists and fits
            trainer.require_runtime(client, spec)
        # lazy: choosing a backend imports this module for every job command; rendering, SSH keys
        # and placement (pydantic models, cryptography: ~25 ms) load only to submit or plan
        from mpijob.k8s.gang import refusal

        if (why := refusal(spec.gang, options.mode)) is not None:
            raise UsageError(why)
        gang = gang_control.control(spec.gang)
        if gang:
            gang.require(client, spec, options.mode)
        self._refuse_existing(spec.name, spec.namespace)
        # lazy: its volume models load pydantic (~85 ms), which list/get/wait/logs never need
        from launcher.backends.kubernetes.volumes import check_claims

        # --network: each NAD must exist, and the device resource it names goes on the
        # worker pods (a pod that does not request it gets no interface)
        plan = dataclasses.replace(plan, spec=resolve_networks(client, spec))
        if options.server_dry_run or gang or (plan.placement is None and not spec.gpus_per_worker):
            check_claims(client, spec, plan.placement, options.mode)
            return plan, []
        placement, notes = self._recheck_capacity(spec, plan.placement)
        # --data: each claim must exist and its access modes allow the final placement, or
        # the pods would wait on a volume that never attaches
        check_claims(client, spec, placement, options.mode)
        return dataclasses.replace(plan, placement=placement), notes

    @_api_errors
    def reachable(self) -> None:
        """One discovery read: UserError naming why when the API server cannot be used."""
        self.client.served_resources("v1")

    @_api_errors
    def admit(self, prepared: Prepared, options: KubernetesOptions, *,
              dry_run: bool = False) -> builtins.list[str]:
        return self._admit(prepared, options, create_optional=dry_run)

    def _admit(self, prepared: Prepared, options: KubernetesOptions, *,
               create_optional: bool = False) -> builtins.list[str]:
        """What the cluster would refuse of these objects, asked before any is created.
        `create_optional`: a user who may not create pods (a client dry run) is told the
        admission chain went unasked, instead of being refused."""
        spec, objects, client = prepared.spec, prepared.objects, self.client
        if options.mode == "operator":  # an operator too old for a field would drop it silently
            operator_schema.check(client, objects[0])
        # Pod Security, quotas, LimitRanges: refused now, not after half the job exists.
        pods = (trainer.expected_pods(trainer.require_runtime(client, spec), objects[0])
                if options.mode == "trainjob" else None)
        return check_admission(client, spec, objects, options.mode, pods=pods,
                               create_optional=create_optional)

    @_api_errors
    def submit(self, prepared: Prepared, options: KubernetesOptions) -> SubmitResult:
        """Create exactly the prepared objects, all or nothing (module docstring). With a gang
        scheduler the job is left queued on timeout unless `options.delete_on_timeout`;
        without one it is deleted."""
        spec, objects, client = prepared.spec, prepared.objects, self.client
        ns, mode = spec.namespace, options.mode
        gang = gang_control.control(spec.gang)
        if not prepared.admitted:
            self._admit(prepared, options)
        submission = new_submission_id()
        if options.server_dry_run:
            made = [self._dry_run_create(obj, submission) for obj in objects]
            return SubmitResult(spec.name, ns, self.name, made,
                                f"server dry run: {len(made)} object(s) accepted by the API "
                                "server, nothing created")
        created: builtins.list[dict] = []
        try:
            from mpijob.k8s.render import with_owner

            # The root first; everything else (the MPIJob's ConfigMap and PodGroup too) is
            # owned by it, so the garbage collector follows the root wherever it goes.
            root = create(client, objects[0], submission)
            created.append(root)
            unowned = gang.scheduler.unowned_kinds if gang else ()
            # Built-in mode: the workers are owned by the start gate's pod (start_gate.py).
            gate = GatedCreation(client, ns, spec.start_timeout)
            for obj in with_owner(list(objects), root["metadata"]["uid"], unowned)[1:]:
                created.append(create(client, gate.owned(obj), submission))
                gate.created(created[-1])
            if options.managed_by:  # MultiKueue: Kueue runs it on a worker cluster
                outcome: str | UserError = (
                    f"{root['kind']} {spec.name} created for Kueue's MultiKueue (queue "
                    f"{spec.queue}): Kueue copies it to the worker cluster it admits it on; "
                    f"hvdk8s get {spec.name} -n {ns} follows it there")
            elif mode == "operator":  # the operator makes the pods and starts the launcher
                outcome = (
                    gang.operator_created(client, root, spec, options.schedule_timeout or 30.0,
                                          self.poll) if gang else
                    f"MPIJob {spec.name} created; the MPI operator creates its pods")
            elif mode == "trainjob":  # Trainer makes the JobSet, which makes the pods
                outcome = self._trainjob_created(spec, gang, options)
            else:
                outcome = self._release_when_scheduled(spec, gang, options.schedule_timeout,
                                                       options.delete_on_timeout, gate)
        except ApiError as exc:
            self._rollback(spec.name, ns, created)
            if exc.already_exists and not created:  # a concurrent submit won the name
                self._refuse_existing(spec.name, ns)
            if exc.already_exists:
                raise UserError(
                    f"cannot create {exc.resource} {exc.name} in namespace {ns}: it already "
                    f"exists and is not part of job {spec.name}; choose another --name or "
                    "delete that object") from None
            raise exc.user_error() from None
        except BaseException:  # Ctrl-C included: leave nothing half-made behind
            self._rollback(spec.name, ns, created)
            raise
        if isinstance(outcome, UserError):
            raise outcome
        return SubmitResult(spec.name, ns, self.name, created, f"job {spec.name}: {outcome}")

    def _dry_run_create(self, obj: dict, submission: str) -> dict:
        """One object sent with dryRun=All; where a webhook wants an object this job creates
        before it (a dry run made none), the object as sent, said in a note."""
        try:
            return create(self.client, obj, submission, dry_run=True)
        except ApiError as exc:
            if not webhook_wants_earlier_object(exc):
                raise
            note(f"note: {obj['kind']} {obj['metadata']['name']}: not dry-run by the server: "
                 f"its webhook looks up an object of this job that a dry run does not create "
                 f"({exc.message})")
            return obj

    def _require_namespace(self, ns: str) -> None:
        """-n names a namespace that exists (where namespaces can be read)."""
        try:
            found = self.client.get(NAMESPACE, ns)
        except ApiError as exc:
            if exc.status == 403:  # no get on namespaces: the create says
                return
            raise
        if found is None:
            raise UsageError(f"-n/--namespace {ns}: no namespace {ns} in this cluster "
                             "(kubectl get namespaces)")

    def _refuse_existing(self, name: str, ns: str) -> None:
        """A name in use (or leftovers of it) fails before anything is created."""
        found = find_job_objects(self.client, name, ns, limit=1)
        if not found:
            root = self.client.get(JOB, names.launcher(name), ns)
            if root is not None:
                raise Refused(f"a Job named {names.launcher(name)} that is not an hvdk8s job "
                                f"exists in namespace {ns}; choose another --name")
            return
        oldest = min(found, key=lambda o: o["metadata"].get("creationTimestamp") or "")
        try:
            phase = self._status(name, ns).phase
        except NotFound:
            phase = "partially deleted"
        raise Refused(
            f"job {name} already exists in namespace {ns} (created "
            f"{_age(oldest['metadata'].get('creationTimestamp'))} ago, phase {phase}); "
            f"delete it first: hvdk8s delete {name} -n {ns}")

    def _recheck_capacity(self, spec, placement):
        """Right before creating, the planned nodes read fresh (the plan came from the API
        server's cache): keep the plan if it still fits, else re-place on a fresh snapshot;
        refuse with the placer's reason when nothing fits any more."""
        from mpijob.scheduling.placement import PlacementRequest, place

        notes: list[str] = []
        if placement is not None and placement.feasible:
            stale = self._planned_nodes_conflict(spec, placement)
            if not stale:
                return placement, notes
            notes.append(f"the plan went stale ({stale}); placed again")
        try:
            snap = take_snapshot(self.client, spec.namespace, gpu_nodes_only=True)
        except SnapshotUnreadable:
            return placement, []  # said at plan time; the scheduler has the last word
        notes = [*snap.notes, *notes]
        fresh = place(snap.cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
        if not fresh.feasible:
            raise Refused(f"job {spec.name} does not fit the cluster now: {fresh.reason}"
                            + "".join(f"; {n}" for n in notes))
        return dataclasses.replace(fresh, explanation=(*fresh.explanation, *notes)), notes

    def _planned_nodes_conflict(self, spec, placement) -> str | None:
        """Why the plan no longer fits its nodes as they are now, or None."""
        if self.client.serves(RESOURCE_SLICE):
            # GPUs held through DRA claims are known only from every slice and claim.
            try:
                snap = take_snapshot(self.client, spec.namespace, gpu_nodes_only=True)
            except SnapshotUnreadable:
                return None
            return _plan_conflicts(snap.cluster, placement, spec)
        try:
            nodes, pods = planned_nodes_view(self.client, [a.node for a in placement.assignments])
        except ApiError as exc:
            if exc.status != 403:
                raise
            return None  # said at plan time; the scheduler has the last word
        return _plan_conflicts(build_snapshot(nodes, pods, label_keys=network_label_keys()).cluster,
                               placement, spec)

    def _trainjob_created(self, spec, gang, options: KubernetesOptions) -> str | UserError:
        """Kueue holds a queued TrainJob suspended until it admits it whole; without a gang
        scheduler hvdk8s's own all-or-nothing check applies: every node pod scheduled
        within the timeout (the launcher, a node too, starts once they are Ready: the
        runtime's dependsOn), else the job is deleted."""
        if gang:
            return (f"TrainJob {spec.name} created, queued in {gang.scheduler.title} "
                    f"{spec.queue}: Trainer makes its pods once admitted (hvdk8s get "
                    f"{spec.name} -n {spec.namespace} says why it waits)")
        name, ns, timeout = spec.name, spec.namespace, options.schedule_timeout
        unscheduled = self._await_scheduled(name, ns, timeout)
        if not unscheduled:
            return ("all node pods scheduled; Kubeflow Trainer starts the launcher once they "
                    "are Ready" + self._where(name, ns))
        why = self._unscheduled_reasons(ns, unscheduled)
        delete_job_objects(self.client, name, ns, grace_seconds=0)
        return UserError(f"node pods not scheduled within {timeout or DEFAULT_SCHEDULE_TIMEOUT:g}s: "
                         f"{why}; job {name} was deleted (all or nothing: no pod keeps GPUs "
                         "while the others wait)")

    def _release_when_scheduled(self, spec, gang, timeout, delete_on_timeout,
                                gate: GatedCreation | None = None) -> str | UserError:
        """Wait for the workers to be scheduled, then release the launcher (and set the
        start gate's deadline: from now on --start-timeout counts)."""
        client, ns, name = self.client, spec.namespace, spec.name
        unscheduled = self._await_scheduled(name, ns, timeout,
                                            spec.min_size if spec.elastic else None)
        if not unscheduled:
            if gate is not None:
                gate.arm()
            client.patch(JOB, names.launcher(name), {"spec": {"suspend": False}}, ns)
            return "all workers scheduled; launcher started" + self._where(name, ns)
        why = self._unscheduled_reasons(ns, unscheduled)
        summary = f"workers not scheduled within {timeout:g}s: {why}"
        delete = delete_on_timeout if delete_on_timeout is not None else not gang
        if delete:
            delete_job_objects(client, name, ns, grace_seconds=0)
            return UserError(f"{summary}; job {name} was deleted (all or nothing: no worker "
                             "keeps GPUs while the others wait)")
        # The gang scheduler binds the whole group at once, so waiting holds no GPUs; the
        # launcher is released now and waits (HVDK8S_WORKER_WAIT_SECONDS) for the workers.
        client.patch(JOB, names.launcher(name), {"spec": {"suspend": False}}, ns)
        return (f"queued by {gang.scheduler.title}: {summary}; the gang starts when it fits "
                f"(hvdk8s delete {name} -n {ns} to give up)")

    def _where(self, name: str, ns: str) -> str:
        pods = self.client.items(POD, ns, label_selector=f"{names.job_selector(name)},"
                                 f"{names.LABEL_ROLE}={names.ROLE_WORKER}")
        parts = []
        for p in sorted(pods, key=st.pod_index):
            r = st.replica(p)
            parts.append(f"{r.name} on {r.node}" + (f" GPUs {','.join(map(str, r.gpus))}"
                                                     if r.gpus else ""))
        return f" ({'; '.join(parts)})" if parts else ""

    def _await_scheduled(self, name: str, ns: str, timeout: float | None,
                         enough: int | None = None) -> builtins.list[dict]:
        """Worker pods still unscheduled when the time is up (empty: all scheduled, or
        `enough` of them: an elastic job's minimum)."""
        selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_WORKER}"
        deadline = time.monotonic() + (timeout if timeout is not None else DEFAULT_SCHEDULE_TIMEOUT)
        # A watch on the workers (watching.py) wakes at the scheduler's last binding, where a
        # poll answered up to an interval later and listed the workers each time.
        with JobWatch(self.client, ns, selector, (POD,),
                      watch_timeout=self.watch_timeout) as seen:
            while True:
                pods = seen.of(POD).items()
                waiting = [p for p in pods if not st.is_scheduled(p)]
                if pods and not waiting:
                    return []
                if enough is not None and len(pods) - len(waiting) >= enough:
                    return []
                left = deadline - time.monotonic()
                if left <= 0:
                    return waiting or pods
                seen.wait(left)

    def _unscheduled_reasons(self, ns: str, pods: builtins.list[dict]) -> str:
        events = self.client.items(EVENT, ns, field_selector="involvedObject.kind=Pod,"
                                   "reason=FailedScheduling")
        parts = []
        for p in sorted(pods, key=st.pod_index):
            parts.append(f"{p['metadata']['name']}: "
                         f"{st.unscheduled_reason(p, events) or 'no scheduler decision yet'}")
        return "; ".join(parts) or "no worker pods were created"

    def _rollback(self, name: str, ns: str, created: builtins.list[dict]) -> None:
        if not created:
            return
        try:
            delete_job_objects(self.client, name, ns, grace_seconds=0, wait_seconds=30)
        except (ApiError, UserError) as exc:
            print(f"warning: rollback of job {name} incomplete ({exc}); run: hvdk8s delete "
                  f"{name} -n {ns}", file=sys.stderr)

    # -- status ------------------------------------------------------------------------------
    def _root(self, name: str, ns: str) -> tuple[dict | None, str]:
        """The job's root and its mode: the launcher Job (pods) or the MPIJob (operator)."""
        job = self.client.get(JOB, names.launcher(name), ns)
        if job is not None and st.job_name_of(job) == name and not owned_by_mpijob(job):
            return job, "pods"
        if self.client.serves(MPIJOB):
            mpijob = self.client.get(MPIJOB, name, ns)
            if mpijob is not None:
                return mpijob, "operator"
        if (kind := trainer.trainjob_kind(self.client)) is not None:
            found = self.client.get(kind, name, ns)
            if found is not None and st.job_name_of(found) == name:
                found.setdefault("kind", "TrainJob")
                return found, "trainjob"
        return None, "pods"

    def _pods(self, name: str, ns: str) -> builtins.list[dict]:
        return self.client.items(POD, ns, label_selector=names.job_selector(name))

    def _status(self, name: str, ns: str, *, detail: bool = False) -> JobStatus:
        root, mode = self._root(name, ns)
        return self._status_of(name, ns, root, mode, self._pods(name, ns), detail=detail)

    def _status_of(self, name: str, ns: str, root: dict | None, mode: str, pods: list[dict],
                   *, detail: bool = False) -> JobStatus:
        """The job's status from its root and pods; reads more (events, logs) with `detail`
        but never writes: cleanup is `tidy`'s, which `get` and `wait` call."""
        if root is None and not pods:
            raise NotFound(f"job {name} not found in namespace {ns}")
        events: builtins.list[dict] = []
        launcher_log: builtins.list[str] = []
        if detail:
            if any(not st.is_scheduled(p) for p in pods):
                events = self.client.items(EVENT, ns, field_selector="involvedObject.kind=Pod,"
                                           "reason=FailedScheduling")
            launcher = st.current_launcher(pods)
            if launcher is not None:
                launcher_log = pod_log_lines(self.client, launcher, tail=LOG_TAIL_FOR_RESULT)
        status = st.job_status(name, ns, root=root, pods=pods, mode=mode, events=events,
                               launcher_log=launcher_log)
        if detail and launcher is not None and st.preflight_unread(root, status):
            # The preflight prints first: a long log's tail has lost it, its head has it.
            head = pod_log_lines(self.client, launcher, limit_bytes=HEAD_BYTES)
            status.preflight = preflight_status(list(dict.fromkeys(head + launcher_log))) \
                or status.preflight
        if status.phase == FAILED and (ended := failure_reason(status.preflight)):
            status.reason, status.message = ended
        if detail and status.gpus_per_worker:
            nodes = [r.node for r in status.replicas if r.node and r.role != names.ROLE_LAUNCHER]
            apply_view(status, worker_gpu_view(ns, status.replicas,
                                               agent_allocations(self.client, nodes)))
        if detail and any((p.get("spec") or {}).get("resourceClaims") for p in pods):
            add_to_placement(status.placement,
                             allocated_devices(pods, self.client.items(RESOURCE_CLAIM, ns)))
        if detail and status.phase == FAILED:
            pod = st.failing_pod(pods)
            if pod is not None:
                lines = (launcher_log if pod is st.current_launcher(pods)
                         else pod_log_lines(self.client, pod, tail=st.FAILED_TAIL_LINES))
                status.log_tail = lines[-st.FAILED_TAIL_LINES:]
        queued(self.client, status, root, mode)
        if detail and mode == "operator" and not status.done:
            _add_operator_warning(self.client, status, name, ns)
        if detail and mode == "trainjob" and not status.done:
            # Trainer's and JobSet's own words (a runtime gone, a Job it could not create)
            for kind, who in (("TrainJob", "trainer"), ("JobSet", "jobset")):
                _add_operator_warning(self.client, status, name, ns, kind, who)
        status.why = why(status)  # again: the failing log, the queue and the operator's words
        return status

    def fail_overdue(self, root: dict | None, mode: str, pods: builtins.list[dict]) -> bool:
        """The explicit step `get` and `wait` take before reading a status: a job with a pod
        not running --start-timeout after it was scheduled is failed and its GPUs released
        (start_guard). True when it was failed just now. A read-only user gets a note."""
        try:
            return start_guard.enforce(self.client, root, mode, pods)
        except ApiError as exc:
            if exc.status != 403:
                raise
            name = (root or {}).get("metadata", {}).get("name", "?")
            note(f"note: read-only: job {name} missed its start timeout, but failing it is "
                 "not allowed to you (RBAC); ask someone allowed to run hvdk8s delete")
            return False

    def tidy(self, root: dict | None, mode: str, pods: list[dict], status: JobStatus) -> None:
        """The writes reading a finished job's status calls for, as one explicit step: its
        measured rate recorded on the root (for `list`), and its idle pods removed (clean
        pod policy). A user RBAC lets only read skips them, with a note."""
        if not status.done:
            return
        skipped = self._record_images_per_sec(root, mode, status)
        if mode == "pods":
            skipped += self._clean_pods(root, pods, status)
        if skipped:
            note(f"note: read-only: skipped {' and '.join(skipped)} of finished job "
                 f"{status.name} (RBAC); `hvdk8s delete {status.name} -n {status.namespace}` "
                 "by someone allowed to removes everything")

    def _record_images_per_sec(self, root: dict | None, mode: str,
                               status: JobStatus) -> list[str]:
        """Put the rate measured in a finished job's launcher log on its root, once, so that
        `list` shows it without reading a log per job (k8s_status.ANNOTATION_IMAGES_PER_SEC)."""
        if root is None or status.images_per_sec is None:
            return []
        if st.recorded_images_per_sec(root) is not None:
            return []
        kind = (MPIJOB if mode == "operator" else
                trainer.trainjob_kind(self.client) or JOB if mode == "trainjob" else JOB)
        patch = {"metadata": {"annotations": {
            st.ANNOTATION_IMAGES_PER_SEC: repr(float(status.images_per_sec))}}}
        try:
            self.client.patch(kind, root["metadata"]["name"], patch, status.namespace)
        except ApiError as exc:  # reporting status must not fail on it: `get` shows the rate
            if exc.status == 403:
                return [f"recording its images/sec on {kind.kind} {root['metadata']['name']}"]
        return []

    def _clean_pods(self, root: dict | None, pods: builtins.list[dict],
                    status: JobStatus) -> builtins.list[str]:
        """Belt and braces for the in-pod release: once the launcher is done, no worker may
        keep its GPUs (cleanPodPolicy Running), or no pod stays at all (All)."""
        policy = st.clean_pod_policy(root)
        if policy == "None":
            return []
        # Finished for good: the Job says so, or its pod succeeded (a failed launcher pod
        # may still be retried by the Job and then needs its workers).
        launcher = st.current_launcher(pods)
        job_finished = (st.condition(root, "Complete") is not None
                        or st.condition(root, "Failed") is not None)
        launcher_done = job_finished or (
            launcher is not None and (launcher.get("status") or {}).get("phase") == SUCCEEDED)
        if not launcher_done:
            return []
        if elastic.bounds(root) is not None:  # its worker Job would replace them
            elastic.stop_workers(self.client, status.name, status.namespace)
        doomed, forbidden = [], []
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            is_launcher = st.pod_role(p) == names.ROLE_LAUNCHER
            running = (p.get("status") or {}).get("phase") not in TERMINAL
            # Launcher pods go only once the Job has counted them (All).
            if (policy == "All" and (job_finished or not is_launcher)) or (
                    not is_launcher and running):
                doomed.append(p["metadata"]["name"])
        for pod_name in list(doomed):
            try:
                self.client.delete(POD, pod_name, status.namespace)
            except ApiError as exc:  # reporting status must not fail on cleanup
                doomed.remove(pod_name)
                if exc.status == 403:
                    forbidden.append(pod_name)
                    continue
                status.message = "; ".join(filter(None, [
                    status.message, f"could not remove {pod_name}: {exc.user_error()}"]))
        for r in status.replicas:
            if r.name in doomed:
                r.reason = "Deleted"
                r.message = f"cleanPodPolicy {policy}: removed after the launcher finished"
        return [f"removing its pods {', '.join(forbidden)} (cleanPodPolicy {policy})"] \
            if forbidden else []

    def _dispatched(self, root: dict | None, name: str, ns: str) -> KubernetesBackend | None:
        """The backend of the worker cluster MultiKueue ran this job (its root here) on,
        when the job was dispatched and the kubeconfig has a context of that cluster's name;
        None to read the job here (not dispatched, not visible: the manager's copy carries
        its status). No request for a root that MultiKueue does not manage."""
        from launcher.backends.kubernetes import multikueue
        from launcher.backends.kubernetes.kubeconfig import context_names

        if root is None or multikueue.managed_by(root) != multikueue.MULTIKUEUE:
            return None
        cluster = multikueue.worker_cluster(self.client, root)
        if cluster is None:
            return None
        if cluster not in context_names(self._kubeconfig):
            note(f"note: job {name} runs on MultiKueue worker cluster {cluster}; no kubeconfig "
                 f"context {cluster}, so its pods are not visible here (status from Kueue)")
            return None
        note(f"note: job {name} runs on MultiKueue worker cluster {cluster} (context {cluster})")
        return KubernetesBackend(cluster, ns, kubeconfig=self._kubeconfig, poll=self.poll)

    def _followed(self, root: dict | None, mode: str, status: JobStatus) -> JobStatus:
        """A dispatched job's status, read on its worker cluster, with its measured rate
        recorded on the manager's copy too, where `list` reads: MultiKueue copies back only
        the job's status (kueue mpijob_multikueue_adapter.go SyncJob), and the launcher's
        termination message stays on the worker's pod."""
        self.tidy(root, mode, [], status)
        return status

    @_api_errors
    def get(self, name: str, namespace: str | None = None) -> JobStatus:
        ns = self._job_ns(name, namespace)
        root, mode = self._root(name, ns)
        if (worker := self._dispatched(root, name, ns)) is not None:
            return self._followed(root, mode, worker.get(name, ns))
        pods = self._pods(name, ns)
        if self.fail_overdue(root, mode, pods):  # read again what failing it changed
            root, mode = self._root(name, ns)
            pods = self._pods(name, ns)
        status = self._status_of(name, ns, root, mode, pods, detail=True)
        if mode == "pods" and not status.done:  # started: the workers to the launcher Job
            hand_over(self.client, root, pods)
        if root is not None and mode == "pods" and elastic.bounds(root) is not None:
            status.size = elastic.size_lines(self.client, root, pods)
        self.tidy(root, mode, pods, status)
        return status

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
    def list(self, namespace: str | None = None, all_namespaces: bool = False, *,
             live: bool = False) -> builtins.list[JobStatus]:
        """Every hvdk8s job: one paged list per kind (listing.py), none per job, as kubectl
        pays; a finished job's rate comes from its launcher's termination message. `live`
        (`list -o wide`) adds a running job's progress from its launcher's log tail, one read
        each: the cost grows with the running jobs, so only when asked."""
        statuses = list_jobs(self.client, self._ns(namespace), all_namespaces)
        for status in statuses if live else ():
            if status.phase == RUNNING:
                self._running_progress(status)
        return statuses

    def _running_progress(self, status: JobStatus) -> None:
        """A running job's progress for `list`: its launcher's log tail, one read."""
        launcher = next((r for r in status.replicas if r.role == names.ROLE_LAUNCHER), None)
        if launcher is None or launcher.phase != RUNNING:
            return
        try:
            text = self.client.pod_log(launcher.name, status.namespace, tail=LOG_TAIL_FOR_RESULT)
        except ApiError as exc:
            if exc.status in (400, 403, 404):  # not started, gone or not readable: unknown
                return
            raise
        status.progress = summarize(iter_reports(text.splitlines()), time.time(),
                                    predicted_images_per_sec=status.predicted_images_per_sec)

    # -- wait --------------------------------------------------------------------------------
    @_api_errors
    def wait(self, name: str, namespace: str | None = None, *,
             timeout: float | None = None,
             on_change: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Block until the job is terminal, woken by watches on its pods and roots
        (watching.py): no request while they are healthy and nothing changes. `on_change`
        gets each status whose phase or cause changed (what the wait waits for)."""
        ns = self._job_ns(name, namespace)
        deadline = None if timeout is None else time.monotonic() + timeout
        status, settle = None, None
        last_shown: tuple = ()
        stall = StallCheck()
        with self._job_watch(name, ns) as seen:
            while True:
                root, mode = _root_of(name, seen)
                if (worker := self._dispatched(root, name, ns)) is not None:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    return self._followed(root, mode, worker.wait(
                        name, ns, timeout=left, on_change=on_change))
                pods = seen.of(POD).items()
                if self.fail_overdue(root, mode, pods):
                    return self.get(name, ns)  # failed just now: read it fresh, then tidy
                try:
                    status = self._status_of(name, ns, root, mode, pods)
                except NotFound:
                    if status is None:
                        raise
                    raise NotFound(f"job {name} was deleted while waiting") from None
                if on_change is not None and not status.done:
                    shown = (status.phase, status.why or status.reason)
                    if shown != last_shown:
                        last_shown = shown
                        on_change(status)
                # A succeeded launcher pod is recorded by the Job a moment later; waiting for
                # that lets the clean pod policy remove the launcher pod too (All).
                now = time.monotonic()
                if status.phase == RUNNING and stall.due(now):
                    if (stalled := self._stalled(name, ns, status, pods, stall, now)) is not None:
                        return stalled
                if status.done:
                    settle = settle or now + 5.0
                    if status.finished or status.phase != SUCCEEDED or now >= settle:
                        return self.get(name, ns)
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    why = f" ({status.reason}: {status.message})" if status.message else ""
                    raise Timeout(f"job {name} is still {status.phase} after {timeout:g}s{why}")
                # Nothing may change while a pod sits in ImagePullBackOff: look again at its
                # start deadline too.
                start = start_guard.seconds_left(root, pods)
                wake = [t for t in (left, settle and settle - now,
                                    None if start is None else start + 0.5,
                                    stall.seconds_left(now) if status.phase == RUNNING else None)
                        if t is not None]
                seen.wait(min(wake) if wake else None)

    def _stalled(self, name: str, ns: str, status: JobStatus, pods: builtins.list[dict],
                 stall: StallCheck, now: float) -> JobStatus | None:
        """`get`'s status when the launcher's log tail shows a stall (read at stall's rate,
        one request), else None."""
        launcher = st.current_launcher(pods)
        lines = pod_log_lines(self.client, launcher, tail=LOG_TAIL_FOR_RESULT) if launcher else []
        progress = summarize(iter_reports(lines), time.time(),
                             predicted_images_per_sec=status.predicted_images_per_sec)
        stall.looked(progress, now)
        if progress is None or not progress.stalled:
            return None
        got = self.get(name, ns)  # names the silent ranks' pods; still stalled when read?
        return got if got.progress is not None and got.progress.stalled else None

    @_api_errors_gen
    def watch_status(self, name: str, namespace: str | None = None, *,
                     poll: float = 2.0) -> Iterator[JobStatus]:
        """`get --watch`: the status now and at each change, woken by the same watches as
        `wait` (no polling while they are healthy); the last one is `get`'s, tidied."""
        ns = self._job_ns(name, namespace)
        last, seen_once = None, False
        with self._job_watch(name, ns) as seen:
            while True:
                root, mode = _root_of(name, seen)
                try:
                    status = self._status_of(name, ns, root, mode, seen.of(POD).items())
                except NotFound:
                    if not seen_once:
                        raise
                    raise NotFound(f"job {name} was deleted while watching") from None
                seen_once = True
                if status.done:
                    yield self.get(name, ns)
                    return
                if status_key(status) != last:
                    last = status_key(status)
                    yield status
                seen.wait(None)

    def _job_watch(self, name: str, ns: str) -> JobWatch:
        trainjob = trainer.trainjob_kind(self.client)
        kinds = [POD, JOB] + ([MPIJOB] if self.client.serves(MPIJOB) else []) + (
            [trainjob] if trainjob is not None else [])
        return JobWatch(self.client, ns, names.job_selector(name), kinds,
                        watch_timeout=self.watch_timeout)

    # -- logs --------------------------------------------------------------------------------
    @_api_errors_gen
    def logs(self, name: str, namespace: str | None = None, *, follow: bool = False,
             rank: int | None = None, worker: int | None = None, all_replicas: bool = False,
             tail: int | None = None, previous: bool = False) -> Iterator[str]:
        if rank is not None:
            raise UsageError("--rank: ranks are a local-backend notion; on Kubernetes use "
                             "--worker INDEX or --all")
        ns = self._job_ns(name, namespace)
        pods = self._pods(name, ns)
        if not pods:  # none here: the job is gone, or MultiKueue ran it elsewhere
            root = self._root(name, ns)[0]
            if root is None:
                raise NotFound(f"job {name} not found in namespace {ns}")
            if (there := self._dispatched(root, name, ns)) is not None:
                yield from there.logs(name, ns, follow=follow, worker=worker,
                                      all_replicas=all_replicas, tail=tail, previous=previous)
                return
        workers = sorted((p for p in pods if st.pod_role(p) != names.ROLE_LAUNCHER),
                         key=st.pod_index)
        if worker is not None:
            chosen = [p for p in workers if st.pod_index(p) == worker]
            if not chosen:
                self._no_such_worker(name, ns, worker, workers)
            targets: builtins.list[tuple[str, dict | None]] = [("worker", chosen[0])]
        else:
            targets = [("launcher", None)] + ([("worker", p) for p in workers]
                                              if all_replicas else [])
        # --all prefixes even when only the launcher is left (finished: workers cleaned up).
        prefix = all_replicas or len(targets) > 1
        if not follow:
            yield from self._logs_now(name, ns, pods, targets, tail, previous, prefix)
            return
        stop = threading.Event()
        streams = [self._follow_target(name, ns, role, pod, tail, stop) for role, pod in targets]
        try:
            yield from merge_streams(streams, prefix=prefix)
        finally:
            stop.set()

    def _no_such_worker(self, name: str, ns: str, worker: int, pods: builtins.list[dict]) -> NoReturn:
        """An index outside the job is a bad option value (exit 2, as the local backend's
        --rank); one inside it whose pod is gone (cleaned up, evicted) is not."""
        root, _ = self._root(name, ns)
        count = max(st.expected_worker_pods(root), len(pods))
        if not 0 <= worker < count:
            has = f"worker pods 0..{count - 1}" if count else "no worker pods"
            raise UsageError(f"--worker: job {name} has {has}, not {worker}")
        raise UserError(f"--worker {worker}: pod {names.worker(name, worker)} of job {name} "
                        "does not exist (not created yet, or removed after the job finished)")

    def _logs_now(self, name, ns, pods, targets, tail, previous, prefix) -> Iterator[str]:
        for role, pod in targets:
            if role == "launcher":
                pod = st.current_launcher(pods)
                if pod is None:
                    if prefix:
                        continue
                    status = self._status(name, ns)
                    raise UserError(f"job {name} has no launcher pod yet ({status.phase}"
                                    f"{': ' + status.message if status.message else ''})")
            pod_name = pod["metadata"]["name"]
            if not prefix and not previous and not started(pod):
                r = st.replica(pod)
                detail = ": ".join(x for x in (r.reason, r.message) if x)
                raise UserError(f"{pod_name} has not started yet ({r.phase}"
                                f"{': ' + detail if detail else ''}); no log to show")
            for line in pod_log_lines(self.client, pod, tail=tail, previous=previous):
                yield f"[{pod_name}] {line}" if prefix else line

    def _follow_target(self, name, ns, role, pod, tail, stop):
        def job_done() -> bool:
            # The step get and wait take: a pod past --start-timeout (an image that never
            # pulls) fails the job, which ends the stream instead of waiting on silently.
            root, mode = self._root(name, ns)
            if root is not None:
                self.fail_overdue(root, mode, self._pods(name, ns))
            try:
                return self._status(name, ns).done
            except NotFound:
                return True

        if role == "launcher":
            selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_LAUNCHER}"

            def find():  # every launcher pod: the Job replaces a failed one
                return st.launcher_pods(self.client.items(POD, ns, label_selector=selector))

            def finished(_pods):
                return job_done()
        else:
            pod_name = pod["metadata"]["name"]

            def find():
                current = self.client.get(POD, pod_name, ns)
                return [current] if current is not None else []

            def finished(pods):
                return (not pods or (pods[0].get("status") or {}).get("phase") in TERMINAL
                        or job_done())

        return follow_pod(self.client, find, finished, tail=tail, poll=self.poll, stop=stop,
                          waiting=self._saying_what_logs_wait_for(name, ns, role))

    def _saying_what_logs_wait_for(self, name: str, ns: str, role: str):
        """`logs -f` before a pod has started: say what it waits for (an image that cannot
        be pulled, unscheduled workers), once each time that changes, instead of silence."""
        said = [""]

        def waiting(pods: builtins.list[dict]) -> None:
            pod = pods[-1] if pods else None
            if pod is None:
                status = self._status(name, ns)
                what = (f"waiting for job {name}'s {role} pod ({status.phase}"
                        + (f": {status.message}" if status.message else "") + ")")
            else:
                r = st.replica(pod)
                detail = ": ".join(x for x in (r.reason, r.message) if x)
                cause = replica_cause(r)  # the cause get's why line gives, with its fix
                what = (f"waiting for {pod['metadata']['name']} to start: {cause}" if cause else
                        f"waiting for {pod['metadata']['name']} to start ({r.phase}"
                        + (f": {detail}" if detail else "") + ")")
            # The kubelet alternates ErrImagePull and ImagePullBackOff: one cause, said once.
            key = "image pull" if "ImagePull" in what else what
            if key != said[0]:
                said[0] = key
                note(what)

        return waiting

    # -- delete ------------------------------------------------------------------------------
    @_api_errors
    def delete(self, name: str, namespace: str | None = None) -> bool:
        """Delete every object of the job and wait until they are gone; False if none was."""
        return delete_job_objects(self.client, name, self._job_ns(name, namespace))


# --- helpers ----------------------------------------------------------------------------------
def _add_operator_warning(client, status: JobStatus, name: str, ns: str, kind: str = "MPIJob",
                          who: str = "operator") -> None:
    """The controller's latest Warning event on the job's object (the MPI Operator's on the
    MPIJob: a worker pod refused by admission, a validation error; Trainer's on the
    TrainJob, JobSet's on the JobSet): they retry forever, so only they say why."""
    try:
        events = client.items(EVENT, ns, field_selector=f"involvedObject.kind={kind},"
                              f"involvedObject.name={name},type=Warning")
    except ApiError:
        return
    if events:
        last = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        said = f"{who}: {last.get('reason')}: {last.get('message')}"
        status.message = f"{status.message}; {said}" if status.message else said


def _plan_conflicts(cluster, placement, spec) -> str | None:
    """Why a plan no longer fits the fresh snapshot, or None when it still does: the node
    screening placement itself uses (mpijob.scheduling.placement), then the planned GPUs."""
    from mpijob.scheduling.placement import PlacementRequest, room_by_resources, screen_node

    request = PlacementRequest.from_spec(spec)
    workers_on: dict[str, int] = {}
    for a in placement.assignments:
        workers_on[a.node] = workers_on.get(a.node, 0) + a.workers
    taken: dict[str, set[int]] = {}
    for a in placement.assignments:
        try:
            node = cluster.node(a.node)
        except KeyError:
            return f"node {a.node} is gone"
        verdict = screen_node(node, request)
        if verdict.blocked == "not-ready":
            return f"node {a.node} is not Ready"
        if verdict.blocked == "selector":
            return f"node {a.node} no longer matches --selector"
        if verdict.blocked == "taint" and verdict.taint is not None:
            key = verdict.taint.key
            what = "cordoned" if key == UNSCHEDULABLE_TAINT else f"tainted {key}"
            return f"node {a.node} is {what}"
        busy = set(a.gpus) & (set(node.allocated) | taken.setdefault(a.node, set()))
        if busy:
            return f"GPU(s) {','.join(map(str, sorted(busy)))} of {a.node} are taken now"
        taken[a.node] |= set(a.gpus)
        by_cpu, by_mem = room_by_resources(node, request)
        if by_cpu is not None and by_cpu < workers_on[a.node]:
            return f"node {a.node} has {node.free_cpu:g} free CPUs now"
        if by_mem is not None and by_mem < workers_on[a.node]:
            return f"node {a.node} has {node.free_memory / 2**30:.3g}Gi of free memory now"
    return None


def _root_of(name: str, seen: JobWatch) -> tuple[dict | None, str]:
    """`_root` from watched objects: the launcher Job (pods mode), else the MPIJob."""
    job = seen.of(JOB).get(names.launcher(name))
    if job is not None and st.job_name_of(job) == name and not owned_by_mpijob(job):
        return job, "pods"
    if seen.has(MPIJOB):
        mpijob = seen.of(MPIJOB).get(name)
        if mpijob is not None:
            return mpijob, "operator"
    for kind in trainer.TRAINJOBS:
        if seen.has(kind) and (found := seen.of(kind).get(name)) is not None:
            found.setdefault("kind", "TrainJob")
            return found, "trainjob"
    return None, "pods"
