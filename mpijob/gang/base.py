"""What hvdk8s needs to know about a gang scheduler, in one place per scheduler.

After the MPI Operator's PodGroupControl (kubeflow/mpi-operator pkg/controller/podgroup.go:
one interface, one implementation per scheduler), but for both of hvdk8s's modes: in
built-in mode hvdk8s makes the group object and labels the pods itself; in operator mode
the operator or the scheduler's own controller does, from what the MPIJob says.

Pure: objects and text. The reads a scheduler needs (is it installed, is the queue there,
why does the job wait) are done by launcher/backends/kubernetes/gang.py from what is
declared here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mpijob.findings import OK, WARN, Finding

PODS, OPERATOR = "pods", "operator"


@dataclass(frozen=True)
class ApiKind:
    """A kind of object the scheduler defines (the backend's client.Kind has the same fields)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0] if "/" in self.api_version else ""


@dataclass(frozen=True)
class GangRequest:
    """The workers of one job as a gang scheduler sees them."""

    job: str  # the job's name
    launcher: str  # the launcher's Job (names.launcher)
    queue: str | None  # --queue
    priority_class: str | None  # --priority
    group: str  # the pod group's name (names.pod_group)
    members: int  # worker pods
    gpus: int  # GPUs of all workers together
    meta: dict  # metadata for the group object (mpijob.k8s.render.metadata)
    # The rack or block the plan keeps the job in, where this scheduler enforces it
    # (mpijob.scheduling.network.NetworkDomain; None: no such constraint).
    domain: Any = None


def condition(obj: dict | None, ctype: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


class GangScheduler:
    """The protocol. Class attributes declare; methods render. A subclass per scheduler."""

    name: ClassVar[str]  # --gang-scheduler NAME
    title: ClassVar[str]  # in sentences: "queued by Volcano"
    reason_word: ClassVar[str]  # the job's reason while it waits: QueuedBy<Word>
    short_title: ClassVar[str]  # in doctor and operator-mode refusals
    group: ClassVar[str]  # the API group whose presence in discovery says it is installed
    detect_kind: ClassVar[ApiKind | None] = None  # where the group alone does not tell
    scheduler_name: ClassVar[str | None] = None  # the pods' schedulerName
    podgroup: ClassVar[ApiKind | None] = None  # the object that says why the gang waits
    created_kinds: ClassVar[tuple[ApiKind, ...]] = ()  # what objects() may return
    # Kinds of the job's objects created without an owner reference to the root, where
    # the scheduler would take an owned one out of the gang.
    unowned_kinds: ClassVar[tuple[str, ...]] = ()
    queue: ClassVar[str] = ""  # "", "optional" or "required": whether --queue applies
    # Operator mode: the MPI Operator makes this scheduler's PodGroup from
    # runPolicy.schedulingPolicy when it runs with --gang-scheduling=<operator_flag_hint>.
    operator_podgroup: ClassVar[bool] = False
    operator_flag_hint: ClassVar[str] = ""
    # Trainer mode: the scheduler admits a TrainJob whole, from these labels on it
    # (trainjob_labels); False: --mode trainjob is refused with it (mpijob.k8s.gang).
    trainjob: ClassVar[bool] = False
    # Its queues may dispatch jobs to other clusters (Kueue's MultiKueue).
    multicluster: ClassVar[bool] = False
    support: ClassVar[dict[str, str]]  # README "Gang scheduling by mode", per mode
    # It can keep a gang inside one network domain (defaults.NetworkScheduler): the
    # snapshot marks the levels it knows, and the plan's domain goes on what it reads.
    keeps_network_domain: ClassVar[bool] = False

    # -- both modes ---------------------------------------------------------------------
    def refusal(self, mode: str) -> str | None:
        """Why this scheduler cannot gang-schedule a job of `mode`, else None."""
        return None

    def trainjob_labels(self, queue: str | None) -> dict[str, str]:
        """Trainer mode: labels on the TrainJob that put it in the scheduler's queue."""
        return {}

    # -- built-in mode ------------------------------------------------------------------
    def pod_metadata(self, req: GangRequest) -> dict:
        """Labels, annotations and pod spec fields that tie each worker pod to its gang."""
        return {}

    def objects(self, req: GangRequest) -> list[dict]:
        """The objects the scheduler needs beside the pods (a PodGroup), created by hvdk8s."""
        return []

    # -- operator mode ------------------------------------------------------------------
    def operator_flag_ok(self, flag: str) -> bool:
        """Does an MPI Operator running with --gang-scheduling=`flag` make our PodGroup?"""
        return False

    def operator_scheduling_policy(self, replicas: int) -> dict | None:
        """runPolicy.schedulingPolicy for a scheduler that reads it without the operator's
        --gang-scheduling (operator_podgroup schedulers get the operator's own)."""
        return None

    def operator_labels(self, queue: str | None) -> dict[str, str]:
        """Labels on the MPIJob and on its worker pod template."""
        return {}

    # -- the plan's network domain (GangRequest.domain; objects() puts it on the group) ---
    def topology_annotations(self, domain) -> dict[str, str]:
        """Annotations of the worker pods, or of the MPIJob's worker template, that keep
        the gang inside `domain`."""
        return {}

    def root_topology_annotations(self, domain) -> dict[str, str]:
        """Annotations of the MPIJob that keep the gang inside `domain`."""
        return {}

    # -- why a job waits (read by the backend) ------------------------------------------
    def podgroup_reason(self, pg: dict | None, job: str) -> str | None:
        """The PodGroup's own reason, from its Unschedulable condition."""
        cond = condition(pg, "Unschedulable")
        if cond and cond.get("message"):
            phase = ((pg or {}).get("status") or {}).get("phase", "")
            return f"PodGroup {job} {phase}: {cond['message']}".replace("  ", " ")
        return None

    def installed(self, groups, served) -> bool:
        """Installed, from discovery: its group, and `detect_kind` where one is declared
        (`served(kind)` tells whether the API serves that kind)."""
        return self.group in groups and (self.detect_kind is None or served(self.detect_kind))

    # -- doctor -------------------------------------------------------------------------
    def doctor(self, operator_flag: str | None, has_operator: bool, facts) -> list[Finding]:
        """What doctor says when the scheduler is installed."""
        out = [Finding(self.name, OK, f"{self.short_title} installed ({self.group})",
                       f"--gang in built-in mode makes a {self.short_title} PodGroup: all "
                       "workers are bound together or none is")]
        if (self.operator_podgroup and has_operator and operator_flag is not None
                and not self.operator_flag_ok(operator_flag)):
            out.append(Finding(
                self.name, WARN, f"the MPI Operator does not run with --gang-scheduling for "
                f"{self.short_title}", f"--mode operator with {self.short_title} is refused: "
                "the operator would make no PodGroup, so its workers are not gang-scheduled",
                f"add --gang-scheduling={self.operator_flag_hint} to the mpi-operator "
                "Deployment's args, or use --mode pods"))
        return out
