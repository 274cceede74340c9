"""The mpirun line and environment of a local job, and what mpirun says when a rank fails.

The launch line itself comes from `mpijob.k8s.command` (the same as in a launcher pod); this
module adds only what running on this machine needs: per-rank log files, running as root,
more ranks than cores, the Python that runs hvdk8s, GPU visibility and CPU threads.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import launcher
from launcher.backends.local import rank as local_rank
from launcher.errors import UsageError, UserError
from mpijob.jobspec.quantity import parse_quantity
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s import command

BENCHMARK_ENV = "HVDK8S_BENCHMARK"
THREADS_ENV = "HVDK8S_THREADS_PER_RANK"
# What the benchmark reads for its TensorFlow intra-op thread pool.
INTRA_OP_ENV = "HVDK8S_INTRA_OP_THREADS"


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # set on top of the caller's


def benchmark_script() -> Path:
    configured = os.environ.get(BENCHMARK_ENV)
    if configured:
        path = Path(configured).expanduser()
    else:
        path = Path(launcher.__file__).resolve().parent.parent / "images" / "benchmark" / "hvd_cnn_bench.py"
    if not path.is_file():
        raise UserError(
            f"the benchmark program is not at {path}: set {BENCHMARK_ENV} to the path of "
            "hvd_cnn_bench.py, or give a command to run"
        )
    return path


def find_mpirun() -> str:
    found = shutil.which("mpirun")
    if found is None:
        raise UserError(
            "mpirun is not on PATH: the local backend needs OpenMPI "
            "(e.g. apt-get install openmpi-bin libopenmpi-dev)"
        )
    return found


@functools.cache
def mpirun_flavour(mpirun: str) -> str:
    """'OpenMPI', 'Intel', 'MPICH' or 'unknown', from `mpirun --version`."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = out.stdout + out.stderr
    if "Open MPI" in text or "OpenRTE" in text:
        return "OpenMPI"
    if "Intel" in text:
        return "Intel"
    if "HYDRA" in text or "MPICH" in text:
        return "MPICH"
    return "unknown"


def check_mpi(spec: JobSpec) -> str | None:
    """The mpirun to run, after checking the job can run here (None: the user's own line)."""
    if spec.user_gives_mpirun:
        return None
    if spec.mpi_implementation != "OpenMPI":
        raise UsageError(
            f"the local backend runs OpenMPI only, not {spec.mpi_implementation} MPI: "
            "use OpenMPI here, or the kubernetes backend"
        )
    mpirun = find_mpirun()
    flavour = mpirun_flavour(mpirun)
    if flavour not in ("OpenMPI", "unknown"):
        raise UserError(f"{mpirun} is {flavour}'s mpirun; the local backend needs OpenMPI's")
    return mpirun


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def build_launch(spec: JobSpec, *, mpirun: str | None, hostfile: Path, ranks_dir: Path,
                 gpus: list[int], python: str = sys.executable, script: Path | None = None,
                 cores: int | None = None, is_root: bool | None = None,
                 environ: dict[str, str] | None = None, exits_dir: Path | None = None) -> Launch:
    """The mpirun line and environment; with `exits_dir`, every rank's program runs under
    local_rank, which records there how that rank ended."""
    environ = dict(os.environ if environ is None else environ)
    cores = usable_cores() if cores is None else cores
    is_root = (os.geteuid() == 0) if is_root is None else is_root
    env = _environment(spec, gpus=gpus, python=python, cores=cores, is_root=is_root,
                       environ=environ)
    if mpirun is None:
        # The user's own mpirun/horovodrun line, untouched: OpenMPI 4 has no MCA variable
        # for --output-filename, so such jobs have the combined log only.
        return Launch(command.launch_argv(spec, str(hostfile)), env)

    kw = {"python": python, "script": str(script)} if spec.runs_benchmark else {}
    program = command.program_argv(spec, **kw)
    argv = command.mpirun_argv(spec, str(hostfile), program=program)
    options = argv[1:len(argv) - len(program)]
    bound = cores_per_rank(spec, cores) if not gpus else None
    if bound is not None:
        options = _bind_to_cores(options, bound)
    seen_env = {**environ, **env}
    local = ["--output-filename", str(ranks_dir), "--merge-stderr-to-stdout"]
    if is_root:
        local.append("--allow-run-as-root")
    if spec.ranks > cores:
        local.append("--oversubscribe")
    if exits_dir is not None:
        program = [python, "-S", str(Path(local_rank.__file__).resolve()), str(exits_dir), *program]
    return Launch([mpirun, *local, *_drop_unset_exports(options, seen_env), *program], env)


def cores_per_rank(spec: JobSpec, cores: int) -> int | None:
    """The cores each rank of a CPU job gets to itself: its worker's --cpu rounded up, else
    an equal share of this machine; None when the ranks outnumber the cores (unbound).

    Bound, a rank is what a pod with that many cores is: TensorFlow sizes both its thread
    pools from the rank's CPU set, so a 1-rank run with --cpu 1 measures exactly what each
    rank of a 2-rank job on 2 cores has (the calibration in benchmarks/calibration relies on
    that). Unbound, a 1-rank job's inter-op pool spreads over every core."""
    if spec.cpu:
        per_rank = math.ceil(parse_quantity(spec.cpu))
        if per_rank * spec.ranks > cores:
            raise UsageError(
                f"--cpu {spec.cpu} for {spec.ranks} rank(s) needs {per_rank * spec.ranks} "
                f"cores and this machine has {cores}: give a smaller --cpu or fewer workers")
        return max(1, per_rank)
    share = cores // max(1, spec.ranks)
    return share if share >= 1 else None


def _bind_to_cores(options: list[str], per_rank: int) -> list[str]:
    """mpirun's options with each rank bound to its own `per_rank` cores."""
    out: list[str] = []
    i = 0
    while i < len(options):
        if options[i] in ("-bind-to", "-map-by") and i + 1 < len(options):
            i += 2
            continue
        out.append(options[i])
        i += 1
    return ["--map-by", f"slot:PE={per_rank}", "--bind-to", "core", *out]


def _environment(spec: JobSpec, *, gpus: list[int], python: str, cores: int, is_root: bool,
                 environ: dict[str, str]) -> dict[str, str]:
    # A default the user already exported in this shell is theirs too: it wins over ours.
    env = {k: v for k, v in spec.job_env.items() if k in spec.env or k not in environ}
    # Ranks run the Python that runs hvdk8s, the one with Horovod; a bare `python` in the
    # user's command means that one too.
    python_dir = str(Path(python).parent)
    path = env.get("PATH", environ.get("PATH", ""))
    if path.split(os.pathsep)[0] != python_dir:
        env["PATH"] = os.pathsep.join([python_dir, path]) if path else python_dir
    if is_root:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # The GPUs are hvdk8s's to assign, as on Kubernetes: ranks pin by local rank within
    # this list; NVML's index order (PCI bus order) is the one placement used.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    if gpus:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    else:
        # The ranks share the cores: a thread pool per rank as large as the machine would
        # make them fight over every core.
        threads = str(cores_per_rank(spec, cores) or 1)
        for name in (THREADS_ENV, INTRA_OP_ENV, "OMP_NUM_THREADS"):
            if name not in env and name not in environ:
                env[name] = threads
    return env


def _drop_unset_exports(options: list[str], environ: dict[str, str]) -> list[str]:
    """`-x NAME` of a variable that is not set makes mpirun warn in every job's log."""
    kept: list[str] = []
    i = 0
    while i < len(options):
        if options[i] == "-x" and i + 1 < len(options):
            name = options[i + 1]
            if "=" in name or name in environ:
                kept += options[i:i + 2]
            i += 2
            continue
        kept.append(options[i])
        i += 1
    return kept


# ------------------------------------------------------------------ failed ranks
@dataclass(frozen=True)
class RankFailure:
    rank: int
    message: str
    exit_code: int | None = None
    signal: int | None = None


_PROCESS_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?")
_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+)")
_IMPROPER = re.compile(r"process rank (\d+) with PID \d+ on\s+node \S+ exiting improperly")


def rank_failure(lines: list[str]) -> RankFailure | None:
    """Which rank made mpirun (OpenMPI 4) give up, from the notice mpirun prints."""
    text = "\n".join(lines)
    match = _PROCESS_NAME.search(text)
    if match:
        exit_match = _EXIT_CODE.search(text, match.end())
        rank = int(match.group(1))
        if exit_match:
            exit_code = int(exit_match.group(1))
            return RankFailure(rank, f"rank {rank} exited with code {exit_code}", exit_code=exit_code)
    match = _SIGNAL.search(text)
    if match:
        rank, signum = int(match.group(1)), int(match.group(2))
        name = f" ({match.group(3)})" if match.group(3) else ""
        return RankFailure(rank, f"rank {rank} was killed by signal {signum}{name}",
                           exit_code=128 + signum, signal=signum)
    match = _ABORT.search(text)
    if match:
        rank, code = int(match.group(1)), int(match.group(2))
        return RankFailure(rank, f"rank {rank} called MPI_Abort with error code {code}", exit_code=code)
    match = _IMPROPER.search(" ".join(text.split()))
    if match:
        rank = int(match.group(1))
        return RankFailure(rank, f"rank {rank} exited without calling MPI_Finalize")
    return None
