"""The reads and checks a gang scheduler needs around a submit, one control per kind of
scheduler (what each declares is in mpijob.gang): is it installed, does it take the job at
all, and, once the job waits, why.

A PodGroup scheduler (Volcano, coscheduling) writes why on the job's PodGroup; Kueue on the
Workload it made for the MPIJob.
"""

from __future__ import annotations

from launcher.backends.base import PENDING
from launcher.backends.kubernetes import operator as operator_gang
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import (
    EVENT,
    KUEUE_LOCALQUEUE,
    KUEUE_WORKLOAD,
    ApiError,
    api_kind,
)
from launcher.backends.kubernetes.cluster_reads import kueue_config
from launcher.errors import UsageError
from mpijob import gang as gangs
from mpijob.gang import kai, kueue
from mpijob.jobspec import names


class GangControl:
    """A gang scheduler that groups pods by a PodGroup (mpijob.gang.GangScheduler.podgroup)."""

    def __init__(self, scheduler: gangs.GangScheduler):
        self.scheduler = scheduler

    def require(self, client, spec, mode: str) -> None:
        """Refuse, before anything is created, a job this scheduler would not take."""
        s = self.scheduler
        if not s.installed(client.api_groups(), lambda kind: client.serves(api_kind(kind))):
            what = (f"{s.group} API group" if s.detect_kind is None else
                    f"{s.detect_kind.api_version} {s.detect_kind.plural} served")
            raise UsageError(f"--gang-scheduler {s.name}: {s.title} is not installed (no "
                             f"{what}); install it, or pick another --gang-scheduler ("
                             "hvdk8s doctor lists what this cluster has)")
        if mode == gangs.OPERATOR and s.operator_podgroup:
            operator_gang.precheck(client, s)

    def operator_created(self, client, root: dict, spec, timeout: float, poll: float) -> str:
        """What submit says once the MPIJob exists (UserError: it will not be gang-scheduled)."""
        s, outcome = self.scheduler, f"MPIJob {spec.name} created; the MPI operator creates its pods"
        if s.operator_podgroup:
            seen = operator_gang.confirm(client, s, spec.name, spec.namespace,
                                         min(timeout, 30.0), poll)
            if seen is None:
                outcome += " (no PodGroup or worker seen yet: is the operator running?)"
            elif seen.finished:
                outcome = (f"MPIJob {spec.name} created; the MPI operator ran it and it has "
                           f"already {seen.finished.lower()}")
            else:
                outcome += f" in {s.title}'s PodGroup {spec.name}"
        return outcome

    def waiting_reason(self, client, root: dict, status) -> str | None:
        """Why the gang waits, in the scheduler's words (None: it does not wait for it)."""
        waiting = _unschedulable_workers(status)
        if not waiting:
            return None
        if self.scheduler.podgroup is None:  # the workers' own conditions say it
            return "; ".join(f"{r.name}: {r.message}" for r in waiting if r.message) or None
        job = st.job_name_of(root) or root["metadata"]["name"]
        pg = client.get(api_kind(self.scheduler.podgroup), names.pod_group(job),
                        root["metadata"]["namespace"])
        return (self.scheduler.podgroup_reason(pg, job)
                or "; ".join(f"{r.name}: {r.message}" for r in waiting if r.message) or None)

    def waiting_hint(self, root: dict, status) -> str | None:
        """`list`'s cheaper reason: from the objects already read, no call."""
        waiting = _unschedulable_workers(status)
        if not waiting:
            return None
        return next((r.message for r in waiting if r.message), "workers not schedulable yet")


TRAINJOB_OFF = ("--gang-scheduler kueue: Kueue does not manage TrainJobs here (its "
                "trainer.kubeflow.org/trainjob integration is off), so the job would not be "
                "gang-admitted; add trainer.kubeflow.org/trainjob to integrations.frameworks "
                "in kueue-system/kueue-manager-config")


class KueueControl(GangControl):
    def require(self, client, spec, mode: str) -> None:
        super().require(client, spec, mode)
        config, _ = kueue_config(client)
        frameworks = kueue.frameworks(config)
        if mode == "trainjob":
            if frameworks is not None and kueue.TRAINJOB_FRAMEWORK not in frameworks:
                raise UsageError(TRAINJOB_OFF)
        elif frameworks is not None and kueue.MPIJOB_FRAMEWORK not in frameworks:
            raise UsageError(kueue.MPIJOB_OFF)
        if spec.queue:
            # Kueue would keep the job Inadmissible ("LocalQueue ... doesn't exist") forever.
            try:
                found = client.get(KUEUE_LOCALQUEUE, spec.queue, spec.namespace)
            except ApiError:
                return  # not readable: Kueue itself will say so on the Workload
            if found is None:
                raise UsageError(f"--queue {spec.queue}: no Kueue LocalQueue of that name in "
                                f"namespace {spec.namespace} (kubectl get localqueues -n "
                                f"{spec.namespace})")

    def operator_created(self, client, root: dict, spec, timeout: float, poll: float) -> str:
        if not kueue.suspended(root):
            # Kueue's job webhook suspends every MPIJob naming a queue; not suspended = not
            # managed.
            raise UsageError(kueue.MPIJOB_OFF)
        return (f"MPIJob {spec.name} created, queued in Kueue LocalQueue {spec.queue}: Kueue "
                f"admits it whole, then the MPI operator creates its pods (hvdk8s get "
                f"{spec.name} -n {spec.namespace} says why it waits)")

    def waiting_reason(self, client, root: dict, status) -> str | None:
        if not kueue.suspended(root):
            return None  # admitted: Kueue has let it start
        workloads = client.items(KUEUE_WORKLOAD, root["metadata"]["namespace"],
                                 label_selector=f"{kueue.JOB_UID_LABEL}={root['metadata']['uid']}")
        assert isinstance(self.scheduler, kueue.Kueue)
        return self.scheduler.workload_reason(workloads)

    def waiting_hint(self, root: dict, status) -> str | None:
        return "suspended until Kueue admits it" if kueue.suspended(root) else None


class KaiControl(GangControl):
    def require(self, client, spec, mode: str) -> None:
        super().require(client, spec, mode)
        # KAI skips a PodGroup whose queue does not exist ("Queue '%s' does not exist",
        # pkg/scheduler/cache/cluster_info): it would wait forever without a word.
        queue = kai.queue_of(spec.queue)
        try:
            found = client.get(api_kind(kai.QUEUE), queue)
        except ApiError:
            return  # not readable: the job waits, and `get` shows KAI's events
        if found is None:
            raise UsageError(f"--queue {queue}: no KAI Queue of that name (kubectl get "
                            "queues.scheduling.run.ai); name one with --queue")

    def waiting_reason(self, client, root: dict, status) -> str | None:
        if not _unschedulable_workers(status) and not _pending_workers(status):
            return None
        job = st.job_name_of(root) or root["metadata"]["name"]
        ns = root["metadata"]["namespace"]
        name = kai.podgroup_name(root, names.pod_group(job))
        pg = client.get(api_kind(kai.PODGROUP), name, ns)
        if pg is None:
            return None
        why = self.scheduler.podgroup_reason(pg, job)
        if why is None:
            evs = client.items(EVENT, ns, field_selector=(
                f"involvedObject.name={name},involvedObject.kind={kai.PODGROUP.kind}"))
            assert isinstance(self.scheduler, kai.Kai)
            why = self.scheduler.event_reason(evs, job)
        return why


_CONTROLS: dict[type, type[GangControl]] = {kueue.Kueue: KueueControl, kai.Kai: KaiControl}


def control(name: str | None) -> GangControl | None:
    """The control of the gang scheduler of that name (None: no gang scheduler)."""
    scheduler = gangs.get(name)
    if scheduler is None:
        return None
    return _CONTROLS.get(type(scheduler), GangControl)(scheduler)


def detect(client) -> str | None:
    """The installed gang scheduler `--gang` uses, from API discovery (one call)."""
    found = gangs.installed(client.api_groups(), lambda kind: client.serves(api_kind(kind)))
    return found.name if found is not None else None


def _pending_workers(status) -> list:
    if status.phase != PENDING:
        return []
    return [r for r in status.replicas if r.role != names.ROLE_LAUNCHER and not r.node]


def _unschedulable_workers(status) -> list:
    if status.phase != PENDING:
        return []
    return [r for r in status.replicas
            if r.role != names.ROLE_LAUNCHER and r.reason == "Unschedulable"]
