"""Kueue's MultiKueue: a queue whose ClusterQueue dispatches jobs to worker clusters.

Kueue v0.14 (kubernetes-sigs/kueue):
- a ClusterQueue names its admission checks in spec.admissionChecks (or
  spec.admissionChecksStrategy.admissionChecks[].name), apis/kueue/v1beta1/
  clusterqueue_types.go; an AdmissionCheck whose spec.controllerName is
  "kueue.x-k8s.io/multikueue" (pkg/controller/admissionchecks/multikueue, ControllerName)
  makes the queue a MultiKueue one;
- a job for such a queue is created with managedBy "kueue.x-k8s.io/multikueue" (MPIJob
  runPolicy.managedBy, TrainJob spec.managedBy), so the manager cluster's own operator
  leaves it alone, and Kueue copies it to the worker cluster that reserves quota first;
- the Workload's admission check state then says which: `The workload got reservation on
  "worker1"` (multikueue/workload.go), worker1 being the MultiKueueCluster's name; newer
  Kueue also writes it to the Workload's status.clusterName.

hvdk8s follows the job there when the kubeconfig has a context of that name, and plans
the placement on the worker cluster when the config has only one and the kubeconfig a
context of its name (the only cluster Kueue can pick).

Kueue copies the job object and nothing else (the adapters' SyncJob, e.g.
pkg/controller/jobs/mpijob/mpijob_multikueue_adapter.go), so such a job needs nothing hvdk8s
would create beside it: its pods carry their files (launch script, benchmark, preflight) in
their own annotations, read back by a downwardAPI volume, whichever worker cluster Kueue
picks (mpijob/k8s/pod_files.py says why not a ConfigMap made on the worker); what cannot
travel so (DRA claim templates, a ComputeDomain) is refused at submit, --gpu-request auto
taking the device plugin's GPUs instead (launcher.backends.kubernetes.rendering), and a TrainJob is refused where the only worker
cluster, seen through its context, lacks hvdk8s's Trainer runtime (submit.py).
"""

from __future__ import annotations

import re

from launcher.backends.kubernetes.client import (
    KUEUE_LOCALQUEUE,
    KUEUE_WORKLOAD,
    ApiError,
    Kind,
)
from mpijob.gang.kueue import JOB_UID_LABEL

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
CLUSTER_QUEUE = Kind("kueue.x-k8s.io/v1beta1", "ClusterQueue", "clusterqueues", namespaced=False)
ADMISSION_CHECK = Kind("kueue.x-k8s.io/v1beta1", "AdmissionCheck", "admissionchecks",
                       namespaced=False)
MULTIKUEUE_CONFIG = Kind("kueue.x-k8s.io/v1beta1", "MultiKueueConfig", "multikueueconfigs",
                         namespaced=False)
_RESERVED_ON = re.compile(r'The workload got reservation on "([^"]+)"')


def admission_checks(cluster_queue: dict) -> list[str]:
    spec = cluster_queue.get("spec") or {}
    names = list(spec.get("admissionChecks") or [])
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return names + [c.get("name") for c in strategy if c.get("name")]


def worker_clusters(client, queue: str, namespace: str) -> tuple[str, ...] | None:
    """The worker clusters of the queue's MultiKueue admission check (its MultiKueueConfig's
    spec.clusters; empty where that is not readable), or None when the queue does not
    dispatch through MultiKueue or its objects cannot be read (Kueue then runs it here)."""
    try:
        lq = client.get(KUEUE_LOCALQUEUE, queue, namespace)
        if lq is None:
            return None
        cq = client.get(CLUSTER_QUEUE, (lq.get("spec") or {}).get("clusterQueue") or "")
        if cq is None:
            return None
        for name in admission_checks(cq):
            check = client.get(ADMISSION_CHECK, name)
            spec = (check or {}).get("spec") or {}
            if spec.get("controllerName") != MULTIKUEUE:
                continue
            params = spec.get("parameters") or {}
            try:
                config = client.get(MULTIKUEUE_CONFIG, params.get("name") or "")
            except ApiError:
                config = None
            return tuple(((config or {}).get("spec") or {}).get("clusters") or ())
    except ApiError as exc:
        if exc.status not in (403, 404):
            raise
    return None


def manager_for(client, queue: str, namespace: str) -> str | None:
    """MULTIKUEUE when the LocalQueue's ClusterQueue has a MultiKueue admission check."""
    return MULTIKUEUE if worker_clusters(client, queue, namespace) is not None else None


def managed_by(root: dict | None) -> str | None:
    spec = (root or {}).get("spec") or {}
    return spec.get("managedBy") or (spec.get("runPolicy") or {}).get("managedBy")


def worker_cluster(client, root: dict) -> str | None:
    """The worker cluster Kueue dispatched this job to, from its Workload, or None yet."""
    m = root["metadata"]
    try:
        workloads = client.items(KUEUE_WORKLOAD, m["namespace"],
                                 label_selector=f"{JOB_UID_LABEL}={m['uid']}")
    except ApiError:
        return None
    for wl in workloads:
        status = wl.get("status") or {}
        if status.get("clusterName"):
            return status["clusterName"]
        for check in status.get("admissionChecks") or []:
            found = _RESERVED_ON.search(check.get("message") or "")
            if found:
                return found.group(1)
    return None
