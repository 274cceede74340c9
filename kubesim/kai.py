"""NVIDIA KAI Scheduler as a client meets it: its podgrouper and its gang allocation.

Modelled on github.com/NVIDIA/KAI-Scheduler at 72de64f (2026-03):

- Names (pkg/common/constants/constants.go): scheduler `kai-scheduler`, queue label
  `kai.scheduler/queue`, a pod's PodGroup in the `pod-group-name` annotation. PodGroup
  scheduling.run.ai/v2alpha2 (spec.minMember, spec.queue, spec.topologyConstraint), Queue
  scheduling.run.ai/v2 (cluster-scoped), Topology kai.scheduler/v1alpha1 (cluster-scoped).
- PodGrouper (pkg/podgrouper/pod_controller.go Reconcile): only pods whose schedulerName is
  KAI's; a pod with a `pod-group-name` annotation and no ownerReferences is left alone
  (isOrphanPodWithPodGroup). Otherwise the owner chain is walked to the top owner
  (podgrouper.go getResourceOwners) and the plugin for its kind (hub/hub.go) gives the
  PodGroup, which is created or updated, and the pod's annotation is set to it
  (assignPodToGroupAndSubGroup), replacing any other:
  - batch Job: one PodGroup per pod, "pg-<pod>-<job uid>" (plugins/job/job_grouper.go);
  - kubeflow.org MPIJob: "pg-<mpijob>-<uid>" (defaultgrouper CalcPodGroupName);
    minMember = runPolicy.schedulingPolicy.minAvailable when set, else the sum of the
    replicas, less the launcher's while launcherCreationPolicy WaitForWorkersReady holds it
    back (plugins/kubeflow/distributed_common.go, plugins/kubeflow/mpi/mpi-grouper.go);
  - the pod itself (no owner) and any other kind: the default grouper, "pg-<owner>-<uid>",
    minMember 1 (defaultgrouper/default_grouper.go).
  Queue: the top owner's `kai.scheduler/queue` label, else the pod's, else `default-queue`
  (CalcPodGroupQueue, project labels not modelled). Topology: the top owner's
  kai.scheduler/topology, -required-placement, -preferred-placement annotations.
- Allocation (pkg/scheduler/actions/common/allocate.go, status_updater/
  default_status_updater.go): a PodGroup whose queue does not exist is skipped
  (cache/cluster_info/cluster_info.go "Queue '%s' does not exist"). While fewer pods than
  minMember exist, the PodGroup gets a `NotReady` event ("Job is not ready for scheduling.
  Waiting for %d pods, currently %d exist, %d are gated") and nothing is bound. Otherwise
  the pending pods are placed together or not at all; when they do not all fit, the
  PodGroup gets an `Unschedulable` event and a status.schedulingConditions entry
  (UnschedulableOnNodePool, node pool "default") with "Resources were found for %d pods
  while %d are required for gang scheduling. Additional pods cannot be scheduled due to:
  <fit error>", and each pending pod an Unschedulable event and PodScheduled=False
  condition (markUnschedulable defaults to true). Fit errors read as KAI's
  (common_info/pod_errors.go): "no nodes with enough resources were found: <n> node(s)
  didn't have enough resources: GPUs."; other node filters keep kube-scheduler's text.

Not modelled: queue quotas and fair share (proportion), reclaim and preemption,
consolidation, subgroups, topology-constrained placement (the constraint is stored and
shown, placement ignores it), node pools beyond "default", the podgrouper's priority
classes and preemptibility.
"""

from __future__ import annotations

from collections import Counter

from . import events
from .controller import Loop
from .util import deepcopy, dig, now_rfc3339

SCHEDULER_NAME = "kai-scheduler"
PODGROUP_KEY = "scheduling.run.ai/podgroups"
QUEUE_KEY = "scheduling.run.ai/queues"
GROUP_ANNOTATION = "pod-group-name"
QUEUE_LABEL = "kai.scheduler/queue"
DEFAULT_QUEUE = "default-queue"
PODGROUPER = "pod-grouper"
NOT_FOUND = "no nodes with enough resources were found"
TOPOLOGY_ANNOTATIONS = {"kai.scheduler/topology": "topology",
                        "kai.scheduler/topology-required-placement": "requiredTopologyLevel",
                        "kai.scheduler/topology-preferred-placement": "preferredTopologyLevel"}
# kube-scheduler's NodeResourcesFit reasons, as KAI's resource predicates say them.
_RESOURCE_WORDS = {"Insufficient nvidia.com/gpu": "GPUs", "Insufficient cpu": "CPU cores",
                   "Insufficient memory": "memory"}


def podgroup_of(pod: dict) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)


def fit_error(per_node: list[list[str]]) -> str:
    """TasksFitErrors.Error(): a histogram of the nodes' reasons."""
    reasons: Counter = Counter()
    for node_reasons in per_node:
        reasons.update(f"node(s) didn't have enough resources: {_RESOURCE_WORDS[r]}"
                       if r in _RESOURCE_WORDS else r for r in node_reasons)
    parts = sorted(f"{n} {r}" for r, n in reasons.items())
    return NOT_FOUND + (f": {'. '.join(parts)}." if parts else "")


def gang_message(found: int, min_member: int, why: str) -> str:
    return (f"Resources were found for {found} pods while {min_member} are required for gang "
            f"scheduling. Additional pods cannot be scheduled due to: {why}")


def not_ready_message(min_member: int, alive: int, gated: int) -> str:
    return (f"Job is not ready for scheduling. Waiting for {min_member} pods, currently "
            f"{alive} exist, {gated} are gated")


def mark_unschedulable(status: dict, message: str) -> None:
    """setPodGroupSchedulingCondition: one UnschedulableOnNodePool entry per node pool."""
    conds = [c for c in status.get("schedulingConditions") or []
             if not (c.get("type") == "UnschedulableOnNodePool" and c.get("nodePool") == "default")]
    conds.append({"type": "UnschedulableOnNodePool", "nodePool": "default",
                  "reason": "Unschedulable", "message": message, "status": "True",
                  "lastTransitionTime": now_rfc3339()})
    status["schedulingConditions"] = conds


class KaiPodGrouper(Loop):
    """KAI's pod-grouper Deployment: a PodGroup for every kai-scheduler pod."""

    name = "kai-podgrouper"

    def __init__(self, store, registry, objects, tick: float = 0.02):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects

    def _step(self) -> None:
        with self.store.lock:
            pods = [p for p in self.store.items("/pods")
                    if p["spec"].get("schedulerName") == SCHEDULER_NAME
                    and not p["metadata"].get("deletionTimestamp")]
        for pod in pods:
            m = pod["metadata"]
            if podgroup_of(pod) and not m.get("ownerReferences"):
                continue  # isOrphanPodWithPodGroup
            meta = self.metadata(pod)
            if meta is None:
                continue  # the owner is gone: the real grouper logs and retries
            self._apply(meta)
            if podgroup_of(pod) != meta["metadata"]["name"]:
                self.store.mutate("/pods", m["namespace"], m["name"], lambda p, n=meta[
                    "metadata"]["name"]: p["metadata"].setdefault("annotations", {}).__setitem__(
                    GROUP_ANNOTATION, n))

    def _owner(self, ref: dict, ns: str) -> dict | None:
        key = {"Job": "batch/jobs", "MPIJob": "kubeflow.org/mpijobs"}.get(ref.get("kind"))
        if key:
            obj = self.store.get(key, ns, ref["name"])
            return obj if obj is not None and obj["metadata"]["uid"] == ref.get("uid") else None
        return {"kind": ref.get("kind"), "metadata": {"name": ref["name"], "uid": ref.get("uid"),
                                                      "namespace": ns}}

    def metadata(self, pod: dict) -> dict | None:
        """GetPodOwners + GetPGMetadata: the PodGroup this pod belongs in."""
        ns = pod["metadata"]["namespace"]
        top = pod
        for _ in range(10):
            refs = top["metadata"].get("ownerReferences") or []
            if not refs:
                break
            owner = self._owner(refs[0], ns)
            if owner is None:
                return None
            top = owner
        tm = top["metadata"]
        min_member = 1
        name = f"pg-{tm['name']}-{tm['uid']}"
        if top is not pod and top.get("kind") == "Job":
            name = f"pg-{pod['metadata']['name']}-{tm['uid']}"
        elif top.get("kind") == "MPIJob":
            min_member = self._mpijob_min_member(top, ns)
        queue = ((tm.get("labels") or {}).get(QUEUE_LABEL)
                 or (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL) or DEFAULT_QUEUE)
        spec: dict = {"minMember": min_member, "queue": queue}
        notes = tm.get("annotations") or {}
        if constraint := {field: notes[a] for a, field in TOPOLOGY_ANNOTATIONS.items()
                          if notes.get(a)}:
            spec["topologyConstraint"] = constraint
        return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns, "labels": dict(tm.get("labels") or {}),
                             "ownerReferences": [{
                                 "apiVersion": top.get("apiVersion", "v1"),
                                 "kind": top.get("kind", "Pod"), "name": tm["name"],
                                 "uid": tm["uid"]}]},
                "spec": spec}

    def _mpijob_min_member(self, mpijob: dict, ns: str) -> int:
        given = dig(mpijob, "spec.runPolicy.schedulingPolicy.minAvailable")
        if given is not None:
            return int(given)
        specs = dig(mpijob, "spec.mpiReplicaSpecs") or {}
        total = sum(int(s.get("replicas") or 0) for s in specs.values())
        if dig(mpijob, "spec.launcherCreationPolicy") == "WaitForWorkersReady":
            launchers = [p for p in self.store.items("/pods", ns)
                         if (p["metadata"].get("labels") or {}).get(
                             "training.kubeflow.org/job-name") == mpijob["metadata"]["name"]
                         and (p["metadata"].get("labels") or {}).get(
                             "training.kubeflow.org/job-role") == "launcher"
                         and not p["metadata"].get("deletionTimestamp")]
            if not launchers:
                total -= int(dig(mpijob, "spec.mpiReplicaSpecs.Launcher.replicas") or 0)
        return total

    def _apply(self, pg: dict) -> None:
        """PodGroupHandler.ApplyToCluster: create, or bring spec and labels up to date."""
        m = pg["metadata"]
        if self.store.get(PODGROUP_KEY, m["namespace"], m["name"]) is None:
            self.objects.create(self.registry.by_key(PODGROUP_KEY), deepcopy(pg), m["namespace"])
            return

        def edit(cur):
            cur["spec"] = {**cur.get("spec", {}), **pg["spec"]}
            cur["metadata"].setdefault("labels", {}).update(m["labels"])
        self.store.mutate(PODGROUP_KEY, m["namespace"], m["name"], edit)


def record_podgroup_event(store, pg: dict, reason: str, message: str, last: dict) -> None:
    """Events as the status updater records them (client-go aggregates repeats: one here)."""
    key = (pg["metadata"]["uid"], reason)
    if last.get(key) != message:
        last[key] = message
        events.record(store, pg, "Normal", reason, message, SCHEDULER_NAME)
