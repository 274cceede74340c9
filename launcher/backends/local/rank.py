"""Runs one rank's program and records how it ended, so `get` can tell the ranks apart.

    python -S local_rank.py EXITDIR PROGRAM [ARG...]

mpirun reports only the first rank that failed; whether another rank exited 0 or was
killed because of that failure, it does not say. The local backend therefore has mpirun
start this in front of each rank's program: it runs the program as its child, waits,
writes EXITDIR/<rank> ("exit N" or "signal N") and ends as the program did (same exit
code, or same signal), so mpirun sees what it would have seen without it.

Signals: mpirun (OpenMPI 4 odls) signals the whole process group of a rank, and the
program is in this process's group, so the program gets them directly; this process only
keeps running until the program has ended. Standard library only and run by path with
-S, so it adds milliseconds per rank, not hvdk8s's imports.
"""

from __future__ import annotations

import os
import resource
import signal
import sys

RANK_ENV = "OMPI_COMM_WORLD_RANK"
# Signals that would end this process before the program: caught (a no-op), so the
# program's own end is recorded. exec() puts the program back on the default actions.
_OUTLIVE = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2)
# Python starts with these ignored, and exec() keeps an ignored signal ignored: the program
# gets the default actions back, as mpirun would have started it.
_PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)


def _noop(_signum, _frame) -> None:
    pass


def record(exit_dir: str, rank: str, text: str) -> None:
    """Write `text` to EXITDIR/<rank> whole (a temporary file, then a rename)."""
    os.makedirs(exit_dir, exist_ok=True)
    final = os.path.join(exit_dir, rank)
    tmp = f"{final}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, final)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -S local_rank.py EXITDIR PROGRAM [ARG...]", file=sys.stderr)
        return 2
    exit_dir, program = argv[0], argv[1:]
    for outlived in _OUTLIVE:
        signal.signal(outlived, _noop)
    pid = os.fork()
    if pid == 0:
        for ignored in _PYTHON_IGNORES:
            signal.signal(ignored, signal.SIG_DFL)
        try:
            os.execvp(program[0], program)
        except OSError as exc:
            print(f"hvdk8s: cannot run {program[0]}: {exc.strerror}", file=sys.stderr, flush=True)
            os._exit(127)  # a shell's "command not found"
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            continue
    rank = os.environ.get(RANK_ENV)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if rank is not None:
            record(exit_dir, rank, f"signal {signum}")
        _die_by(signum)
    code = os.waitstatus_to_exitcode(status)
    if rank is not None:
        record(exit_dir, rank, f"exit {code}")
    return code


def _die_by(signum: int) -> None:
    """End by `signum` as the program did; no core file of this small process."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # a signal that does not end a process (e.g. SIGCHLD): say which


def read_records(exit_dir) -> dict[str, dict]:
    """{rank: {"exit_code": N} or {"signal": N}} of every rank that ended, from EXITDIR."""
    out: dict[str, dict] = {}
    try:
        names = os.listdir(exit_dir)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(exit_dir, name)) as f:
                kind, _, value = f.read().strip().partition(" ")
            number = int(value)
        except (OSError, ValueError):
            continue
        if kind == "exit":
            out[name] = {"exit_code": number}
        elif kind == "signal":
            out[name] = {"signal": number}
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
