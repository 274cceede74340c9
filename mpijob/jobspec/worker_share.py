"""Default CPU and memory requests of worker pods, when the user gives no --cpu/--memory.

A pod that requests only `nvidia.com/gpu` is BestEffort for CPU and memory: the kubelet
evicts it first under node pressure, and a ResourceQuota on `requests.cpu`/`requests.memory`
refuses it ("must specify requests.cpu"). So every worker pod requests a share of its node:

- GPU jobs: per GPU, 90% of the planned node's allocatable over the node's GPU count
  (`allocatable x 0.9 / node GPUs`), capped at what the node has free for the job's GPUs
  there, so the default never makes a pod unschedulable where the plan put it. The 10% left
  is for DaemonSets (device plugin, CNI, monitoring, the topology agent) and for the
  launcher pod, which may land on the same node. Allocatable comes from the live snapshot
  (Node `status.allocatable`) or the cluster file's `cpu`/`memory`, whichever the plan used.
- No planned node, or a node without figures: 1 CPU and 4Gi per GPU, which any GPU node has.
- CPU-only jobs (`--gpus 0`): 1 CPU and 2Gi per rank, capped at what the node has free.

A pod's request is the per-slot share times its slots (its GPUs, or its ranks), rounded
down: CPU to whole cores (the kubelet's static CPU manager gives exclusive cores only to
whole-core requests), else to 100m; memory to whole Gi, else Mi.

Built-in mode has one pod per node, so pods on different nodes request their own node's
share. In operator mode every worker comes from one template: it requests the smallest
share of the planned nodes, so each worker fits wherever the operator's pod lands.

Pure: the node figures come in as arguments, whatever holds them (the planned
`mpijob.scheduling.cluster.Node`s and placement: the job's spec stores the shares, so this
module knows neither).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from decimal import ROUND_FLOOR, Decimal
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from mpijob.jobspec.quantity import parse_quantity


class Node(Protocol):
    """What a share is cut from: a node's figures (mpijob.scheduling.cluster.Node)."""

    @property
    def name(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def alloc_cpu(self) -> float | None: ...
    @property
    def free_cpu(self) -> float | None: ...
    @property
    def alloc_memory(self) -> float | None: ...
    @property
    def free_memory(self) -> float | None: ...


class Cluster(Protocol):
    @property
    def nodes(self) -> Iterable[Node]: ...


class Assignment(Protocol):
    @property
    def node(self) -> str: ...
    @property
    def slots(self) -> int: ...


class Placement(Protocol):
    @property
    def feasible(self) -> bool: ...
    @property
    def assignments(self) -> Iterable[Assignment]: ...

GI = Decimal(2**30)
MI = Decimal(2**20)
HEADROOM = Decimal("0.9")  # of allocatable; the rest for DaemonSets and the launcher
PER_GPU_UNPLANNED = (Decimal(1), 4 * GI)
PER_RANK_CPU_ONLY = (Decimal(1), 2 * GI)


class ResourceShare(BaseModel):
    """What one slot (a GPU, or a rank of a CPU-only job) of a worker pod requests on a node
    (None: pods without a planned node), exact, before rounding; `source` says why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str | None = None
    cpu: str  # cores per slot
    memory: str  # bytes per slot
    source: str


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _gib(value: Decimal | float) -> str:
    return f"{Decimal(value) / GI:.3g}Gi"


def plan_shares(cluster: Cluster | None, placement: Placement | None,
                gpus_per_worker: int, beside: tuple[str, str, str] | None = None,
                ) -> tuple[ResourceShare, ...]:
    """The per-slot shares of the planned nodes, and one (node None) for pods without one.
    `beside`: (cpu, memory, what) of a pod of the job that may land on any planned node
    before the workers (the start gate): a cap on a node's free room leaves it that much."""
    base = PER_GPU_UNPLANNED if gpus_per_worker else PER_RANK_CPU_ONLY
    what = "per GPU" if gpus_per_worker else "per rank"
    shares = [ResourceShare(
        cpu=_fmt(base[0]), memory=_fmt(base[1]),
        source=f"built-in default {what} ({_fmt(base[0])} CPU, {_gib(base[1])})")]
    if cluster is None or placement is None or not placement.feasible:
        return tuple(shares)
    slots: Counter[str] = Counter()
    for a in placement.assignments:
        slots[a.node] += a.slots
    nodes = {n.name: n for n in cluster.nodes}
    for name in sorted(slots):
        shares.append(_node_share(nodes[name], slots[name], gpus_per_worker, base, beside))
    return tuple(shares)


def _node_share(node: Node, slots: int, gpus_per_worker: int,
                base: tuple[Decimal, Decimal],
                beside: tuple[str, str, str] | None = None) -> ResourceShare:
    what = "per GPU" if gpus_per_worker else "per rank"
    values, why = [], []
    kept = ((parse_quantity(beside[0]), parse_quantity(beside[1]), beside[2]) if beside
            else (Decimal(0), Decimal(0), ""))
    for (alloc, free, fallback, unit, reserve) in (
            (node.alloc_cpu, node.free_cpu, base[0], "CPU", kept[0]),
            (node.alloc_memory, node.free_memory, base[1], "memory", kept[1])):
        show = (lambda v: f"{v:g}") if unit == "CPU" else _gib
        if gpus_per_worker and alloc is not None and node.gpus:
            value = Decimal(str(alloc)) * HEADROOM / node.gpus
            text = f"{unit} 0.9 x {show(alloc)} allocatable / {node.gpus} GPUs"
        else:
            value = fallback
            text = f"{unit} built-in {show(fallback)} {what}" + (
                "" if alloc is not None or not gpus_per_worker else " (no allocatable known)")
        if free is not None and (room := Decimal(str(free)) - reserve) / slots < value:
            value = max(room, Decimal(0)) / slots
            text += f", capped at the {show(free)} free for its {slots} {what[4:]}s" + (
                f" less {show(float(reserve))} for {kept[2]}" if reserve else "")
        values.append(value)
        why.append(text)
    return ResourceShare(node=node.name, cpu=_fmt(values[0]), memory=_fmt(values[1]),
                         source=f"node {node.name}: " + "; ".join(why))


def share_for(shares: tuple[ResourceShare, ...], node: str | None) -> ResourceShare | None:
    """The share a pod on `node` requests; a pod without a node (operator mode's template)
    takes the smallest of the planned nodes', or the unplanned default."""
    if not shares:
        return None
    by_node = {s.node: s for s in shares}
    if node is not None and node in by_node:
        return by_node[node]
    planned = [s for s in shares if s.node is not None]
    if not planned:
        return by_node.get(None)
    cpu = min(planned, key=lambda s: Decimal(s.cpu))
    mem = min(planned, key=lambda s: Decimal(s.memory))
    return ResourceShare(
        cpu=cpu.cpu, memory=mem.memory,
        source=f"the smallest share of the planned nodes (one worker template): "
               f"CPU of {cpu.node}, memory of {mem.node}")


def round_cpu(cores: Decimal) -> str | None:
    if cores >= 1:
        return str(int(cores.to_integral_value(ROUND_FLOOR)))
    tenths = int((cores * 10).to_integral_value(ROUND_FLOOR))
    return f"{tenths * 100}m" if tenths else None


def round_memory(size: Decimal) -> str | None:
    if size >= GI:
        return f"{int((size / GI).to_integral_value(ROUND_FLOOR))}Gi"
    mib = int((size / MI).to_integral_value(ROUND_FLOOR))
    return f"{mib}Mi" if mib else None


def pod_defaults(shares: tuple[ResourceShare, ...], node: str | None,
                 slots: int) -> tuple[str | None, str | None, str] | None:
    """(cpu, memory, source) a worker pod with `slots` slots on `node` requests by default."""
    share = share_for(shares, node)
    if share is None:
        return None
    return (round_cpu(Decimal(share.cpu) * slots), round_memory(Decimal(share.memory) * slots),
            share.source)


def add_bytes(*quantities: str) -> str:
    """The sum of memory quantities, in the largest binary unit that states it exactly."""
    total = sum((parse_quantity(q) for q in quantities), Decimal(0))
    for suffix, unit in (("Gi", GI), ("Mi", MI), ("Ki", Decimal(1024))):
        if total % unit == 0:
            return f"{int(total / unit)}{suffix}"
    return str(int(total.to_integral_value(ROUND_FLOOR)))
