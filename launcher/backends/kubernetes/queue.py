"""Why a gang-scheduled job waits: the gang scheduler's own words, for `get` and `wait`.

A job whose gang scheduler holds it is Queued, not failing; each scheduler's control
(launcher/backends/kubernetes/gang.py) reads where it writes the reason.
"""

from __future__ import annotations

from launcher.backends.base import PENDING, QUEUED, JobStatus
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import ApiError
from launcher.backends.kubernetes.gang import GangControl, control


def gang_of(root: dict | None) -> GangControl | None:
    return control(st.job_spec_of(root).get("gang"))


def _mark(status: JobStatus, gang: GangControl, why: str) -> None:
    status.phase = QUEUED
    status.reason = f"QueuedBy{gang.scheduler.reason_word.capitalize()}"
    status.message = why


def queued(client, status: JobStatus, root: dict | None, mode: str) -> None:
    """Mark a Pending job Queued with its gang scheduler's reason (in place)."""
    gang = gang_of(root)
    if gang is None or status.phase != PENDING or root is None:
        return
    try:
        why = gang.waiting_reason(client, root, status)
    except ApiError:  # the reason is a courtesy: without read access the job stays Pending
        return
    if why is not None:
        _mark(status, gang, why)


def queued_without_calls(status: JobStatus, root: dict | None) -> None:
    """`list`'s cheaper `queued`: from the objects already read, no call per job; `get`
    gives the scheduler's own reason."""
    gang = gang_of(root)
    if gang is None or status.phase != PENDING or root is None:
        return
    if (why := gang.waiting_hint(root, status)) is not None:
        _mark(status, gang, why)
