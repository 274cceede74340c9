"""Kubernetes' own gang scheduling: the Workload API (KEP-4671, alpha in 1.35 behind the
GenericWorkload feature gate; kubernetes/enhancements keps/sig-scheduling/4671-gang-scheduling).

A `scheduling.k8s.io/v1alpha1` Workload lists pod groups, each with a policy; a `gang`
policy's `minCount` pods must be schedulable at once or none is bound (kube-scheduler's
GangScheduling plugin: PreEnqueue holds the pods until the Workload and minCount pods
exist, Permit holds assumed pods until minCount are assumed; pkg/scheduler/framework/
plugins/gangscheduling/gangscheduling.go). A pod joins by `spec.workloadRef` {name,
podGroup}. No add-on, no queue: the pods keep the default scheduler.

Only what 1.35 serves: in 1.36 (KEP-5832) PodGroups became their own objects and the pod
field became spec.schedulingGroup; a cluster serving only that is not used (discovery says
which: `detect_kind`). The MPI Operator sets no workloadRef on its pods: refused there.
"""

from __future__ import annotations

from mpijob.findings import OK, Finding
from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler

NAME = "workload-api"
WORKLOAD = ApiKind("scheduling.k8s.io/v1alpha1", "Workload", "workloads")
POD_GROUP = "workers"
OPERATOR_REFUSED = ("--gang-scheduler workload-api with --mode operator: the MPI Operator "
                    "does not set spec.workloadRef on its pods, so they would not be "
                    "gang-scheduled; use --mode pods")


class WorkloadApi(GangScheduler):
    name = NAME
    title = "Kubernetes' Workload API (gang policy)"
    reason_word = "Workload"
    short_title = "the Workload API"
    group = "scheduling.k8s.io"
    detect_kind = WORKLOAD  # the group alone also serves PriorityClasses
    created_kinds = (WORKLOAD,)
    support = {
        PODS: "gang-scheduled by kube-scheduler's GangScheduling plugin (Kubernetes 1.35+ "
              "with the Workload API served): a Workload with a gang policy, minCount = "
              "worker pods; the pods' spec.workloadRef names it",
        OPERATOR: "refused: " + OPERATOR_REFUSED,
    }

    def refusal(self, mode: str) -> str | None:
        return OPERATOR_REFUSED if mode == OPERATOR else None

    def doctor(self, operator_flag: str | None, has_operator: bool, facts) -> list[Finding]:
        return [Finding(self.name, OK, f"{self.short_title} served ({WORKLOAD.api_version} "
                        f"{WORKLOAD.plural})", "--gang in built-in mode without a gang "
                        "scheduler add-on makes a Workload with a gang policy (minCount = "
                        "worker pods): kube-scheduler binds all workers or none")]

    def pod_metadata(self, req: GangRequest) -> dict:
        return {"spec": {"workloadRef": {"name": req.group, "podGroup": POD_GROUP}}}

    def objects(self, req: GangRequest) -> list[dict]:
        return [{"apiVersion": WORKLOAD.api_version, "kind": WORKLOAD.kind,
                 "metadata": req.meta,
                 "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job",
                                            "name": req.launcher},
                          "podGroups": [{"name": POD_GROUP,
                                         "policy": {"gang": {"minCount": req.members}}}]}}]
