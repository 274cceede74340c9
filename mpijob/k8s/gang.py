"""Gang scheduling objects: all of a job's workers are scheduled together or not at all.
What each gang scheduler needs is declared in mpijob.gang; this renders it for a job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpijob import gang as gangs
from mpijob.jobspec import names
from mpijob.k8s.render import metadata

if TYPE_CHECKING:  # only a type here
    from mpijob.k8s.workload import Workload

# README "Gang scheduling by mode": what `--gang` gets for each (mode, gang scheduler).
_NONE = {gangs.PODS: "hvdk8s's own all-or-nothing check: re-checked capacity, rollback if "
                     "not every worker is scheduled within --schedule-timeout",
         gangs.OPERATOR: "--gang refused (nothing holds the operator's pods back); use "
                         "--mode pods"}
SUPPORT = {(mode, name): s.support[mode] if s else _NONE[mode]
           for mode in (gangs.PODS, gangs.OPERATOR)
           for name, s in ((gangs.NONE, None), *gangs.SCHEDULERS.items())}


# Trainer mode: Kueue admits a TrainJob whole (its trainer.kubeflow.org/trainjob
# integration); the other schedulers group pods through a runtime's podGroupPolicy, which
# hvdk8s's runtime does not set.
TRAINJOB_GANG = ("--gang-scheduler {gang} with --mode trainjob: a TrainJob is gang-admitted "
                 "by Kueue (--gang-scheduler kueue --queue NAME); use --mode operator or "
                 "--mode pods for {gang}")


def refusal(gang: str, mode: str) -> str | None:
    """Why this (gang scheduler, mode) pair cannot be gang-scheduled for real, else None."""
    scheduler = gangs.get(gang)
    if mode == "trainjob" and scheduler is not None and not scheduler.trainjob:
        return TRAINJOB_GANG.format(gang=gang)
    return scheduler.refusal(mode) if scheduler is not None else None


def gang_request(work: Workload) -> gangs.GangRequest:
    spec = work.spec
    group = names.pod_group(spec.name)
    return gangs.GangRequest(job=spec.name, launcher=names.launcher(spec.name),
                             queue=spec.queue, priority_class=spec.priority_class, group=group,
                             members=len(work.workers),
                             gpus=sum(p.gpu_count for p in work.workers),
                             meta=metadata(spec, group), domain=work.network_domain)


def gang_pod_metadata(work: Workload) -> dict:
    """Labels and annotations that tie each worker pod to its gang (and keep it in the
    network domain the plan chose)."""
    scheduler = gangs.get(work.spec.gang)
    return scheduler.pod_metadata(gang_request(work)) if scheduler is not None else {}


def gang_objects(work: Workload) -> list[dict]:
    """The objects the gang scheduler needs beside the pods (a PodGroup, or none)."""
    scheduler = gangs.get(work.spec.gang)
    return scheduler.objects(gang_request(work)) if scheduler is not None else []
