"""The detached process that runs one local job's mpirun and records how it ends.

    python -m launcher.backends.local.supervisor JOBDIR

`submit` starts this and waits for it to exit: it forks the supervisor proper, which
leaves the submitter's session (setsid, so closing the terminal does not end the job and
every process of the job shares its session id), records its pid in status.json and only
then lets the starter exit 0. The supervisor is no child of `submit`'s process, so it
never lingers there as a zombie. It then runs mpirun with its output in launcher.log and,
when mpirun exits, writes the final phase, exit code, benchmark figures and, for a
failure, which rank failed and the tail of that rank's log.

A full disk (the ranks' logs share it) must not cost the job its end: the supervisor sets
aside RESERVE_BYTES at start and gives them back to write the end when nothing else
fits, which then says Unknown ("state directory full", mpirun's exit code in the message)
with the exit codes the ranks managed to write: their logs, and so the outcome, may be cut.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from launcher.backends.local.notices import first_failed_rank, rank_failure
from launcher.backends.local.rank import read_records

# local_state validates status.json with pydantic: ~70 ms more before this process records
# itself, which `submit` waits for (0.45-0.55 s in all here), against a second way to write it.
from launcher.backends.local.state import JobPaths, now, read_json, update_status
from launcher.formats.benchmark_result import parse_benchmark_output
from launcher.formats.job_progress import summarize
from launcher.formats.rank_reports import iter_reports
from mpijob.phases import STALLED_REASON, JobPhase

FAILED = JobPhase.FAILED.value
RESERVE = ".reserve"
RESERVE_BYTES = 64 * 1024  # status.json with its log tail is a few KiB
STATE_DISK_FULL = "state directory full"
STALLED = STALLED_REASON  # the reason of a job ended by --stall-timeout
TAIL_LINES = 20
# How often a job with --stall-timeout has its ranks' reports read.
STALL_CHECK_SECONDS = 5.0
# How much of the end of the combined log is read for the ranks' reports: at one
# heartbeat (2 s) and one progress line (5 s) of ~200 bytes per rank, 64 ranks' last 20 s.
REPORT_TAIL_BYTES = 256 * 1024
# After SIGTERM, how long mpirun gets to stop its ranks before SIGKILL.
STOP_GRACE_SECONDS = 10.0


def read_lines(path: Path) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def tail(path: Path, n: int = TAIL_LINES) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return list(deque((line.rstrip("\n") for line in f), maxlen=n))
    except FileNotFoundError:
        return []


def tail_text(path: Path, size: int) -> list[str]:
    """The whole lines in the last `size` bytes of `path` (none when it is missing)."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            data = f.read()
    except FileNotFoundError:
        return []
    lines = data.decode(errors="replace").split("\n")
    return lines[1:] if end > size else lines


class _Stop:
    """Why the job is being stopped early, if it is: a signal, the deadline, a stall."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.deadline = False
        self.stalled: str | None = None  # what the stall was
        self.proc: subprocess.Popen | None = None

    def on_signal(self, signum, _frame) -> None:
        self.signal = signum
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # mpirun passes SIGTERM on to the ranks


def supervise(paths: JobPaths) -> int:
    launch = read_json(paths.launch)
    if launch is None:  # deleted before it started
        return 0
    stop = _Stop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop.on_signal)
    env = {**os.environ, **launch["env"]}
    deadline = launch.get("deadline_seconds")

    with open(paths.launcher_log, "ab") as log:
        try:
            if stop.signal is not None:
                raise InterruptedError
            stop.proc = subprocess.Popen(
                launch["argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, cwd=launch.get("cwd") or None,
            )
        except InterruptedError:
            return _finish(paths, None, stop)
        except OSError as exc:
            update_status(paths, phase=FAILED, finished=now(), reason="launch failed",
                          message=f"cannot start {launch['argv'][0]}: {exc}")
            return 1
        if stop.signal is not None:  # arrived while mpirun was being started
            stop.proc.terminate()
        update_status(paths, phase=JobPhase.RUNNING, started=now(), mpirun_pid=stop.proc.pid)
        try:
            _run(stop, stop.proc, paths, deadline, launch.get("stall_timeout_seconds"),
                 launch.get("ranks"))
        except subprocess.TimeoutExpired:
            stop.proc.terminate()
            try:
                stop.proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                stop.proc.kill()
                stop.proc.wait()
    return _finish(paths, stop.proc.returncode, stop, deadline, launch.get("mpi"))


def _run(stop: _Stop, proc: subprocess.Popen, paths: JobPaths, deadline: float | None,
         stall_timeout: float | None, ranks: int | None) -> None:
    """Wait for mpirun; TimeoutExpired (the reason in `stop`) when the job must be ended:
    its deadline passed, or (with --stall-timeout) its ranks reported no step that long."""
    started = time.monotonic()
    while True:
        waited = time.monotonic() - started
        timeouts = [t for t in (None if deadline is None else deadline - waited,
                                stall_timeout and STALL_CHECK_SECONDS) if t is not None]
        try:
            proc.wait(timeout=max(0.0, min(timeouts)) if timeouts else None)
            return
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() - started >= deadline:
                stop.deadline = True
                raise
            progress = summarize(iter_reports(tail_text(paths.launcher_log, REPORT_TAIL_BYTES)),
                                 time.time(), ranks=ranks)
            if stall_timeout and progress is not None and progress.stalled \
                    and progress.last_step_age >= stall_timeout:
                stop.stalled = progress.problems()[0].removeprefix("stalled: ")
                raise


def _finish(paths: JobPaths, returncode: int | None, stop: _Stop,
            deadline: float | None = None, mpi: dict | None = None) -> int:
    lines = read_lines(paths.launcher_log)
    images_per_sec, result = parse_benchmark_output(lines)
    if images_per_sec is None and result is None:
        images_per_sec, result = parse_benchmark_output(read_lines(paths.rank_log(0)))
    # A signal's negative return code becomes the shell's 128 + signal.
    exit_code = None if returncode is None else (128 - returncode if returncode < 0 else returncode)
    fields: dict = {"finished": now(), "exit_code": exit_code,
                    "images_per_sec": images_per_sec, "result": result,
                    "rank_exits": read_records(paths.rank_exits)}
    try:
        return _record_end(paths, returncode, stop, deadline, mpi, lines, fields)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    _release_reserve(paths)
    update_status(paths, phase=JobPhase.UNKNOWN, reason=STATE_DISK_FULL, message=(
        f"no space left on the file system of {paths.dir}: mpirun exited with code "
        f"{exit_code}, but the logs and what the ranks wrote may be cut; free some space"),
        log_tail=tail(paths.launcher_log), **fields)
    return 1


def reserve(paths: JobPaths) -> None:
    """Set aside the space the end needs (nothing when even that does not fit)."""
    try:
        with open(paths.dir / RESERVE, "wb") as f:
            f.write(b"\0" * RESERVE_BYTES)
    except OSError:
        _release_reserve(paths)


def _release_reserve(paths: JobPaths) -> None:
    try:
        os.unlink(paths.dir / RESERVE)
    except FileNotFoundError:
        pass


def _record_end(paths: JobPaths, returncode: int | None, stop: _Stop, deadline: float | None,
                mpi: dict | None, lines: list[str], fields: dict) -> int:
    exit_code = fields["exit_code"]
    if returncode == 0 and stop.signal is None and not stop.deadline and not stop.stalled:
        update_status(paths, phase=JobPhase.SUCCEEDED, **fields)
        _release_reserve(paths)
        return 0
    mpi = mpi or {}
    failure = rank_failure(lines, mpi.get("implementation"), mpi.get("major"))
    if failure is None and not stop.deadline and stop.signal is None and not stop.stalled:
        # Hydra names no rank; and when hvdk8s stopped the job, the ranks' ends are ours.
        failure = first_failed_rank(paths.rank_exits)
    log_tail = tail(paths.launcher_log)
    if stop.deadline:
        reason, message = "deadline exceeded", f"the job ran longer than its deadline of {deadline:g}s"
    elif stop.stalled:
        reason, message = STALLED, f"ended by --stall-timeout: {stop.stalled}"
    elif stop.signal is not None:
        name = signal.Signals(stop.signal).name
        reason, message = "terminated", f"the supervisor was sent {name}"
    elif failure is not None:
        reason, message = "rank failed", failure.message
        log_tail = tail(paths.rank_log(failure.rank)) or log_tail
    else:
        reason, message = "mpirun failed", f"mpirun exited with code {exit_code}"
    update_status(
        paths, phase=FAILED, reason=reason, message=message, log_tail=log_tail,
        failed_rank=None if failure is None else failure.rank,
        failed_rank_exit_code=None if failure is None else failure.exit_code,
        **fields,
    )
    _release_reserve(paths)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m launcher.backends.local.supervisor JOBDIR", file=sys.stderr)
        return 2
    paths = JobPaths(Path(argv[0]).resolve())
    ready_r, ready_w = os.pipe()
    if os.fork():
        # The starter: exit 0 once the supervisor has recorded itself, 1 if it died first.
        os.close(ready_w)
        return 0 if os.read(ready_r, 1) == b"1" else 1
    os.close(ready_r)
    os.setsid()
    # After setsid the supervisor leads its session and process group: pid = pgid = sid.
    update_status(paths, supervisor_pid=os.getpid(), pgid=os.getpgid(0))
    reserve(paths)
    os.write(ready_w, b"1")
    os.close(ready_w)
    try:
        code = supervise(paths)
    except Exception as exc:  # noqa: BLE001 - recorded for `get`, then re-raised for the log
        update_status(paths, phase=FAILED, finished=now(), reason="supervisor error",
                      message=f"{type(exc).__name__}: {exc}")
        raise
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
