"""Kueue: admits a whole job from a LocalQueue. Built-in mode's plain pods are refused
(below); in operator mode its MPIJob integration suspends the MPIJob until it admits it
whole (one Workload), and the MPIJob and its pod templates name the queue."""

from __future__ import annotations

from mpijob.findings import INFO, OK, WARN, Finding
from mpijob.gang.base import OPERATOR, PODS, GangScheduler, condition

NAME = "kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # Kueue labels a job's Workload with its uid
MPIJOB_FRAMEWORK = "kubeflow.org/mpijob"
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
# Kueue topology-aware scheduling: this pod template annotation makes Kueue admit the pod
# set only inside one domain of the level whose node label it names (Kueue docs, "Run
# Workloads with Topology-Aware Scheduling",
# https://kueue.sigs.k8s.io/docs/tasks/run/topology_aware_scheduling/).
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"

# Why Kueue cannot gang-schedule built-in mode's pods (cited in kubesim/kueue.py):
# - its `pod` integration is off in the default configuration before v0.16
#   (config/components/manager/controller_manager_config.yaml, kueue commit 42eb7ddf),
#   and with it off the queue labels on bare pods are ignored: no gang at all;
# - with it on, pods of a group whose specs differ in affinity or resources become separate
#   PodSets (pkg/util/pod/pod.go GenerateRoleHash/SpecShape), one per planned node here, and
#   a Workload holds at most 8 PodSets (apis/kueue/v1beta1/workload_types.go MaxItems=8).
PODS_REFUSED = (
    "--gang-scheduler kueue does not gang-schedule built-in mode's pods (Kueue ignores bare "
    "pods unless its `pod` integration is on, off by default before v0.16, and splits "
    "per-node worker pods into separate PodSets, at most 8 per Workload); use --mode "
    "operator, which Kueue admits whole through its MPIJob integration")
MPIJOB_OFF = ("--gang-scheduler kueue: Kueue does not manage MPIJobs here (its "
              "kubeflow.org/mpijob integration is off), so the job would not be "
              "gang-admitted; add kubeflow.org/mpijob to integrations.frameworks in "
              "kueue-system/kueue-manager-config, or use --gang-scheduler volcano")


def frameworks(config: dict | None) -> set[str] | None:
    """Kueue's integrations.frameworks from its controller_manager_config.yaml."""
    if config is None:
        return None
    return set(((config.get("integrations") or {}).get("frameworks")) or [])


def suspended(root: dict) -> bool:
    """Kueue's job webhook suspends every MPIJob naming a queue (jobframework
    ApplyDefaultForSuspend) until it admits it: suspended = waiting, or not managed."""
    if root.get("kind") == "TrainJob":  # its TrainJob integration, the same way
        return bool((root.get("spec") or {}).get("suspend"))
    return root.get("kind") == "MPIJob" and bool(
        ((root.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


class Kueue(GangScheduler):
    name = NAME
    title = reason_word = short_title = "Kueue"
    group = "kueue.x-k8s.io"
    queue = "required"
    support = {
        PODS: "refused: " + PODS_REFUSED,
        OPERATOR: "gang-admitted by Kueue's MPIJob integration (one Workload, suspended "
                  "until admitted)",
    }

    trainjob = True  # its trainer.kubeflow.org/trainjob integration
    multicluster = True  # MultiKueue

    def refusal(self, mode: str) -> str | None:
        return PODS_REFUSED if mode == PODS else None

    def trainjob_labels(self, queue: str | None) -> dict[str, str]:
        return {QUEUE_LABEL: queue} if queue else {}

    def operator_labels(self, queue: str | None) -> dict[str, str]:
        return {QUEUE_LABEL: queue} if queue else {}

    keeps_network_domain = True  # by the pod set's required topology:

    def topology_annotations(self, domain) -> dict[str, str]:
        return {REQUIRED_TOPOLOGY: domain.label} if domain.label else {}

    def workload_reason(self, workloads: list[dict]) -> str:
        """Why Kueue has not admitted the job, from its Workload's QuotaReserved condition."""
        if not workloads:
            return ("suspended until Kueue admits it (no Workload yet: is Kueue's MPIJob "
                    "integration on? hvdk8s doctor tells)")
        cond = condition(workloads[0], "QuotaReserved")
        name = workloads[0]["metadata"]["name"]
        if cond and cond.get("status") == "False" and cond.get("message"):
            return f"{name}: {cond['message']}"
        return f"{name}: waiting for admission"

    def doctor(self, operator_flag: str | None, has_operator: bool, facts) -> list[Finding]:
        found = frameworks(facts.kueue_config)
        base = Finding(self.name, OK, "Kueue installed (kueue.x-k8s.io)",
                       "built-in mode with Kueue is refused (per-node pods would be separate "
                       "PodSets, at most 8 per Workload); use --mode operator --queue NAME")
        if found is None:
            return [base, Finding(self.name, WARN, "Kueue's integrations are unknown: "
                                  f"{facts.kueue_config_error or 'kueue-system/kueue-manager-config '}",
                                  "cannot tell whether Kueue admits MPIJobs",
                                  "allow get on configmaps in kueue-system, or check "
                                  "integrations.frameworks there")]
        out = [base]
        if MPIJOB_FRAMEWORK in found:
            out.append(Finding(self.name, OK, "MPIJob integration on (kubeflow.org/mpijob)",
                               "--mode operator --queue NAME: Kueue suspends the MPIJob until "
                               "its whole quota is admitted"))
        else:
            out.append(Finding(self.name, WARN, "MPIJob integration off",
                               "Kueue ignores MPIJobs: --mode operator with a Kueue queue is "
                               "not gang-admitted", "add kubeflow.org/mpijob to "
                               "integrations.frameworks in kueue-system/kueue-manager-config "
                               "and restart kueue-controller-manager"))
        out.append(Finding(self.name, INFO, "pod integration " + (
            "on" if "pod" in found else "off (the default before v0.16)"),
            "hvdk8s does not rely on it: built-in mode is refused with Kueue"))
        return out
