"""scheduler-plugins' Coscheduling: a scheduling.x-k8s.io/v1alpha1 PodGroup; pods carry the
`scheduling.x-k8s.io/pod-group` label and use the `scheduler-plugins-scheduler` scheduler
(the name its as-a-second-scheduler Helm chart gives it)."""

from __future__ import annotations

from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler
from mpijob.gang.volcano import Volcano
from mpijob.wellknown import GPU_RESOURCE

NAME = "scheduler-plugins"
PODGROUP = ApiKind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups")
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class Coscheduling(GangScheduler):
    name = NAME
    title = "scheduler-plugins (coscheduling)"
    reason_word = "coscheduling"
    short_title = "scheduler-plugins"
    group = "scheduling.x-k8s.io"
    scheduler_name = "scheduler-plugins-scheduler"
    podgroup = PODGROUP
    created_kinds = (PODGROUP,)
    operator_podgroup = True
    operator_flag_hint = "<scheduler name>"
    support = {
        PODS: "gang-scheduled by coscheduling (PodGroup, minMember)",
        OPERATOR: "gang-scheduled by coscheduling when the MPI Operator runs with "
                  "--gang-scheduling=<scheduler name>",
    }

    def pod_metadata(self, req: GangRequest) -> dict:
        return {"labels": {GROUP_LABEL: req.group}}

    def objects(self, req: GangRequest) -> list[dict]:
        body: dict = {"minMember": req.members}
        if req.gpus:
            body["minResources"] = {GPU_RESOURCE: str(req.gpus)}
        return [{"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind,
                 "metadata": req.meta, "spec": body}]

    def operator_flag_ok(self, flag: str) -> bool:
        # The operator makes a scheduler-plugins PodGroup for any scheduler name but
        # "volcano" (mpi-operator pkg/controller/podgroup.go, NewSchedulerPluginsCtrl).
        return flag not in ("", Volcano.operator_flag_hint)
