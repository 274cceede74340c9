"""Runs one rank's program as the user meant it, keeps its log and records how it ended.

    python -S rank.py JOBDIR PROGRAM [ARG...]

Every rank of a local job runs under this, whichever MPI starts it (Open MPI 4 or 5,
MPICH's Hydra), so what differs between them is done here once:
- PATH: the job's command directory (JOBDIR/bin: `python`, `python3`, `pip`, `horovodrun`
  meaning the Python that runs hvdk8s) first, then the PATH the user had. An mpirun
  started by absolute path puts its own bin first on its ranks' PATH (Open MPI's implied
  --prefix), which would make a bare `python3` the system's; the user's order is restored
  from HVDK8S_RANK_PATH.
- the rank's log: the program's stdout and stderr go through a pipe to this process, which
  copies them to its own stdout (mpirun's combined log) and to JOBDIR/ranks/rank.<N>.log.
  Open MPI 4 and 5 write per-rank files in different layouts (and 5.0 stops copying to the
  terminal when it does: open-mpi/ompi#11032, openpmix/prrte#2412); Hydra writes none.
- its end: JOBDIR/rank-exits/<N> says "exit N" or "signal N" and when (CLOCK_MONOTONIC,
  one clock for every process of the machine), since mpirun names only the first rank that
  failed (Open MPI) or none (Hydra). This process then ends as the program did (same exit
  code, or same signal), so mpirun sees what it would have seen without it.

Signals: mpirun signals the whole process group of a rank (Open MPI 4 odls; Hydra kills
the group too), and the program is in this process's group, so the program gets them
directly; this process only keeps running until the program has ended. Standard library
only and run by path with -S, so it adds milliseconds per rank, not hvdk8s's imports.
"""

from __future__ import annotations

import errno
import os
import resource
import select
import signal
import sys
import time

# Each MPI's name for the rank in the world: Open MPI 4 and 5, then PMIx, then Hydra's PMI,
# then horovodrun's (Gloo; an elastic job's rank when its process started).
RANK_ENVS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HOROVOD_RANK")
# The PATH the user had, before mpirun's prefix; set by the local backend.
PATH_ENV = "HVDK8S_RANK_PATH"
# Names in JOBDIR (launcher.backends.local.state.JobPaths uses the same).
SHIMS = "bin"
LOGS = "ranks"
EXITS = "rank-exits"
# Signals that would end this process before the program: caught (a no-op), so the
# program's own end is recorded. exec() puts the program back on the default actions.
_OUTLIVE = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2)
# Python starts with these ignored, and exec() keeps an ignored signal ignored: the program
# gets the default actions back, as mpirun would have started it.
_PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)
# How often the copy loop looks whether the program ended while something it started
# (a background process) still holds its output open.
_POLL_SECONDS = 0.2


def _noop(_signum, _frame) -> None:
    pass


def rank_of(environ) -> str | None:
    for name in RANK_ENVS:
        value = environ.get(name)
        if value is not None and value.isdigit():
            return value
    return None


def log_name(rank: int | str) -> str:
    return f"rank.{rank}.log"


def record(exit_dir: str, rank: str, text: str) -> None:
    """Write `text` to EXITDIR/<rank> whole (a temporary file, then a rename)."""
    os.makedirs(exit_dir, exist_ok=True)
    final = os.path.join(exit_dir, rank)
    tmp = f"{final}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, final)


def _rank_path(job_dir: str) -> str:
    shims = os.path.join(job_dir, SHIMS)
    rest = os.environ.get(PATH_ENV)
    if rest is None:
        rest = os.environ.get("PATH", "")
    return os.pathsep.join([shims, rest]) if rest else shims


def _write_all(fd: int, data: bytes) -> bool:
    """False once `fd` cannot take more (mpirun gone): the log file still gets the rest."""
    while data:
        try:
            written = os.write(fd, data)
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
                return False
            raise
        data = data[written:]
    return True


def _copy_until_end(pid: int, out: int, log: int | None) -> int:
    """Copy the program's output to stdout and the log until it ended; its wait status."""
    to_stdout = True
    status = None
    while True:
        ready, _, _ = select.select([out], [], [], _POLL_SECONDS)
        if ready:
            data = os.read(out, 65536)
            if data:
                if to_stdout:
                    to_stdout = _write_all(1, data)
                if log is not None:
                    _write_all(log, data)
                continue
            if status is None:  # EOF: every writer closed
                status = os.waitpid(pid, 0)[1]
            return status
        if status is None:
            done, status_now = os.waitpid(pid, os.WNOHANG)
            if done:
                status = status_now
        if status is not None:
            # The program ended; what it started holds the pipe open. What is there is
            # copied; later output of those is not waited for (mpirun would end them).
            os.set_blocking(out, False)
            try:
                while data := os.read(out, 65536):
                    if to_stdout:
                        to_stdout = _write_all(1, data)
                    if log is not None:
                        _write_all(log, data)
            except BlockingIOError:
                pass
            return status


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -S rank.py JOBDIR PROGRAM [ARG...]", file=sys.stderr)
        return 2
    job_dir, program = argv[0], argv[1:]
    rank = rank_of(os.environ)
    os.environ["PATH"] = _rank_path(job_dir)
    log = None
    if rank is not None:
        os.makedirs(os.path.join(job_dir, LOGS), exist_ok=True)
        log = os.open(os.path.join(job_dir, LOGS, log_name(rank)),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    for outlived in _OUTLIVE:
        signal.signal(outlived, _noop)
    out, into = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(into, 1)
        os.dup2(into, 2)
        os.close(into)
        os.close(out)
        for reset in (*_PYTHON_IGNORES, *_OUTLIVE):
            signal.signal(reset, signal.SIG_DFL)
        try:
            os.execvp(program[0], program)
        except OSError as exc:
            os.write(2, f"hvdk8s: cannot run {program[0]}: {exc.strerror}\n".encode())
            os._exit(127)  # a shell's "command not found"
    os.close(into)
    status = _copy_until_end(pid, out, log)
    ended = time.monotonic()
    exit_dir = os.path.join(job_dir, EXITS)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if rank is not None:
            record(exit_dir, rank, f"signal {signum} {ended:.6f}")
        _die_by(signum)
    code = os.waitstatus_to_exitcode(status)
    if rank is not None:
        record(exit_dir, rank, f"exit {code} {ended:.6f}")
    return code


def _die_by(signum: int) -> None:
    """End by `signum` as the program did; no core file of this small process."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if signum not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for these
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # a signal that does not end a process (e.g. SIGCHLD): say which


def read_ends(exit_dir) -> dict[str, tuple[str, int, float | None]]:
    """{rank: (kind "exit" or "signal", number, when or None)} of every rank that ended."""
    out: dict[str, tuple[str, int, float | None]] = {}
    try:
        names = os.listdir(exit_dir)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(exit_dir, name)) as f:
                kind, number, *when = f.read().split()
            out[name] = (kind, int(number), float(when[0]) if when else None)
        except (OSError, ValueError):
            continue
    return out


def read_records(exit_dir) -> dict[str, dict]:
    """{rank: {"exit_code": N} or {"signal": N}} of every rank that ended, from EXITDIR."""
    out: dict[str, dict] = {}
    for rank, (kind, number, _) in read_ends(exit_dir).items():
        if kind == "exit":
            out[rank] = {"exit_code": number}
        elif kind == "signal":
            out[rank] = {"signal": number}
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
