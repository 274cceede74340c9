"""Kueue's MultiKueue admission check for MPIJobs and TrainJobs: the manager cluster's job
copied to a worker cluster (another test API server), its status copied back.

A model of github.com/kubernetes-sigs/kueue v0.14 (abbreviations):
  wl  = pkg/controller/admissionchecks/multikueue/workload.go (reconcileGroup: the first
        worker to reserve quota gets the job; the check's message `The workload got
        reservation on "<cluster>"`, state Ready for MPIJobs)
  mpi = pkg/controller/jobs/mpijob/mpijob_multikueue_adapter.go (SyncJob: the remote copy
        with the prebuilt-workload and origin labels and runPolicy.managedBy cleared; an
        existing remote job's status copied to the local one; KeepAdmissionCheckPending
        false)
  api = apis/kueue/v1beta1 (AdmissionCheck.spec.controllerName/parameters,
        MultiKueueConfig.spec.clusters, constants)
  tj  = site/content/en/docs/tasks/run/multikueue/trainjob.md (TrainJobs in MultiKueue,
        spec.managedBy kueue.x-k8s.io/multikueue; modelled as mpi's adapter, spec.managedBy
        cleared on the remote copy)

Simplified: the worker cluster runs no Kueue of its own (the remote job is created
unsuspended, where Kueue there would admit its prebuilt Workload), the worker is the
config's first cluster that has a server here, and the manager's Kueue model admits the
local Workload on quota alone before the check is Ready.
"""

from __future__ import annotations

from . import errors
from .controller import Loop
from .kueue import (
    CQ_KEY,
    LQ_KEY,
    MPIJOB_KEY,
    QUEUE_LABEL,
    TRAINJOB_KEY,
    WORKLOAD_KEY,
    workload_name,
)
from .util import deepcopy, now_rfc3339

CONTROLLER = "kueue.x-k8s.io/multikueue"  # api MultiKueueControllerName
AC_KEY = "kueue.x-k8s.io/admissionchecks"
CONFIG_KEY = "kueue.x-k8s.io/multikueueconfigs"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
ORIGIN = "multikueue"  # the manager's --multikueue-origin default (configuration)


def setup(manager, name: str, clusters: list[str], queue: str, quota: dict,
          namespace: str = "default") -> None:
    """A LocalQueue `queue` whose ClusterQueue carries a MultiKueue admission check `name`
    over a MultiKueueConfig of `clusters`, as Kueue's MultiKueue setup guide writes them."""
    manager.install_crd("multikueue")
    manager.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "MultiKueueConfig",
                    "metadata": {"name": name}, "spec": {"clusters": list(clusters)}})
    manager.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck",
                    "metadata": {"name": name},
                    "spec": {"controllerName": CONTROLLER, "parameters": {
                        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                        "name": name}}})
    manager.kueue_queue(queue, quota, namespace)
    manager.store.mutate(CQ_KEY, "", queue,
                         lambda cq: cq["spec"].__setitem__("admissionChecks", [name]))


class MultiKueue(Loop):
    """The manager's MultiKueue controller; `workers` maps cluster names to servers."""

    name = "multikueue"

    def __init__(self, manager, workers: dict, tick: float = 0.02):
        super().__init__(tick)
        self.manager, self.workers = manager, workers

    def _checks(self, cq_name: str) -> list[tuple[str, list[str]]]:
        store = self.manager.store
        cq = store.get(CQ_KEY, "", cq_name) or {}
        out = []
        for name in (cq.get("spec") or {}).get("admissionChecks") or []:
            ac = store.get(AC_KEY, "", name) or {}
            spec = ac.get("spec") or {}
            if spec.get("controllerName") != CONTROLLER:
                continue
            config = store.get(CONFIG_KEY, "", (spec.get("parameters") or {}).get("name", ""))
            out.append((name, list(((config or {}).get("spec") or {}).get("clusters") or [])))
        return out

    def _step(self) -> None:
        store = self.manager.store
        for job in [*store.items(MPIJOB_KEY), *store.items(TRAINJOB_KEY)]:
            queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
            if _managed_by(job) != CONTROLLER or not queue:
                continue
            ns = job["metadata"]["namespace"]
            wl = store.get(WORKLOAD_KEY, ns, _workload_name(job))
            if wl is None or not (wl.get("status") or {}).get("admission"):
                continue  # wl: the check runs once quota is reserved
            lq = store.get(LQ_KEY, ns, queue) or {}
            for check, clusters in self._checks((lq.get("spec") or {}).get("clusterQueue", "")):
                cluster = next((c for c in clusters if c in self.workers), None)
                if cluster is None:
                    continue
                try:
                    self._sync(job, wl, check, cluster)
                except errors.ApiError:
                    pass  # retried next tick

    def _sync(self, job: dict, wl: dict, check: str, cluster: str) -> None:
        """mpi SyncJob, then wl's admission check state."""
        worker = self.workers[cluster]
        m = job["metadata"]
        trainjob = job.get("kind") == "TrainJob"
        key = TRAINJOB_KEY if trainjob else MPIJOB_KEY
        remote = worker.get("trainjobs.trainer.kubeflow.org" if trainjob
                            else "mpijobs.kubeflow.org", m["name"], m["namespace"])
        if remote is None:
            copy = {"apiVersion": job["apiVersion"], "kind": job.get("kind") or "MPIJob",
                    "metadata": {k: deepcopy(v) for k, v in m.items()
                                 if k in ("name", "namespace", "labels", "annotations")},
                    "spec": deepcopy(job["spec"])}
            labels = copy["metadata"].setdefault("labels", {})
            labels[PREBUILT_LABEL] = wl["metadata"]["name"]
            labels[ORIGIN_LABEL] = ORIGIN
            labels.pop(QUEUE_LABEL, None)  # no Kueue on the worker here (module docstring)
            run = copy["spec"] if trainjob else copy["spec"]["runPolicy"]
            run.pop("managedBy", None)
            run["suspend"] = False
            worker.create(copy)
        elif remote.get("status") != job.get("status"):
            status = deepcopy(remote.get("status") or {})
            self.manager.store.mutate(key, m["namespace"], m["name"],
                                      lambda j: j.__setitem__("status", status))
        message = f'The workload got reservation on "{cluster}"'

        def set_check(w):
            st = w.setdefault("status", {})
            checks = [c for c in st.get("admissionChecks") or [] if c.get("name") != check]
            checks.append({"name": check, "state": "Ready", "message": message,
                           "lastTransitionTime": now_rfc3339()})
            st["admissionChecks"] = checks
        current = {c.get("name"): c for c in (wl.get("status") or {}).get("admissionChecks") or []}
        if (current.get(check) or {}).get("message") != message:
            self.manager.store.mutate(WORKLOAD_KEY, m["namespace"], wl["metadata"]["name"],
                                      set_check)


def _managed_by(job: dict) -> str | None:
    spec = job.get("spec") or {}
    return spec.get("managedBy") or (spec.get("runPolicy") or {}).get("managedBy")


def _workload_name(job: dict) -> str:
    if job.get("kind") == "TrainJob":
        return workload_name(job, "TrainJob", "trainer.kubeflow.org")
    return workload_name(job)
