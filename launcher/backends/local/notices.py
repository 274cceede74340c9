"""Which rank made a local job fail: from mpirun's own notice, else from the rank wrapper's
records of how each rank ended.

Each MPI words its notice its own way, so the notices read are those of the mpirun that
ran (its dialect, asked by `mpirun --version` and kept in launch.json):
- Open MPI 4 (ORTE): "Process name: [[18817,1],1] / Exit code: 3", "mpirun noticed that
  process rank 2 ... exited on signal 9 (Killed)", "MPI_ABORT was invoked on rank 3 ...
  with errorcode 7", "process rank 0 ... exiting improperly";
- Open MPI 5 (PRRTE's prterun): the same sentences wrapped at other places, the process
  named "[prterun-HOST-PID@1,1]", and MPI_Abort's code on a line "Errorcode: 7";
- MPICH's Hydra: "Abort(7) on node 1 (rank 1 in comm 0): application called MPI_Abort";
  for a rank that exits non-zero or is killed, Hydra names no rank (at best a PID), so the
  wrapper's records say which rank ended first.
Standard library only: the supervisor reads this at the job's end.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from launcher.backends.local.rank import read_ends


@dataclass(frozen=True)
class RankFailure:
    rank: int
    message: str
    exit_code: int | None = None
    signal: int | None = None


_PROCESS_NAME = {
    4: re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]"),
    5: re.compile(r"Process name: \[[^\],]*@\d+,(\d+)\]"),
}
_EXIT_CODE = re.compile(r"Exit code: (-?\d+)")
_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)"
                     r"(?: \(([^)]*)\))?")
_ABORT = {
    4: re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+ with errorcode (-?\d+)"),
    5: re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+ Proc: \S+ "
                  r"Errorcode: (-?\d+)"),
}
_IMPROPER = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exiting improperly")
_HYDRA_ABORT = re.compile(r"Abort\((-?\d+)\) on node \d+ \(rank (\d+) in comm \d+\)")


def rank_failure(lines: list[str], implementation: str | None = "OpenMPI",
                 major: int | None = 4) -> RankFailure | None:
    """Which rank made mpirun give up, from the notice mpirun printed. An Open MPI whose
    version was not known is read as either."""
    # The notices wrap their sentences at different places in each version: one line.
    text = " ".join(" ".join(lines).split())
    if implementation in ("MPICH", "Intel"):
        match = _HYDRA_ABORT.search(text)
        if match:
            rank, code = int(match.group(2)), int(match.group(1))
            return RankFailure(rank, f"rank {rank} called MPI_Abort with error code {code}",
                               exit_code=code)
        return None
    versions = (major,) if major in (4, 5) else (4, 5)
    for version in versions:
        match = _PROCESS_NAME[version].search(text)
        exit_match = match and _EXIT_CODE.search(text, match.end())
        if match and exit_match:
            rank, code = int(match.group(1)), int(exit_match.group(1))
            return RankFailure(rank, f"rank {rank} exited with code {code}", exit_code=code)
    match = _SIGNAL.search(text)
    if match:
        return killed(int(match.group(1)), int(match.group(2)), match.group(3))
    for version in versions:
        match = _ABORT[version].search(text)
        if match:
            rank, code = int(match.group(1)), int(match.group(2))
            return RankFailure(rank, f"rank {rank} called MPI_Abort with error code {code}",
                               exit_code=code)
    match = _IMPROPER.search(text)
    if match:
        rank = int(match.group(1))
        return RankFailure(rank, f"rank {rank} exited without calling MPI_Finalize")
    return None


def killed(rank: int, signum: int, name: str | None = None) -> RankFailure:
    if name is None:
        try:
            name = signal.strsignal(signum)
        except ValueError:
            name = None
    shown = f" ({name})" if name else ""
    return RankFailure(rank, f"rank {rank} was killed by signal {signum}{shown}",
                       exit_code=128 + signum, signal=signum)


def first_failed_rank(exit_dir) -> RankFailure | None:
    """The rank that ended first with a non-zero code or by a signal, from the wrapper's
    records: the others' ends (signals from mpirun cleaning up) came after it."""
    failed = [(when, int(rank), kind, number)
              for rank, (kind, number, when) in read_ends(exit_dir).items()
              if not (kind == "exit" and number == 0) and when is not None]
    if not failed:
        return None
    _, rank, kind, number = min(failed)
    if kind == "signal":
        return killed(rank, number)
    return RankFailure(rank, f"rank {rank} exited with code {number}", exit_code=number)
