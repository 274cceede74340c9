"""Volcano: a scheduling.volcano.sh/v1beta1 PodGroup; pods name it in the
`scheduling.k8s.io/group-name` annotation and use the `volcano` scheduler."""

from __future__ import annotations

from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler

NAME = "volcano"
PODGROUP = ApiKind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


class Volcano(GangScheduler):
    name = NAME
    title = reason_word = short_title = "Volcano"
    group = "scheduling.volcano.sh"
    scheduler_name = "volcano"
    podgroup = PODGROUP
    created_kinds = (PODGROUP,)
    queue = "optional"
    keeps_network_domain = True
    operator_podgroup = True
    operator_flag_hint = "volcano"
    support = {
        PODS: "gang-scheduled by Volcano (PodGroup, minMember)",
        OPERATOR: "gang-scheduled by Volcano when the MPI Operator runs with "
                  "--gang-scheduling=volcano (it makes the PodGroup)",
    }

    def pod_metadata(self, req: GangRequest) -> dict:
        return {"annotations": {GROUP_ANNOTATION: req.group}}

    def objects(self, req: GangRequest) -> list[dict]:
        # No minResources: Volcano keeps a PodGroup whose minResources exceed the idle
        # resources Pending, and its pod webhook (before v1.6) refuses the group's pods
        # while it is Pending, so a busy cluster would make submit fail instead of queue.
        # Without it the group is enqueued at once; minMember still binds all or none
        # (kubesim/volcano.py cites both).
        body: dict = {"minMember": req.members}
        if req.queue:
            body["queue"] = req.queue
        if req.priority_class:
            body["priorityClassName"] = req.priority_class
        if req.domain is not None:
            # Volcano network-topology-aware scheduling: `spec.networkTopology: {mode: hard,
            # highestTierAllowed: N}` keeps the whole group inside one HyperNode of tier
            # <= N (https://volcano.sh/en/docs/network_topology_aware_scheduling/, "Network
            # Topology Constraints"). The PodGroup the MPI operator makes from
            # schedulingPolicy has no such field: nothing in operator mode.
            body["networkTopology"] = {"mode": "hard",
                                       "highestTierAllowed": req.domain.volcano_tier}
        return [{"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind,
                 "metadata": req.meta, "spec": body}]

    def operator_flag_ok(self, flag: str) -> bool:
        return flag == self.operator_flag_hint
