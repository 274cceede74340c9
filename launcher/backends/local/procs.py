"""Finding and stopping every process of a local job, by reading /proc (Linux).

A process is the job's when it carries the job's marker, checked before any signal:
every process of the job inherits HVDK8S_JOB_UID=<uid> in its environment, and
HVDK8S_JOB_DIR=<job directory>, which finds them when status.json (where the uid and
session are) is unreadable. The supervisor calls setsid(), so mpirun and the ranks also
share its session; an unmarked member of that session (a rank that cleared its
environment) is the job's only while a marked process lives in the same session: Linux
keeps a session id allocated while any member lives, so a live marked member proves the
id was not reused, while a session with no marked member may be a stranger's that got the
id after every process of the job ended. So a rank that dropped its environment and
outlived every marked process of its job is not found (nor signalled); that is the price
of never signalling a stranger.
Zombies are not counted: they hold no resources and only their parent can remove them.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKER_ENV = "HVDK8S_JOB_UID"
DIR_MARKER_ENV = "HVDK8S_JOB_DIR"
PROC = Path("/proc")
POLL_SECONDS = 0.05


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, session id) of a process, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name in parentheses may hold spaces or ')': split after the last ')'.
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[3])


def _has_marker(pid: int, uid: str | None, job_dir: str | None = None) -> bool:
    markers = {f"{name}={value}".encode() for name, value in
               ((MARKER_ENV, uid), (DIR_MARKER_ENV, job_dir)) if value}
    if not markers:
        return False
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return not markers.isdisjoint(environ.split(b"\0"))


def is_alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def is_job_process(pid: int | None, uid: str | None) -> bool:
    """`pid` is a live process of the job `uid` (not a stranger that reused the pid)."""
    return pid is not None and bool(pid) and bool(uid) and is_alive(pid) and _has_marker(pid, uid)


def job_pids(uid: str | None, sid: int | None, job_dir: str | None = None) -> list[int]:
    """Live processes of the job: those with its marker, and the members of its session
    while one of them has the marker."""
    me = os.getpid()
    live: list[tuple[int, int, bool]] = []  # (pid, session, marked)
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if pid == me or stat is None or stat[0] == "Z":
            continue
        live.append((pid, stat[1], _has_marker(pid, uid, job_dir)))
    session_is_the_jobs = sid is not None and any(
        marked and session == sid for _, session, marked in live)
    return [pid for pid, session, marked in live
            if marked or (session_is_the_jobs and session == sid)]


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def terminate_job(uid: str | None, sid: int | None, *, job_dir: str | None = None,
                  grace: float = 5.0, kill_wait: float = 5.0) -> list[int]:
    """SIGTERM every process of the job, SIGKILL what is left after `grace` seconds, and
    wait until none is left. Returns the pids still alive after that (normally none)."""
    if uid is None and sid is None and job_dir is None:
        return []
    deadline = time.monotonic() + grace
    signalled: set[int] = set()
    while True:
        pids = job_pids(uid, sid, job_dir)
        if not pids:
            return []
        # Rescanned each round: a supervisor that was just starting may launch mpirun now.
        fresh = [p for p in pids if p not in signalled]
        _signal_all(fresh, signal.SIGTERM)
        signalled.update(fresh)
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    deadline = time.monotonic() + kill_wait
    while True:
        pids = job_pids(uid, sid, job_dir)
        if not pids or time.monotonic() >= deadline:
            return pids
        _signal_all(pids, signal.SIGKILL)
        time.sleep(POLL_SECONDS)
