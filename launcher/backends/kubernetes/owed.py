"""What a job's state calls for that only a write can do, seen by the read commands (get,
wait, logs -f, get --watch), which never write: from what they read, with no request,
they mark a job past --start-timeout and name `hvdk8s tidy` (tidying.py) in one line. The
start guard (`hvdk8s install agent`) takes the same steps with nobody's hvdk8s running."""

from __future__ import annotations

from launcher.backends.base import SUCCEEDED, JobStatus
from launcher.backends.kubernetes import cleanup, start_guard
from launcher.output import note
from mpijob.phases import START_TIMEOUT_REASON


def overdue(status: JobStatus, root: dict | None, pods: list[dict], client=None) -> bool:
    """A job not yet ended with a pod past --start-timeout: the status says so (reason
    StartTimeout, its phase as read), since nothing has failed it yet; with `client`, with
    the registry's answer for an image that does not pull (one read). A job read as Failed
    counts too: workers the start gate's deadline removed leave a launcher that never
    started, which only failing the job ends."""
    if status.phase == SUCCEEDED:
        return False
    found = start_guard.overdue(root, pods)
    if found is None:
        return False
    pod, why = found
    if client is not None:
        why = start_guard.with_pull_error(client, pod, why)
    status.reason = START_TIMEOUT_REASON
    status.message = f"{why}; not failed in the cluster yet"
    return True


def say_owed(status: JobStatus, root: dict | None, mode: str, pods: list[dict],
             worker_job: dict | None = None, client=None) -> str | None:
    """The one line naming `hvdk8s tidy` when the job's state calls for a write (noted, and
    returned), else None."""
    if overdue(status, root, pods, client):
        phrases = [("missed its start timeout and has not been failed",
                    "fails it and frees its GPUs")]
    else:
        phrases = cleanup.due(root, mode, pods, status, worker_job,
                              patient_at=start_guard.utc_now()).phrases()
    if not phrases:
        return None
    line = (f"note: job {status.name} " + "; it ".join(seen for seen, _ in phrases)
            + f": `hvdk8s tidy {status.name} -n {status.namespace}` "
            + " and ".join(fix for _, fix in phrases)
            + " (so does the start guard, where installed: hvdk8s install agent)")
    note(line)
    return line
