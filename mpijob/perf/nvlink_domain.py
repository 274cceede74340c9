"""Pricing the links between nodes of one NVLink partition (mpijob.scheduling.nvlink).

On GB200/GB300 NVL72 every GPU has 18 NVLink 5 links into the rack's NVLink switches:
1.8 TB/s per GPU both directions together, 900 GB/s each way (mpijob.scheduling.links cites
NVIDIA's pages), to any other GPU of the partition, on another tray as much as on its own.
NCCL uses that path across nodes (its NVLS/MNNVL transports) only where the process may
import other nodes' GPU memory, which in Kubernetes needs an IMEX channel: the one a
ComputeDomain's ResourceClaimTemplate gives each pod (NVIDIA k8s-dra-driver-gpu,
docs: "ComputeDomains ... guarantee NVLink reachability between pods"). Without the
channel the same nodes talk over the network, so that is how they are priced then.

A ring over the job's GPUs then runs at one GPU's NVLink bandwidth per step: every GPU
sends to its successor over its own links, whichever node it is on. The latency per step
stays the network's (NCCL's tuning model has no MNNVL class): conservative for small
fused buffers, irrelevant at the 128 MiB fusion size. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpijob.perf import perfdata
from mpijob.scheduling import links
from mpijob.scheduling.cluster import Node
from mpijob.scheduling.nvlink import short


def per_gpu_gbs(node: Node) -> float:
    """One GPU's NVLink bandwidth, one direction (GB/s): its links x the per-link figure."""
    gpu = perfdata.normalize_gpu(node.gpu_model) or ""
    count = perfdata.NVLINKS_PER_GPU.get(gpu, perfdata.NVLINKS_PER_GPU["H100"])
    return count * links.nvlink_gbs_per_link(node.gpu_model)


def shared_domain(nodes: Sequence[Node]) -> str | None:
    """The NVLink partition every node of the job is in, or None."""
    domains = {n.nvlink_domain for n in nodes}
    domain = domains.pop() if len(domains) == 1 else None
    return domain or None


def fabric_link(nodes: Sequence[Node], channel: bool, notes: list[str]) -> tuple[float, str] | None:
    """(GB/s, what) of the NVLink fabric between the job's nodes, or None where the network
    carries their traffic; a note says which and why."""
    if len(nodes) < 2:
        return None
    domain = shared_domain(nodes)
    if domain is None:
        if any(n.nvlink_domain for n in nodes):
            notes.append("the job's nodes are in several NVLink partitions (or none): "
                         "traffic between them goes over the network")
        return None
    if not channel:
        notes.append(f"the job's nodes share NVLink partition {short(domain)} but the job has "
                     "no ComputeDomain IMEX channel: priced as the network")
        return None
    gbs = min(per_gpu_gbs(n) for n in nodes)
    notes.append(f"NVLink across nodes: partition {short(domain)} with a ComputeDomain IMEX "
                 f"channel ({gbs:g} GB/s per GPU each way)")
    return gbs, f"NVLink across nodes of partition {short(domain)} ({gbs:g} GB/s per GPU)"
