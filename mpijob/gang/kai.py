"""NVIDIA KAI Scheduler: a scheduling.run.ai/v2alpha2 PodGroup with minMember and a queue.

Read from github.com/NVIDIA/KAI-Scheduler (pkg/common/constants/constants.go,
pkg/podgrouper/..., pkg/apis/scheduling/v2alpha2/podgroup_types.go); the test API server's
model (kubesim/kai.py) cites the same files for what it does.

- Pods use the `kai-scheduler` scheduler (DefaultSchedulerName) and name their queue in the
  `kai.scheduler/queue` label (DefaultQueueLabel; a cluster-scoped scheduling.run.ai/v2
  Queue; without one KAI's podgrouper uses `default-queue`).
- Built-in mode: KAI's podgrouper (pkg/podgrouper/pod_controller.go) makes a PodGroup for
  each kai-scheduler pod from its top owner. For a pod owned by a batch Job that is one
  PodGroup per pod with minMember 1 (plugins/job/job_grouper.go, defaultgrouper
  MinAvailable: 1): no gang. It leaves alone only a pod that names its PodGroup in the
  `pod-group-name` annotation and has no owner (isOrphanPodWithPodGroup). So hvdk8s makes
  the PodGroup itself (minMember = workers) and creates the workers without an owner
  reference; `hvdk8s delete` finds them by label as before.
- Operator mode: the podgrouper groups the MPIJob's pods by the MPIJob (plugins/kubeflow/
  mpi/mpi-grouper.go): minMember is runPolicy.schedulingPolicy.minAvailable when set, else
  every replica, less the launcher while WaitForWorkersReady holds it back. hvdk8s sets
  minAvailable = workers (the launcher uses the default scheduler, outside the gang), the
  queue label on the MPIJob (CalcPodGroupQueue reads the top owner's labels first) and the
  kai-scheduler name on the worker template only. The MPI Operator's own --gang-scheduling
  is not involved.
- Why a gang waits: the scheduler's status updater (pkg/scheduler/cache/status_updater/
  default_status_updater.go) writes an `Unschedulable` event on the PodGroup and a
  status.schedulingConditions entry (type UnschedulableOnNodePool) with the message, and
  a `NotReady` event while fewer pods than minMember exist.
"""

from __future__ import annotations

from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler

NAME = "kai"
PODGROUP = ApiKind("scheduling.run.ai/v2alpha2", "PodGroup", "podgroups")
QUEUE = ApiKind("scheduling.run.ai/v2", "Queue", "queues", namespaced=False)
TOPOLOGY = ApiKind("kai.scheduler/v1alpha1", "Topology", "topologies", namespaced=False)
SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
GROUP_ANNOTATION = "pod-group-name"
DEFAULT_QUEUE = "default-queue"
UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
# What the podgrouper reads off a top owner (plugins/constants/constants.go).
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
REQUIRED_PLACEMENT = "kai.scheduler/topology-required-placement"
PREFERRED_PLACEMENT = "kai.scheduler/topology-preferred-placement"


def podgroup_name(root: dict, own: str) -> str:
    """The job's PodGroup: hvdk8s's own (`own`, names.pod_group) in built-in mode; in
    operator mode the podgrouper's for the MPIJob, "pg-<name>-<uid>" (defaultgrouper
    CalcPodGroupName)."""
    if root.get("kind") == "MPIJob":
        return f"pg-{root['metadata']['name']}-{root['metadata']['uid']}"
    return own


def queue_of(queue: str | None) -> str:
    return queue or DEFAULT_QUEUE


class Kai(GangScheduler):
    name = NAME
    title = reason_word = short_title = "KAI"
    group = "scheduling.run.ai"
    scheduler_name = SCHEDULER_NAME
    podgroup = PODGROUP
    created_kinds = (PODGROUP,)
    queue = "optional"
    keeps_network_domain = True
    unowned_kinds = ("Pod",)
    support = {
        PODS: "gang-scheduled by KAI (PodGroup, minMember; workers not owned by the Job, "
              "so KAI's podgrouper leaves them in it)",
        OPERATOR: "gang-scheduled by KAI (its podgrouper groups the MPIJob's workers, "
                  "minMember = schedulingPolicy.minAvailable)",
    }

    def pod_metadata(self, req: GangRequest) -> dict:
        return {"labels": {QUEUE_LABEL: queue_of(req.queue)},
                "annotations": {GROUP_ANNOTATION: req.group}}

    def objects(self, req: GangRequest) -> list[dict]:
        body: dict = {"minMember": req.members, "queue": queue_of(req.queue)}
        if req.priority_class:
            body["priorityClassName"] = req.priority_class
        if (constraint := self._constraint(req.domain)) is not None:
            body["topologyConstraint"] = constraint
        return [{"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind,
                 "metadata": req.meta, "spec": body}]

    def operator_labels(self, queue: str | None) -> dict[str, str]:
        return {QUEUE_LABEL: queue_of(queue)}

    def operator_scheduling_policy(self, replicas: int) -> dict | None:
        return {"minAvailable": replicas}

    # KAI topology-aware scheduling (docs/topology in KAI-Scheduler): required = the level
    # hvdk8s's plan keeps the job in, preferred = the rack inside a block. On hvdk8s's
    # PodGroup as spec.topologyConstraint; on the MPIJob as the annotations KAI's
    # podgrouper copies into the PodGroup it makes (defaultgrouper).
    @staticmethod
    def _constraint(domain) -> dict | None:
        if domain is None or not (domain.label and domain.topology):
            return None
        constraint = {"topology": domain.topology, "requiredTopologyLevel": domain.label}
        if domain.inner_label:
            constraint["preferredTopologyLevel"] = domain.inner_label
        return constraint

    def root_topology_annotations(self, domain) -> dict[str, str]:
        constraint = self._constraint(domain)
        if constraint is None:
            return {}
        notes = {TOPOLOGY_ANNOTATION: constraint["topology"],
                 REQUIRED_PLACEMENT: constraint["requiredTopologyLevel"]}
        if "preferredTopologyLevel" in constraint:
            notes[PREFERRED_PLACEMENT] = constraint["preferredTopologyLevel"]
        return notes

    def podgroup_reason(self, pg: dict | None, job: str) -> str | None:
        for c in ((pg or {}).get("status") or {}).get("schedulingConditions") or []:
            if c.get("type") == UNSCHEDULABLE_ON_NODE_POOL and c.get("message"):
                return f"PodGroup {job}: {c['message']}"
        return None

    def event_reason(self, events: list[dict], job: str) -> str | None:
        """The newest Unschedulable or NotReady event on the PodGroup, when the status has
        nothing yet (NotReady never reaches the status)."""
        for ev in sorted(events, key=lambda e: e.get("lastTimestamp") or "", reverse=True):
            if ev.get("reason") in ("Unschedulable", "NotReady") and ev.get("message"):
                return f"PodGroup {job}: {ev['message']}"
        return None
