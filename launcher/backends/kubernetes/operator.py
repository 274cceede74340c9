"""Is the MPI Operator gang-scheduling? Its schedulingPolicy takes effect only when it runs
with --gang-scheduling (kubeflow/mpi-operator cmd/mpi-operator/app/options/options.go; the
controller makes a PodGroup only then: pkg/controller/mpi_job_controller.go
NewMPIJobControllerWithClock, getOrCreatePodGroups). Without it the workers get no
PodGroup and are scheduled one by one: no gang at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from launcher.backends.kubernetes.client import MPIJOB, POD, ApiError, Kind, api_kind
from launcher.backends.kubernetes.status import condition
from launcher.errors import UsageError, UserError
from mpijob.gang import GangScheduler
from mpijob.jobspec import names
from mpijob.scheduling.doctor import operator_gang_flag

DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
OPERATOR_SELECTOR = "app=mpi-operator"  # mpi-operator manifests/base/deployment.yaml


def not_gang_scheduling(gang: GangScheduler, where: str, why: str) -> str:
    return (f"--gang-scheduler {gang.name} with --mode operator: the MPI Operator ({where}) "
            f"{why}, so it makes no PodGroup and its workers would not be gang-scheduled; use "
            f"--mode pods (hvdk8s makes the PodGroup), or run the operator with "
            f"--gang-scheduling={gang.operator_flag_hint}")


def precheck(client, gang: GangScheduler) -> None:
    """Refuse before creating anything when the operator's Deployment is readable and shows
    it does not gang-schedule for `gang`."""
    try:
        deps = client.items(DEPLOYMENT, all_namespaces=True, label_selector=OPERATOR_SELECTOR)
    except ApiError:
        return  # not readable: `confirm` checks after creating
    for dep in deps:
        flag = operator_gang_flag(dep)
        if flag is not None and not gang.operator_flag_ok(flag):
            where = f"{dep['metadata'].get('namespace')}/{dep['metadata']['name']}"
            why = (f"runs with --gang-scheduling={flag}" if flag else
                   "runs without --gang-scheduling")
            raise UsageError(not_gang_scheduling(gang, where, why))


@dataclass(frozen=True)
class Seen:
    """What the cluster showed after the MPIJob was created."""
    pod_group: bool = False
    # The MPIJob's Succeeded or Failed condition: it ended before its PodGroup was seen (the
    # operator deletes the PodGroup of a finished job: mpi_job_controller.go syncHandler,
    # modelled in kubesim.mpi_operator).
    finished: str | None = None


def _finished(client, name: str, ns: str) -> str | None:
    job = client.get(MPIJOB, name, ns)
    return next((c for c in ("Succeeded", "Failed") if condition(job, c)), None)


def confirm(client, gang: GangScheduler, name: str, ns: str, timeout: float,
            poll: float = 0.5) -> Seen | None:
    """After creating the MPIJob: what shows that the operator took it (its PodGroup, or
    the job already finished); UserError when it makes worker pods without a PodGroup;
    None when nothing shows in `timeout`."""
    selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_WORKER}"
    deadline = time.monotonic() + timeout
    while True:
        if client.get(api_kind(gang.podgroup), names.pod_group(name), ns) is not None:
            return Seen(pod_group=True)
        if (finished := _finished(client, name, ns)) is not None:
            return Seen(finished=finished)
        if client.items(POD, ns, label_selector=selector):
            # The operator creates the PodGroup before the workers in the same sync, so
            # workers without one mean it never will (unless the job just ended).
            if client.get(api_kind(gang.podgroup), names.pod_group(name), ns) is not None:
                return Seen(pod_group=True)
            if (finished := _finished(client, name, ns)) is not None:
                return Seen(finished=finished)
            raise UserError(not_gang_scheduling(
                gang, "its Deployment was not readable",
                f"created worker pods of job {name} but no {gang.short_title} PodGroup"))
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)
