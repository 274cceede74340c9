"""Kubernetes' Workload API and kube-scheduler's GangScheduling plugin, v1.35 (alpha, the
GenericWorkload feature gate and scheduling.k8s.io/v1alpha1 enabled).

Sources: kubernetes/enhancements keps/sig-scheduling/4671-gang-scheduling/README.md (API:
Workload.spec.podGroups[].policy.{basic,gang.minCount}, pod spec.workloadRef {name,
podGroup, podGroupReplicaKey}) and kubernetes/kubernetes pkg/scheduler/framework/plugins/
gangscheduling/gangscheduling.go:

- PreEnqueue: a pod with a workloadRef waits outside the scheduling queue while its Workload
  does not exist ("waiting for pods's workload %q to appear in scheduling queue") or the
  pod group has fewer than minCount pods ("waiting for minCount pods from a gang to appear
  in scheduling queue"); PreEnqueue rejections set no pod condition. A pod group the
  Workload does not list keeps its pods out too; a `basic` policy is ordinary scheduling.
- Reserve/Permit: a member that fits is assumed and waits at Permit until minCount members
  of the group are assumed or assigned; then all are allowed and bound together.

Collapsed here: the scheduler places a group's pending members in one pass; when fewer than
minCount (with those already bound) fit, none is bound, the members that did not fit get
kube-scheduler's FailedScheduling message and the others stay pending without a condition,
as they would while waiting at Permit (its timeout and the retry are not modelled).
"""

from __future__ import annotations

from .util import dig

WORKLOAD_KEY = "scheduling.k8s.io/workloads"


def ref_of(pod: dict) -> dict | None:
    return pod["spec"].get("workloadRef") or None


def gang_key(pod: dict) -> tuple | None:
    ref = ref_of(pod)
    if ref is None:
        return None
    return (pod["metadata"]["namespace"], ref.get("name"), ref.get("podGroup"),
            ref.get("podGroupReplicaKey") or "")


def policy(workload: dict | None, pod_group: str) -> dict | None:
    """The pod group's policy; None when the Workload or the group does not exist."""
    for group in dig(workload or {}, "spec.podGroups") or []:
        if group.get("name") == pod_group:
            return group.get("policy") or {}
    return None


def min_count(pol: dict) -> int | None:
    """minCount of a gang policy; None for a basic one."""
    gang = pol.get("gang")
    return int(gang.get("minCount") or 1) if gang is not None else None
