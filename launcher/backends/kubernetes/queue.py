"""Why a gang-scheduled job waits: the gang scheduler's own words, for `get` and `wait`.

A job whose gang scheduler holds it is Queued, not failing: Volcano and coscheduling write
the reason on the job's PodGroup (an Unschedulable condition), Kueue on the Workload it
made for the MPIJob (the QuotaReserved condition, e.g. "couldn't assign flavors to pod set
worker: insufficient quota for nvidia.com/gpu ...").
"""

from __future__ import annotations

from launcher.backends.base import PENDING, QUEUED, JobStatus
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import (
    KUEUE_WORKLOAD,
    SCHED_PLUGINS_PODGROUP,
    VOLCANO_PODGROUP,
    ApiError,
)
from mpijob.jobspec import names

GANG_TITLES = {"volcano": "Volcano", "scheduler-plugins": "coscheduling", "kueue": "Kueue"}
PODGROUP_KINDS = {"volcano": VOLCANO_PODGROUP, "scheduler-plugins": SCHED_PLUGINS_PODGROUP}
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # Kueue labels a job's Workload with its uid


def gang_of(root: dict | None) -> str | None:
    gang = st.job_spec_of(root).get("gang")
    return gang if gang in GANG_TITLES else None


def _condition(obj: dict | None, ctype: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def queued(client, status: JobStatus, root: dict | None, mode: str) -> None:
    """Mark a Pending job Queued with its gang scheduler's reason (in place)."""
    gang = gang_of(root)
    if gang is None or status.phase != PENDING or root is None:
        return
    try:
        why = _kueue(client, root) if gang == "kueue" else _podgroup(client, gang, root, status)
    except ApiError:  # the reason is a courtesy: without read access the job stays Pending
        return
    if why is not None:
        status.phase = QUEUED
        status.reason = f"QueuedBy{GANG_TITLES[gang].capitalize()}"
        status.message = why


def queued_without_calls(status: JobStatus, root: dict | None) -> None:
    """`list`'s cheaper `queued`: from the objects already read, no call per job. A Pending
    gang job is Queued when Kueue still suspends its MPIJob, or when its workers are
    Unschedulable under Volcano or coscheduling; `get` gives the scheduler's own reason."""
    gang = gang_of(root)
    if gang is None or status.phase != PENDING or root is None:
        return
    if gang == "kueue":
        if root.get("kind") != "MPIJob" or not (
                (root.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            return
        why = "suspended until Kueue admits it"
    else:
        waiting = [r for r in status.replicas if r.role != names.ROLE_LAUNCHER
                   and r.reason == "Unschedulable"]
        if not waiting:
            return
        why = next((r.message for r in waiting if r.message), "workers not schedulable yet")
    status.phase = QUEUED
    status.reason = f"QueuedBy{GANG_TITLES[gang].capitalize()}"
    status.message = why


def _kueue(client, root: dict) -> str | None:
    if root.get("kind") != "MPIJob" or not ((root.get("spec") or {}).get("runPolicy") or {}).get(
            "suspend"):
        return None  # admitted: Kueue has let it start
    uid = root["metadata"]["uid"]
    workloads = client.items(KUEUE_WORKLOAD, root["metadata"]["namespace"],
                             label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}")
    if not workloads:
        return "suspended until Kueue admits it (no Workload yet: is Kueue's MPIJob " \
               "integration on? hvdk8s doctor tells)"
    cond = _condition(workloads[0], "QuotaReserved")
    if cond and cond.get("status") == "False" and cond.get("message"):
        return f"{workloads[0]['metadata']['name']}: {cond['message']}"
    return f"{workloads[0]['metadata']['name']}: waiting for admission"


def _podgroup(client, gang: str, root: dict, status: JobStatus) -> str | None:
    waiting = [r for r in status.replicas if r.role != names.ROLE_LAUNCHER
               and r.reason == "Unschedulable"]
    if not waiting:
        return None
    job = st.job_name_of(root) or root["metadata"]["name"]
    pg = client.get(PODGROUP_KINDS[gang], names.pod_group(job), root["metadata"]["namespace"])
    cond = _condition(pg, "Unschedulable")
    if cond and cond.get("message"):
        return f"PodGroup {job} {((pg or {}).get('status') or {}).get('phase', '')}: " \
               f"{cond['message']}".replace("  ", " ")
    return "; ".join(f"{r.name}: {r.message}" for r in waiting if r.message) or None
