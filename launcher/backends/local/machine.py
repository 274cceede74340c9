"""What this machine offers the local backend: cores, memory, GPUs, MPI, Horovod, TensorFlow,
and what a `--gpus 0` rank is bound to. `doctor` and `top node` report it where no cluster
is configured."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata

from launcher.backends.local.gpus import gpu_count
from launcher.backends.local.mpi import mpirun_flavour, usable_cores
from mpijob.plural import plural


@dataclass
class Machine:
    node: str
    cores: int  # online
    usable_cores: int  # this process's CPU set: what ranks are bound within
    memory_bytes: int | None
    gpus: int
    mpirun: str | None
    mpi: str | None  # `mpirun --version`'s first line
    horovod: str | None
    tensorflow: str | None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def cpu_binding(self) -> str:
        """What `--gpus 0` ranks run on (launcher.backends.local.mpi.cores_per_rank)."""
        return (f"--gpus 0: each rank gets CUDA_VISIBLE_DEVICES='' and an equal share of the "
                f"{plural(self.usable_cores, 'usable core')} (--map-by slot:PE=N --bind-to "
                "core; --cpu N sets N)")


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _mpi_version(mpirun: str) -> str | None:
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout + out.stderr).strip().splitlines()
    return lines[0].strip() if lines else mpirun_flavour(mpirun)


def this_machine() -> Machine:
    mpirun = shutil.which("mpirun")
    return Machine(
        node=socket.gethostname(), cores=os.cpu_count() or 1, usable_cores=usable_cores(),
        memory_bytes=_memory_bytes(), gpus=gpu_count(), mpirun=mpirun,
        mpi=_mpi_version(mpirun) if mpirun else None,
        horovod=_version("horovod"), tensorflow=_version("tensorflow") or _version("tensorflow-cpu"))
