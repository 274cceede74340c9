"""Which of this machine's GPUs a local job gets: its NVML topology, the GPUs other
processes already use, and the same placement engine the cluster uses."""

from __future__ import annotations

import shutil
import subprocess

from launcher.agent import nvml_topology
from launcher.errors import UserError
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
    busy = busy_gpus(topology.gpus)
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
        raise UserError(
            f"--gpus {spec.gpus_per_worker} with --workers {spec.workers} needs "
            f"{plural(spec.total_gpus, 'GPU')}; this machine has {topology.gpus}, {free} of them free"
            + (f" ({result.reason})" if result.reason else "")
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


def _local_topology(spec: JobSpec | None):
    try:
        collect = getattr(nvml_topology, "collect_topology", None)
        if collect is not None:
            return collect()
        return nvml_topology.collect(nvml_topology.load_nvml()).topology()
    except Exception as exc:  # noqa: BLE001 - NvmlUnavailable, or an NVMLError mid-way
        detail = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        asked = f"--gpus {spec.gpus_per_worker}: " if spec is not None else ""
        raise UserError(
            f"{asked}cannot see this machine's GPUs ({detail}); run on the CPU with --gpus 0"
        ) from None


def busy_gpus(count: int) -> set[int]:
    """GPUs (NVML indices) where some process already computes; empty when unknown."""
    try:
        import pynvml

        pynvml.nvmlInit()
        busy = set()
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            if pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                busy.add(i)
        return busy
    except Exception:  # noqa: BLE001 - no pynvml, or an old driver: fall back below
        pass
    return _busy_from_nvidia_smi()


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
