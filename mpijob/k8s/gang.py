"""Gang scheduling objects: all of a job's workers are scheduled together or not at all.

- Volcano: a scheduling.volcano.sh/v1beta1 PodGroup; pods name it in the
  `scheduling.k8s.io/group-name` annotation and use the `volcano` scheduler.
- scheduler-plugins (coscheduling): a scheduling.x-k8s.io/v1alpha1 PodGroup; pods carry
  the `scheduling.x-k8s.io/pod-group` label.
- Kueue: plain pods join a pod group through the `kueue.x-k8s.io/pod-group-name` label and
  the total count annotation, and are admitted together from the named LocalQueue.
"""

from __future__ import annotations

from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.render import WorkerPod, metadata
from mpijob.wellknown import GPU_RESOURCE

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"


# Why Kueue cannot gang-schedule built-in mode's pods (cited in launcher/testing/kubeapi/kueue.py):
# - its `pod` integration is off in the default configuration before v0.16
#   (config/components/manager/controller_manager_config.yaml, kueue commit 42eb7ddf),
#   and with it off the queue labels on bare pods are ignored: no gang at all;
# - with it on, pods of a group whose specs differ in affinity or resources become separate
#   PodSets (pkg/util/pod/pod.go GenerateRoleHash/SpecShape), one per planned node here, and
#   a Workload holds at most 8 PodSets (apis/kueue/v1beta1/workload_types.go MaxItems=8).
KUEUE_PODS_REFUSED = (
    "--gang-scheduler kueue does not gang-schedule built-in mode's pods (Kueue ignores bare "
    "pods unless its `pod` integration is on, off by default before v0.16, and splits "
    "per-node worker pods into separate PodSets, at most 8 per Workload); use --mode "
    "operator, which Kueue admits whole through its MPIJob integration")

# README "Gang scheduling by mode": what `--gang` gets for each (mode, gang scheduler).
SUPPORT = {
    ("pods", "none"): "hvdk8s's own all-or-nothing check: re-checked capacity, rollback "
                      "if not every worker is scheduled within --schedule-timeout",
    ("pods", "volcano"): "gang-scheduled by Volcano (PodGroup, minMember)",
    ("pods", "scheduler-plugins"): "gang-scheduled by coscheduling (PodGroup, minMember)",
    ("pods", "kueue"): "refused: " + KUEUE_PODS_REFUSED,
    ("operator", "none"): "--gang refused (nothing holds the operator's pods back); use "
                          "--mode pods",
    ("operator", "volcano"): "gang-scheduled by Volcano when the MPI Operator runs with "
                             "--gang-scheduling=volcano (it makes the PodGroup)",
    ("operator", "scheduler-plugins"): "gang-scheduled by coscheduling when the MPI Operator "
                                       "runs with --gang-scheduling=<scheduler name>",
    ("operator", "kueue"): "gang-admitted by Kueue's MPIJob integration (one Workload, "
                           "suspended until admitted)",
}


def refusal(gang: str, mode: str) -> str | None:
    """Why this (gang scheduler, mode) pair cannot be gang-scheduled for real, else None."""
    if gang == "kueue" and mode == "pods":
        return KUEUE_PODS_REFUSED
    return None


def gang_pod_metadata(spec: JobSpec, pod_count: int) -> dict:
    """Labels and annotations that tie each worker pod to its gang."""
    group = names.pod_group(spec.name)
    if spec.gang == "volcano":
        return {"annotations": {VOLCANO_GROUP_ANNOTATION: group}}
    if spec.gang == "scheduler-plugins":
        return {"labels": {PLUGINS_GROUP_LABEL: group}}
    if spec.gang == "kueue":
        return {
            "labels": {KUEUE_QUEUE_LABEL: spec.queue, KUEUE_GROUP_LABEL: group},
            "annotations": {KUEUE_COUNT_ANNOTATION: str(pod_count)},
        }
    return {}


def _min_resources(pods: list[WorkerPod]) -> dict:
    gpus = sum(p.gpu_count for p in pods)
    return {GPU_RESOURCE: str(gpus)} if gpus else {}


def gang_objects(spec: JobSpec, pods: list[WorkerPod]) -> list[dict]:
    """The PodGroup the gang scheduler needs (Kueue needs none for plain pods)."""
    meta = metadata(spec, names.pod_group(spec.name))
    if spec.gang == "volcano":
        # No minResources: Volcano keeps a PodGroup whose minResources exceed the idle
        # resources Pending, and its pod webhook (before v1.6) refuses the group's pods
        # while it is Pending, so a busy cluster would make submit fail instead of queue.
        # Without it the group is enqueued at once; minMember still binds all or none
        # (launcher/testing/kubeapi/volcano.py cites both).
        body: dict = {"minMember": len(pods)}
        if spec.queue:
            body["queue"] = spec.queue
        if spec.priority_class:
            body["priorityClassName"] = spec.priority_class
        return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": meta, "spec": body}]
    if spec.gang == "scheduler-plugins":
        body = {"minMember": len(pods)}
        if (res := _min_resources(pods)):
            body["minResources"] = res
        return [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": meta, "spec": body}]
    return []
