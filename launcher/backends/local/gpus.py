"""Which of this machine's GPUs a local job gets: its NVML topology, the GPUs other
processes already use, and the same placement engine the cluster uses.

`gpu_state` is the one answer to "which GPUs are free here" that `submit`, `plan`, `top node`
and `doctor` all use. A GPU is taken when
- a running hvdk8s job of this machine holds it (its ranks may not have touched it yet),
- NVML lists a compute process on it (another program, or a job started by hand), or
- MIG mode is on: the GPU is split into instances and a local job takes whole GPUs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

from launcher.errors import Refused, UserError
from launcher.hardware import nvml_topology
from mpijob.jobspec.spec import JobSpec
from mpijob.plural import plural
from mpijob.scheduling.cluster import Cluster, Node


def choose_gpus(spec: JobSpec, placement, host: str) -> tuple[list[int], object | None]:
    """(GPU indices in local-rank order, the Placement used); ([], None) for a CPU job.

    Raises UserError, before anything starts, when this machine cannot hold the job.
    """
    if spec.gpus_per_worker == 0:
        return [], None
    # lazy: placement (~10 ms) only for a job with GPUs; pynvml below is optional (hvdk8s[agent])
    from mpijob.scheduling.placement import PlacementRequest, place

    topology = _local_topology(spec)
    state = gpu_state(topology)
    busy = set(state.taken)
    if _names_only(placement, host):
        # A plan made for this machine (e.g. by `hvdk8s plan`) is honoured as given.
        gpus = [g for a in placement.assignments for g in a.gpus]
        taken = sorted(set(gpus) & busy)
        missing = sorted(g for g in gpus if g >= topology.gpus)
        if not missing and not taken and len(gpus) == spec.total_gpus:
            return gpus, placement
    node = Node(name=host, gpus=topology.gpus, topology=topology, allocated=frozenset(busy))
    # Node selectors and tolerations are about cluster nodes; here there is one machine.
    request = PlacementRequest(workers=spec.workers, gpus_per_worker=spec.gpus_per_worker)
    result = place(Cluster((node,)), request, policy=spec.placement_policy)
    if not result.feasible:
        free = topology.gpus - len(busy)
        raise Refused(
            f"--gpus {spec.gpus_per_worker} with --workers {spec.workers} needs "
            f"{plural(spec.total_gpus, 'GPU')}; this machine has {topology.gpus}, {free} of them free"
            + (f" ({result.reason})" if result.reason else "")
            + (f"; taken: {state.taken_text()}" if state.taken else "")
        )
    return [g for a in result.assignments for g in a.gpus], result


def gpu_count() -> int:
    """How many GPUs this machine shows (0 where NVML or a driver is missing)."""
    try:
        return _local_topology(None).gpus
    except UserError:
        return 0


def _names_only(placement, host: str) -> bool:
    return bool(
        placement is not None
        and getattr(placement, "feasible", False)
        and placement.assignments
        and all(a.node == host for a in placement.assignments)
    )


# What the NVIDIA kernel driver creates once loaded (nvidia.ko): no GPU is usable without it.
NVIDIA_DRIVER = "/proc/driver/nvidia"


def has_nvidia_driver() -> bool:
    return os.path.exists(NVIDIA_DRIVER)


def _local_topology(spec: JobSpec | None):
    try:
        return nvml_topology.collect(nvml_topology.load_nvml()).topology()
    except Exception as exc:  # noqa: BLE001 - NvmlUnavailable, or an NVMLError mid-way
        detail = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        if not has_nvidia_driver():
            # A CPU-only machine: with or without NVML's Python binding (which then finds no
            # libnvidia-ml), the cause is the missing driver, not a package to install.
            detail = f"no NVIDIA driver: {NVIDIA_DRIVER} is absent"
        asked = f"--gpus {spec.gpus_per_worker}: " if spec is not None else ""
        raise Refused(
            f"{asked}cannot see this machine's GPUs ({detail}); run on the CPU with --gpus 0"
        ) from None


@dataclass(frozen=True)
class GpuState:
    """This machine's GPUs as every local command sees them."""

    count: int
    taken: Mapping[int, str] = field(default_factory=dict)  # NVML index -> who holds it
    unseen: str | None = None  # why no GPU can be seen (no NVML, no driver)

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.count) if i not in self.taken)

    def taken_text(self) -> str:
        return "; ".join(f"GPU{i} {who}" for i, who in sorted(self.taken.items()))


def gpu_state(topology=None) -> GpuState:
    """Which of this machine's GPUs are free (module docstring); `topology`: already read."""
    if topology is None:
        try:
            topology = _local_topology(None)
        except UserError as exc:
            return GpuState(0, {}, str(exc))
    count = topology.gpus
    taken: dict[int, str] = {i: who for i, who in _hvdk8s_jobs().items() if i < count}
    busy = busy_gpus(count)
    holders = process_holders(count) if busy else {}
    for i in sorted(busy):
        taken.setdefault(i, holders.get(i, "in use by another process"))
    return GpuState(count, taken)


def _hvdk8s_jobs() -> dict[int, str]:
    """GPUs of this machine's running hvdk8s jobs: held from submit on, before CUDA starts.
    A job whose supervisor is gone (killed with the machine's processes) holds none."""
    from launcher.backends.local import procs, state

    held: dict[int, str] = {}
    try:
        every = state.all_job_paths(None)
    except OSError:
        return held
    for paths in every:
        try:
            record = state.read_status(paths.status)
        except UserError:  # unreadable state: the NVML processes still tell
            continue
        if record is None or record.phase.terminal or (
                record.supervisor_pid is not None
                and not procs.is_job_process(record.supervisor_pid, record.uid)):
            continue
        for g in record.gpus:
            held.setdefault(g, f"held by hvdk8s job {paths.namespace}/{paths.name}")
    return held


def busy_gpus(count: int) -> set[int]:
    """GPUs (NVML indices) that some process uses or MIG splits; empty when unknown."""
    return set(process_holders(count))


def process_holders(count: int) -> dict[int, str]:
    """Per busy GPU, who holds it: NVML's compute processes and MIG mode, else nvidia-smi's."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no pynvml, or no driver: fall back below
        return dict.fromkeys(_busy_from_nvidia_smi(), "in use by a process (nvidia-smi)")
    held: dict[int, str] = {}
    for i in range(count):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except pynvml.NVMLError:
            continue
        if procs:
            held[i] = "in use by " + ", ".join(_process(pynvml, p.pid) for p in procs[:3]) + \
                (f" and {len(procs) - 3} more" if len(procs) > 3 else "")
        elif _mig_on(pynvml, handle):
            held[i] = "in MIG mode (split into instances; a local job takes whole GPUs)"
    return held


def _process(pynvml, pid: int) -> str:
    try:
        name = pynvml.nvmlSystemGetProcessName(pid)
        name = name.decode() if isinstance(name, bytes) else name
    except Exception:  # noqa: BLE001 - another user's process, or an old binding
        return f"pid {pid}"
    return f"pid {pid} ({name.rsplit('/', 1)[-1]})"


def _mig_on(pynvml, handle) -> bool:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except Exception:  # noqa: BLE001 - NOT_SUPPORTED before Ampere, or an old binding
        return False
    return current == getattr(pynvml, "NVML_DEVICE_MIG_ENABLE", 1)


def gpu_model() -> str:
    """This machine's GPU name as NVML gives it ("NVIDIA H100 80GB HBM3"); "unknown" without."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return "unknown"
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
    except Exception:  # noqa: BLE001 - no pynvml, or no driver
        return "unknown"
    return name.decode() if isinstance(name, bytes) else str(name)


def local_cluster() -> tuple[Cluster, GpuState]:
    """This machine as a one-node cluster, its taken GPUs allocated (what `plan` places on
    when no cluster is configured), and the GPU state it was made from."""
    import socket

    from mpijob.scheduling.topology import Topology

    try:
        topology = _local_topology(None)
    except UserError:
        topology = Topology(links=(), name="no-gpus")
    state = gpu_state(topology)
    return Cluster((Node(name=socket.gethostname(), gpus=state.count, topology=topology,
                         allocated=frozenset(state.taken), gpu_model=gpu_model()),)), state


def _busy_from_nvidia_smi() -> set[int]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return set()

    def query(*args: str) -> list[list[str]]:
        out = subprocess.run([smi, *args, "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            return []
        return [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]

    try:
        index_of = {row[1]: int(row[0]) for row in query("--query-gpu=index,uuid") if len(row) >= 2}
        used = {row[0] for row in query("--query-compute-apps=gpu_uuid") if row}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return set()
    return {index_of[u] for u in used if u in index_of}
