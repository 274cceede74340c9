"""Predicted training throughput of a Horovod job on a placement: compute, allreduce, overlap.

    step = compute + slowest-rank wait + allreduce exposed after the backward pass
    images/s = GPUs * batch / step;  scaling efficiency = images/s / (GPUs * single-GPU images/s)

Compute. Each GPU runs `batch` images per step at the single-GPU training speed of its GPU
model (`mpijob.perf.perfdata`: published figures with sources; a small batch is slower per image
by a fixed per-step cost). A job with several GPU models waits for the slowest. A GPU or
model pair with no figure falls back to a FLOPs estimate and says so in `notes`.

Gradients. Every step allreduces all trainable parameters. Horovod allreduces gradients in
the dtype the optimizer produces them: with Keras mixed precision (`--use_fp16`) the
variables, hence the gradients, stay fp32, and hvd.DistributedGradientTape sends them as they
are unless `compression=hvd.Compression.fp16` is passed (images/benchmark/hvd_cnn_bench.py
does not). So both precisions move 4 bytes per parameter; `Assumptions.fp16_allreduce`
models the compressed case (2 bytes).

Who talks to whom. NCCL runs one communicator over the job's ranks and groups ranks by host
name. Every worker pod has its own host name, so NCCL treats each *pod* as a host: the GPUs
inside one pod use P2P/NVLink as the node's topology allows, but two pods never do, even on
the same node. Two single-GPU containers each see one GPU, so CUDA peer access and CUDA IPC
between them are impossible, and NCCL falls back to a host path (its socket/shared-memory
transports through system memory). We price that path like a cross-socket PCIe path
(`SYS`, mpijob.scheduling.links: ~0.5 of a PCIe x16) and call it "shared memory between pods". This is
why hvdk8s puts all of a job's GPUs on a node into one pod: spreading single-GPU pods over a
DGX throws its NVLink away.

Allreduce time, the better of two schedules (as NCCL's ring/tree choice roughly does), each
with a bandwidth term and a latency term:
- ring: one ring over all n GPUs, pod after pod, node after node:
  2(n-1)/n * S / B, B the slowest link on the ring.
- hierarchical (pods with several GPUs, several pods): reduce-scatter inside every pod,
  allreduce between pods, allgather inside every pod:
  2(g-1)/g * S / B_pod + 2(p-1)/p * S / B_between_pods, g GPUs per pod, p pods. The g
  cross-pod rings of a pod share its node's NIC, so the NIC carries 2(p-1)/p * S.
- Inside a pod the ring bandwidth is the best Hamiltonian cycle's slowest link; when a cycle
  made only of NVLink exists, NCCL runs several rings (channels) over all the NVLinks, so a
  GPU's bandwidth is the sum of its NVLinks to the other GPUs of the pod, capped by the links
  a GPU has (NVLINKS_PER_GPU: 4 P100, 6 V100, 12 A100, 18 H100; NVSwitch systems print
  NV12/NV18 for every pair but a GPU still has only its own links), and the pod's bandwidth
  is the smallest such sum.
- Between nodes: each node's NIC at `network_gbps` times an efficiency that depends on the
  transport the job really gets (`Assumptions.transport`: the plan says "rdma" only when the
  worker pods request the nodes' RDMA devices, mpijob.scheduling.rdma):
  - TCP, NCCL's socket transport over the pod network: TCP_EFFICIENCY (0.6) of line rate by
    default, a node's own `tcp_efficiency` (cluster file) where given. NCCL's socket
    transport moves each channel's data over one TCP stream staged through host memory;
    nccl-tests all_reduce_perf over TCP does not reach "more than 60% of wire speed over
    32Gbps networks" with large messages (github.com/NVIDIA/nccl/issues/209), and at 100
    Gb/s the busbw of 32-128 MB messages stays at 1.1-1.5 of 12.5 GB/s without tuning
    NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD (github.com/NVIDIA/nccl/issues/450). iperf3's
    0.9 is not what a collective sees: NCCL needs every socket of the ring at full speed at
    once (nccl-tests#83, a maintainer's answer).
  - RDMA (RoCE/InfiniBand) about 0.92 (NCCL's IB busbw on EDR/HDR is ~11-23 of 12.5-25 GB/s).
  "auto" (the simulator's default, where no job asks for anything) takes RDMA when every node
  of the job offers RDMA devices (`Node.rdma`) or carries the NFD label
  `feature.node.kubernetes.io/rdma.available=true` or `hvdk8s.io/network-transport=rdma`.
- Latency per fused allreduce: NCCL's own tuning model (mpijob.perf.perfdata: tuning.cc,
  Ring/Simple): 8.4 us plus, per ring step, 3.4 us over NVLink, 5.7 us over PCIe and 9.6 us
  over the network, x1.9 when the ring spans nodes. Time of one allreduce = latency +
  bytes x seconds per byte: a link's efficiency at the fusion buffers' sizes.

Overlap (mpijob.perf.overlap): gradients become ready in backward order (per-layer profiles in
mpijob.perf.perfdata), Horovod's cycle fuses what is ready and allreduces it while backprop goes
on; only what ends after the backward pass is exposed. The backward pass is 2/3 of compute.

Stragglers: every allreduce waits for the slowest rank; compute is stretched by the
expected maximum of n normal step times (perfdata.RANK_JITTER).

The model uses published single-GPU figures, link bandwidths and NCCL's and Horovod's
documented behaviour; one constant (RANK_JITTER) is fitted to one multi-GPU result, and
benchmarks/model_fidelity compares it with published multi-GPU results. Qualitatively:
cross-node Ethernet hurts VGG16 (138 M
parameters) far more than ResNet-50 (25.6 M); at 128 GPUs on 25 GbE ResNet-101 and
Inception V3 scale much better than VGG16 (Sergeev & Del Balso 2018, Horovod: ~90% vs 68%
at 512 GPUs on RoCE 25 Gb/s); NVLink beats PCIe beats the network.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

from mpijob.errors import SpecError
from mpijob.jobspec.defaults import PRECISIONS
from mpijob.perf import calibration as calib
from mpijob.perf import nvlink_domain, overlap, perfdata
from mpijob.perf.calibration import Calibration
from mpijob.scheduling import links
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.network import span

RDMA_LABELS = (
    ("feature.node.kubernetes.io/rdma.available", "true"),
    ("hvdk8s.io/network-transport", "rdma"),
)
# Fractions of line rate a large NCCL allreduce reaches (see the module docstring).
TCP_EFFICIENCY = 0.6
RDMA_EFFICIENCY = 0.92
# Bytes per gradient element as allreduced.
FP32_BYTES, FP16_BYTES = 4, 2
# Pods of one job on the same node talk through host memory (see the module docstring).
BETWEEN_PODS_LINK = "SYS"
# Above this many GPUs in one pod the exact best-ring search is replaced by a greedy one.
EXACT_RING_MAX_GPUS = 12


class PredictionError(ValueError):
    """The placement cannot be predicted (infeasible, empty, or names unknown nodes)."""


@dataclass(frozen=True)
class Assumptions:
    tcp_efficiency: float = TCP_EFFICIENCY
    rdma_efficiency: float = RDMA_EFFICIENCY
    # "tcp" or "rdma": what the job's pods get (the plan decides); "auto": RDMA where every
    # node offers it (the simulator, which requests nothing).
    transport: str = "auto"
    backward_share: float = 2 / 3
    fusion_bytes: int = perfdata.HOROVOD_FUSION_BYTES
    cycle_s: float = perfdata.HOROVOD_CYCLE_S
    rank_jitter: float = perfdata.RANK_JITTER
    # Fitted on the cluster's own runs (mpijob.perf.calibration); None: published figures only.
    calibration: Calibration | None = None
    calibration_source: str = ""  # the file it came from, for the notes
    fp16_allreduce: bool = False  # hvd.Compression.fp16
    # The job's pods hold a ComputeDomain IMEX channel: nodes of one NVLink partition talk
    # over NVLink (mpijob.perf.nvlink_domain); set by `predict` from the placement.
    nvlink_channel: bool = False


DEFAULT_ASSUMPTIONS = Assumptions()


@dataclass(frozen=True)
class Prediction:
    images_per_sec: float
    step_seconds: float
    compute_seconds: float
    allreduce_seconds: float
    bottleneck: str
    scaling_efficiency: float
    single_gpu_images_per_sec: float
    gpus: int
    algorithm: str
    notes: tuple[str, ...] = ()
    # Part of allreduce_seconds not hidden behind the backward pass.
    exposed_allreduce_seconds: float = 0.0
    # Time waiting for the slowest rank's compute (perfdata.RANK_JITTER).
    straggler_seconds: float = 0.0
    gradient_bytes: int = 0
    gpu_model: str = ""
    # Per-image figure behind the compute time, with its source.
    compute_source: str = ""

    def to_json(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d

    def describe(self) -> list[str]:
        """Lines for humans, one fact each."""
        per_gpu = self.single_gpu_images_per_sec
        lines = [
            f"throughput   {self.images_per_sec:,.0f} images/s on {self.gpus} GPU"
            f"{'s' if self.gpus != 1 else ''} ({self.gpu_model or 'unknown GPU'}), "
            f"scaling efficiency {self.scaling_efficiency:.0%}",
            f"step         {self.step_seconds * 1e3:,.1f} ms = compute "
            f"{self.compute_seconds * 1e3:,.1f} ms + slowest rank "
            f"{self.straggler_seconds * 1e3:,.1f} ms + exposed allreduce "
            f"{self.exposed_allreduce_seconds * 1e3:,.1f} ms",
            f"compute      {per_gpu:,.1f} images/s per GPU ({self.compute_source})",
        ]
        if self.gpus > 1:
            lines.append(
                f"allreduce    {self.allreduce_seconds * 1e3:,.1f} ms per step, {self.algorithm}, "
                f"{self.gradient_bytes / 1e6:,.1f} MB of gradients"
            )
        lines.append(f"bottleneck   {self.bottleneck}")
        lines.extend(f"note         {n}" for n in self.notes)
        return lines


@dataclass(frozen=True)
class _Link:
    """A bottleneck candidate: its bandwidth (GB/s), what it is, and its latency class."""

    gbs: float
    what: str
    kind: str  # "nvlink", "pcie" or "net"


# ---------------------------------------------------------------------------------- compute
@dataclass(frozen=True)
class _Compute:
    images_per_sec: float
    gpu: str
    source: str
    notes: tuple[str, ...]


@lru_cache(maxsize=4096)
def _single_gpu(gpu_product: str, model: str, precision: str, batch_size: int) -> _Compute:
    notes: list[str] = []
    gpu = perfdata.normalize_gpu(gpu_product)
    if gpu is None:
        notes.append(
            f"unknown GPU {gpu_product!r}: assumed {perfdata.DEFAULT_GPU}-class compute "
            "(FLOPs estimate)"
        )
        fig = perfdata.flops_estimate(perfdata.DEFAULT_GPU, model, precision)
        gpu = f"unknown ({gpu_product})"
    else:
        same = perfdata.GPU_SAME_AS.get(gpu)
        if same:
            notes.append(f"{gpu}: no published figures; used the {same}'s (same compute silicon)")
        lookup = same or gpu
        published = perfdata.figure(lookup, model, precision)
        if published is None:
            fig = perfdata.flops_estimate(lookup, model, precision)
            notes.append(f"no published {model} {precision} figure for the {lookup}: "
                         f"FLOPs estimate ({fig.derived})")
        else:
            fig = published
            if fig.derived:
                notes.append(f"{lookup} {model} {precision}: {fig.derived}")
    ratio = next((r for (g, tag), r in perfdata.FORM_FACTOR_RATIO.items()
                  if g == gpu and tag in gpu_product.upper()), None)
    if ratio is not None:
        fig = fig.scaled(ratio, f"{fig.derived + '; ' if fig.derived else ''}"
                                f"x{ratio:.2f} for the PCIe card's clocks")
        notes.append(f"{gpu} PCIe: {fig.derived}")
    if fig.source == perfdata.FLOPS_SOURCE:
        source = f"{perfdata.FLOPS_SOURCE}: {fig.derived}"
    else:
        source = (f"{fig.images_per_sec:,.0f} images/s at batch {fig.batch_size}"
                  f"{' (derived)' if fig.derived else ''}; {perfdata.cite(fig)}")
    return _Compute(fig.at_batch(batch_size), gpu, source, tuple(notes))


def single_gpu_images_per_sec(gpu_product: str, model: str, precision: str, batch_size: int) -> float:
    """Training images/s of one GPU (no communication): the compute side of `predict`."""
    model_key = perfdata.normalize_model(model)
    prec = perfdata.normalize_precision(precision)
    if model_key is None or prec is None:
        raise SpecError("model" if model_key is None else "precision",
                        f"unknown {'model' if model_key is None else 'precision'}")
    return _single_gpu(gpu_product, model_key, prec, batch_size).images_per_sec


# ------------------------------------------------------------------------ inside one pod
def _link_kind(code: str) -> str:
    return "nvlink" if links.is_nvlink(code) else "pcie"


def _has_cycle(n: int, adj: Sequence[int]) -> bool:
    """Is there a ring through all n >= 3 vertices? adj[v]: bitmask of v's neighbours.
    Dynamic programming over subsets (Held-Karp style): fine up to a dozen GPUs."""
    full = (1 << n) - 1
    # reach[mask]: bitmask of vertices v such that a path from 0 covers exactly mask, ends at v.
    reach = [0] * (1 << n)
    reach[1] = 1
    for mask in range(1, full + 1, 2):
        ends = reach[mask]
        if not ends:
            continue
        v = 0
        while ends:
            if ends & 1:
                nxt = adj[v] & ~mask
                while nxt:
                    low = nxt & -nxt
                    reach[mask | low] |= low
                    nxt ^= low
            ends >>= 1
            v += 1
    return bool(reach[full] & adj[0])


def _best_cycle_bottleneck(bw: tuple[tuple[float, ...], ...]) -> float:
    """The largest t such that a ring through all GPUs uses only links of >= t GB/s."""
    n = len(bw)
    values = sorted({bw[i][j] for i in range(n) for j in range(n) if i != j}, reverse=True)
    if n <= 3 or len(values) == 1:  # one ring only, or every link alike
        return values[-1]
    if n > EXACT_RING_MAX_GPUS:
        return _greedy_cycle_bottleneck(bw)
    for t in values:
        adj = [sum(1 << j for j in range(n) if j != i and bw[i][j] >= t) for i in range(n)]
        if _has_cycle(n, adj):
            return t
    return values[-1]


def _greedy_cycle_bottleneck(bw: tuple[tuple[float, ...], ...]) -> float:
    """Widest-next-hop rings from every start; the best one's slowest link (a lower bound)."""
    n = len(bw)
    best = 0.0
    for start in range(n):
        tour, left = [start], set(range(n)) - {start}
        while left:
            nxt = max(left, key=lambda j: bw[tour[-1]][j])
            tour.append(nxt)
            left.remove(nxt)
        best = max(best, min(bw[tour[k]][tour[(k + 1) % n]] for k in range(n)))
    return best


@lru_cache(maxsize=4096)
def _pod_ring(codes: tuple[tuple[str, ...], ...], pcie_gen: int, gpu_model: str,
              nvlink_cap_links: int) -> tuple[float, str, str]:
    """(GB/s, bottleneck description, latency kind) of the best rings over a pod's GPUs."""
    n = len(codes)
    bw = tuple(tuple(math.inf if i == j else
                     links.bandwidth_gbs(codes[i][j], pcie_gen=pcie_gen, gpu_model=gpu_model)
                     for j in range(n)) for i in range(n))
    ring = _best_cycle_bottleneck(bw)
    slowest = min((codes[i][j] for i in range(n) for j in range(n)
                   if i != j and bw[i][j] == ring), key=links.rank)
    nv_adj = [sum(1 << j for j in range(n) if j != i and links.is_nvlink(codes[i][j]))
              for i in range(n)]
    all_nvlink = all(links.is_nvlink(codes[i][j]) for i in range(n) for j in range(n) if i != j)
    if all_nvlink or (2 < n <= EXACT_RING_MAX_GPUS and _has_cycle(n, nv_adj)):
        per_link = links.nvlink_gbs_per_link(gpu_model)
        cap = nvlink_cap_links * per_link
        per_gpu = [min(cap, sum(bw[i][j] for j in range(n) if j != i and links.is_nvlink(codes[i][j])))
                   for i in range(n)]
        total = max(ring, min(per_gpu))
        return total, f"NVLink inside a pod ({total:g} GB/s per GPU over all its NVLinks)", "nvlink"
    kind = _link_kind(slowest)
    name = f"NVLink {slowest}" if kind == "nvlink" else f"PCIe path {slowest}"
    return ring, f"{name} inside a pod ({ring:g} GB/s)", kind


def _nvlink_cap(node: Node) -> int:
    gpu = perfdata.normalize_gpu(node.gpu_model)
    known = perfdata.NVLINKS_PER_GPU.get(gpu or "")
    if known:
        return known
    most = max((links.nvlink_count(c) for row in node.topology.links for c in row), default=0)
    return max(most, perfdata.NVLINKS_PER_GPU["V100"])


def _pod_link(node: Node, gpus: tuple[int, ...], notes: list[str]) -> _Link:
    topo = node.topology
    if any(g >= topo.gpus for g in gpus):
        notes.append(f"node {node.name}: GPU index beyond its {topo.gpus}-GPU topology; "
                     "assumed SYS paths")
        codes = tuple(tuple("X" if a == b else
                            (topo.link(a, b) if a < topo.gpus and b < topo.gpus else "SYS")
                            for b in gpus) for a in gpus)
    else:
        codes = tuple(tuple(topo.link(a, b) for b in gpus) for a in gpus)
    gbs, what, kind = _pod_ring(codes, node.pcie_gen, node.gpu_model, _nvlink_cap(node))
    return _Link(gbs, f"{what} on {node.name}", kind)


# -------------------------------------------------------------------------- between pods
def _transport(nodes: Sequence[Node], assumptions: Assumptions) -> str:
    if assumptions.transport in ("tcp", "rdma"):
        return assumptions.transport
    rdma = all(n.rdma or any(n.labels.get(k) == v for k, v in RDMA_LABELS) for n in nodes)
    return "rdma" if rdma else "tcp"


def _nic_link(node: Node, transport: str, assumptions: Assumptions) -> _Link:
    if transport == "rdma":
        eff = assumptions.rdma_efficiency
    else:  # the cluster's own measured socket efficiency wins over the published default
        eff = node.tcp_efficiency if node.tcp_efficiency is not None else assumptions.tcp_efficiency
    gbs = max(node.network_gbps, 1e-9) / 8 * eff
    return _Link(gbs, f"network: {node.network_gbps:g} Gb/s {transport.upper()} NIC of "
                      f"{node.name} ({gbs:.2f} GB/s effective)", "net")


def _uplink_links(nodes: Sequence[Node], transport: str, assumptions: Assumptions,
                  notes: list[str]) -> list[_Link]:
    """Nodes in several racks: the ring crosses each rack's oversubscribed uplinks to the
    spine, where a node gets its NIC / oversubscription (mpijob.scheduling.network)."""
    where = span([(n.name, n.network) for n in nodes])
    if where["racks"] < 2 or not any(n.network.known for n in nodes):
        return []
    notes.append(f"the job's nodes are in {where['racks']} racks"
                 + (f" of {where['blocks']} blocks" if where["blocks"] > 1 else "")
                 + ": traffic between racks crosses oversubscribed leaf uplinks")
    out = []
    for node in nodes:
        nic = _nic_link(node, transport, assumptions)
        over = node.network.oversubscription
        gbs = nic.gbs / over
        out.append(_Link(gbs, f"inter-rack: uplink of {node.network.describe()} ({over:g}:1 "
                              f"oversubscribed; {gbs:.2f} GB/s per node of {node.name})", "net"))
    return out


def _shm_link(node: Node) -> _Link:
    gbs = links.bandwidth_gbs(BETWEEN_PODS_LINK, pcie_gen=node.pcie_gen)
    return _Link(gbs, f"pod-to-pod through host memory on {node.name} ({gbs:g} GB/s; "
                      "no NVLink/P2P between containers)", "pcie")


def _calibrated(link: _Link, kind: str, cal: Calibration) -> _Link:
    """The link at the calibration's bandwidth for its kind, if it has one."""
    gbs = cal.link_gbs(kind)
    if gbs is None:
        return link
    return _Link(gbs, f"{link.what}; calibrated {kind} {gbs:.3g} GB/s", link.kind)


def _slowest(candidates: Sequence[_Link]) -> _Link:
    return min(candidates, key=lambda link: link.gbs)


# ------------------------------------------------------------------------------ predict
def predict(*, model: str, batch_size: int, precision: str, placement, cluster: Cluster,
            assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> Prediction:
    """Predicted throughput of `model` on `placement` (a feasible mpijob.scheduling.placement.Placement)."""
    if not getattr(placement, "feasible", False):
        reason = getattr(placement, "reason", None)
        raise PredictionError(f"cannot predict an infeasible placement{f': {reason}' if reason else ''}")
    if not placement.assignments:
        raise PredictionError("the placement assigns no pods")
    by_name = {n.name: n for n in cluster.nodes}
    if getattr(placement, "compute_domain", False) and not assumptions.nvlink_channel:
        assumptions = replace(assumptions, nvlink_channel=True)
    if all(not a.gpus for a in placement.assignments):
        return predict_cpu(model=model, batch_size=batch_size, precision=precision,
                           ranks=sum(max(1, a.workers) for a in placement.assignments),
                           hosts=len({a.node for a in placement.assignments}),
                           assumptions=assumptions)
    pods = []
    for a in placement.assignments:
        node = by_name.get(a.node)
        if node is None:
            raise PredictionError(f"the placement names node {a.node!r}, which is not in the cluster")
        pods.append((node, tuple(a.gpus)))
    return predict_pods(model=model, batch_size=batch_size, precision=precision, pods=pods,
                        assumptions=assumptions)


def predict_pods(*, model: str, batch_size: int, precision: str,
                 pods: Sequence[tuple[Node, tuple[int, ...]]],
                 assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> Prediction:
    """`predict` on (node, GPU indices) per worker pod, in placement order."""
    model_key = perfdata.normalize_model(model)
    if model_key is None:
        raise SpecError("model", f"unknown model {model!r}; the throughput model knows "
                                 f"{', '.join(perfdata.MODELS)}")
    prec = perfdata.normalize_precision(precision)
    if prec is None:
        raise SpecError("precision", f"unknown precision {precision!r}; expected "
                                     f"{' or '.join(PRECISIONS)}")
    if batch_size < 1:
        raise SpecError("batch_size", f"must be at least 1, got {batch_size}")
    if not pods:
        raise PredictionError("the placement assigns no pods")
    if any(not gpus for _, gpus in pods):
        raise PredictionError("a pod of the placement holds no GPU; the model predicts GPU training")

    notes: list[str] = []
    # Compute: the slowest GPU model sets the pace of synchronous SGD.
    computes = {}
    for node, _ in pods:
        if node.gpu_model not in computes:
            computes[node.gpu_model] = _single_gpu(node.gpu_model, model_key, prec, batch_size)
    slowest = min(computes.values(), key=lambda c: c.images_per_sec)
    for c in computes.values():
        notes.extend(n for n in c.notes if n not in notes)
    if len(computes) > 1:
        notes.append(f"mixed GPU models ({', '.join(sorted(c.gpu for c in computes.values()))}): "
                     f"every step waits for the {slowest.gpu}")
    compute_s = batch_size / slowest.images_per_sec
    n = sum(len(g) for _, g in pods)
    cal = assumptions.calibration
    fitted = cal.rate(slowest.gpu, model_key, prec, None) if cal is not None else None
    if fitted is not None:
        compute_s = fitted.step_seconds(batch_size)
        slowest = _Compute(batch_size / compute_s, slowest.gpu,
                           f"calibrated: {fitted.images_per_sec:,.1f} images/s + "
                           f"{fitted.step_overhead_s * 1e3:.1f} ms per step, {fitted.runs} runs",
                           slowest.notes)

    info = perfdata.MODELS[model_key]
    elem = FP16_BYTES if assumptions.fp16_allreduce else FP32_BYTES
    grad_bytes = info.params * elem

    # Every allreduce waits for the slowest rank: its compute stretches the whole timeline.
    slowest_rank = 1 + assumptions.rank_jitter * expected_max_normal(n)
    forward_s = (1 - assumptions.backward_share) * compute_s * slowest_rank
    backward_s = assumptions.backward_share * compute_s * slowest_rank
    if n == 1:
        allreduce_s, exposed = 0.0, 0.0
        algorithm, bottleneck = "none (single GPU)", "none: one GPU, no allreduce"
    else:
        multi_node = len({node.name for node, _ in pods}) > 1
        # NCCL picks its algorithm by its own cost model; take the one that ends the step first.
        timeline, algo = min(
            ((overlap.schedule(
                forward_s=forward_s, backward_s=backward_s,
                profile=perfdata.GRADIENT_PROFILES[model_key], bytes_per_param=elem,
                seconds_per_byte=c.seconds_per_byte, op_latency_s=c.op_latency_s,
                negotiate_s=_negotiate_s(n, multi_node), cycle_s=assumptions.cycle_s,
                fusion_bytes=assumptions.fusion_bytes), c)
             for c in allreduce_candidates(pods, assumptions, notes)),
            key=lambda pair: pair[0].end_s)
        allreduce_s, exposed = timeline.busy_s, timeline.exposed_s
        algorithm, bottleneck = algo.name, algo.bottleneck
        if exposed <= 0:
            bottleneck = f"compute (allreduce hidden behind the backward pass; slowest link: {bottleneck})"

    straggler_s = compute_s * (slowest_rank - 1)
    step = compute_s + straggler_s + exposed
    if cal is not None:
        if n > 1:
            step += cal.multi_rank_overhead_s
        notes.append(_calibration_note(assumptions, fitted is not None))
    ips = n * batch_size / step
    single = slowest.images_per_sec
    return Prediction(
        images_per_sec=ips,
        step_seconds=step,
        compute_seconds=compute_s,
        allreduce_seconds=allreduce_s,
        bottleneck=bottleneck,
        scaling_efficiency=ips / (n * single),
        single_gpu_images_per_sec=single,
        gpus=n,
        algorithm=algorithm,
        notes=tuple(notes),
        exposed_allreduce_seconds=exposed,
        straggler_seconds=straggler_s,
        gradient_bytes=grad_bytes,
        gpu_model=slowest.gpu,
        compute_source=slowest.source,
    )


@dataclass(frozen=True)
class AllreduceCost:
    """An allreduce schedule: seconds per gradient byte, latency per fused allreduce."""

    seconds_per_byte: float
    op_latency_s: float
    name: str
    bottleneck: str

    def seconds(self, grad_bytes: int, ops: float) -> float:
        return grad_bytes * self.seconds_per_byte + ops * self.op_latency_s


def _ring_latency(steps: int, kinds: Sequence[tuple[int, str]], multi_node: bool) -> float:
    """NCCL's ring latency: base + per-step latency by link kind, x plateau across nodes."""
    lat = perfdata.NCCL_RING_BASE_LATENCY_S + sum(
        count * perfdata.NCCL_RING_STEP_LATENCY_S[kind] for count, kind in kinds)
    return lat * (perfdata.NCCL_RING_PLATEAU_FACTOR if multi_node else 1.0)


def allreduce_cost(pods: Sequence[tuple[Node, tuple[int, ...]]], grad_bytes: int,
                   assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> AllreduceCost:
    """The cheaper of the candidate allreduces for `grad_bytes` in fusion-buffer pieces."""
    ops = max(1.0, grad_bytes / assumptions.fusion_bytes)
    return min(allreduce_candidates(pods, assumptions, []),
               key=lambda c: c.seconds(grad_bytes, ops))


def allreduce_candidates(pods: Sequence[tuple[Node, tuple[int, ...]]],
                         assumptions: Assumptions, notes: list[str]) -> list[AllreduceCost]:
    """A flat ring, and a hierarchical allreduce where some pod holds several GPUs."""
    # Pods of one node next to each other, nodes in order of first appearance: the ring order.
    by_node: dict[str, list[tuple[Node, tuple[int, ...]]]] = {}
    for node, gpus in pods:
        by_node.setdefault(node.name, []).append((node, gpus))
    groups = list(by_node.values())
    nodes = [group[0][0] for group in groups]
    n = sum(len(gpus) for _, gpus in pods)
    p = len(pods)
    multi_node = len(nodes) > 1

    # (GPUs in the pod, its ring link) for every pod with more than one GPU.
    in_pods = [(len(gpus), _pod_link(node, gpus, notes))
               for group in groups for node, gpus in group if len(gpus) > 1]
    between = [_shm_link(group[0][0]) for group in groups if len(group) > 1]
    fabric = nvlink_domain.fabric_link(nodes, assumptions.nvlink_channel, notes) \
        if multi_node else None
    if fabric is not None:
        between.append(_Link(fabric[0], fabric[1], "nvlink"))
    elif multi_node:
        transport = _transport(nodes, assumptions)
        between.extend(_nic_link(node, transport, assumptions) for node in nodes)
        between.extend(_uplink_links(nodes, transport, assumptions, notes))
    cal = assumptions.calibration
    if cal is not None and cal.links:
        in_pods = [(g, _calibrated(link, link.kind, cal)) for g, link in in_pods]
        between = [link if link.kind == "nvlink" else  # the NVLink fabric: not the network
                   _calibrated(link, "shm" if link.what.startswith("pod-to-pod") else "net", cal)
                   for link in between]
    if any(len(group) > 1 and any(len(g) == 1 for _, g in group) for group in groups):
        notes.append("pods of this job share a node: they cannot use NVLink/P2P with each other "
                     "(each container sees only its own GPUs), so NCCL goes through host memory")

    intra_kind = min((link.kind for _, link in in_pods), default="pcie",
                     key=lambda k: perfdata.NCCL_RING_STEP_LATENCY_S[k])
    net_steps = 2 * (len(nodes) - 1)
    shm_steps = 2 * (p - len(nodes))  # between pods of one node

    # Flat ring over every GPU: the slowest link anywhere on it sets the pace.
    ring_link = _slowest([link for _, link in in_pods] + between)
    ring = AllreduceCost(
        2 * (n - 1) / n / (ring_link.gbs * 1e9),
        _ring_latency(2 * (n - 1), ((2 * (n - 1) - net_steps - shm_steps, intra_kind),
                                    (shm_steps, "pcie"), (net_steps, "net")), multi_node),
        "ring", ring_link.what)
    candidates = [ring]

    # Hierarchical: differs from the ring only when some pod holds several GPUs.
    if p > 1 and in_pods:
        intra = max(2 * (g - 1) / g / (link.gbs * 1e9) for g, link in in_pods)
        inter_link = _slowest(between)
        inter = 2 * (p - 1) / p / (inter_link.gbs * 1e9)
        g_max = max(g for g, _ in in_pods)
        latency = (_ring_latency(2 * (g_max - 1), ((2 * (g_max - 1), intra_kind),), False)
                   + _ring_latency(2 * (p - 1), ((shm_steps, "pcie"), (net_steps, "net")),
                                   multi_node))
        hier = AllreduceCost(intra + inter, latency,
                     "hierarchical (reduce-scatter in pods, allreduce between pods, "
                     "allgather in pods)",
                     inter_link.what if inter >= intra else _slowest([lk for _, lk in in_pods]).what)
        candidates.append(hier)
    return candidates


def _calibration_note(assumptions: Assumptions, compute_used: bool) -> str:
    cal = assumptions.calibration
    assert cal is not None  # only said of calibrated predictions
    used = [what for what, applies in (("compute rate", compute_used),
                                       ("link bandwidths", bool(cal.links)),
                                       ("multi-rank overhead", bool(cal.multi_rank_overhead_s)))
            if applies]
    src = f" {assumptions.calibration_source}" if assumptions.calibration_source else ""
    return (f"calibration{src} used ({', '.join(used) if used else 'nothing in it applies'}; "
            f"{cal.runs} measured runs)")


def predict_cpu(*, model: str, batch_size: int, precision: str, ranks: int, hosts: int,
                image_size: int | None = None,
                assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> Prediction:
    """A CPU job (`ranks` ranks on `hosts` hosts): only from a calibration, since no
    published CPU figures exist. Ranks of one host share memory; Horovod's allreduce runs
    on the cores TensorFlow uses, so nothing overlaps (mpijob.perf.calibration)."""
    model_key = perfdata.normalize_model(model)
    prec = perfdata.normalize_precision(precision)
    if model_key is None or prec is None:
        raise SpecError("model" if model_key is None else "precision",
                        f"unknown {'model' if model_key is None else 'precision'}")
    cal = assumptions.calibration
    rate = cal.rate("cpu", model_key, prec, image_size) if cal is not None else None
    if rate is None:
        raise PredictionError(
            f"no CPU figures for {model_key} {prec}: CPU jobs are predicted only from a "
            "calibration (hvdk8s calibrate RESULTS_DIR, then --calibration FILE)")
    assert cal is not None  # a rate comes only from a calibration
    link = "host" if hosts <= 1 else "net"
    compute_s = rate.step_seconds(batch_size)
    step = calib.step_seconds(cal, device="cpu", model=model_key, precision=prec,
                              image_size=image_size, batch_size=batch_size, ranks=ranks,
                              link=link)
    comm_s = step - compute_s
    single = batch_size / compute_s
    gbs = cal.link_gbs(link) or calib.DEFAULT_LINK_GBS.get(link)
    notes = [_calibration_note(assumptions, True)]
    if ranks > 1 and cal.link_gbs(link) is None:
        notes.append(f"{link} bandwidth not calibrated: {gbs or 0:g} GB/s assumed"
                     if gbs else f"{link} bandwidth not calibrated: communication not priced")
    return Prediction(
        images_per_sec=ranks * batch_size / step, step_seconds=step, compute_seconds=compute_s,
        allreduce_seconds=comm_s, bottleneck="compute" if comm_s <= 0.1 * step else
        f"allreduce over {link}", scaling_efficiency=single * ranks and
        (ranks * batch_size / step) / (ranks * single), single_gpu_images_per_sec=single,
        gpus=0, algorithm="none (single rank)" if ranks == 1 else f"MPI allreduce over {link}",
        notes=tuple(notes), exposed_allreduce_seconds=comm_s,
        gradient_bytes=perfdata.MODELS[model_key].params * FP32_BYTES, gpu_model="cpu",
        compute_source=f"calibrated: {rate.images_per_sec:,.2f} images/s per rank + "
                       f"{rate.step_overhead_s * 1e3:.0f} ms per step ({rate.runs} runs)")


def expected_max_normal(n: int) -> float:
    """E[max of n standard normals], Blom's approximation (0 for n = 1)."""
    if n <= 1:
        return 0.0
    return statistics.NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _negotiate_s(n: int, multi_node: bool) -> float:
    """Horovod's per-cycle negotiation: 2 x ceil(log2 n) hops of a tree collective."""
    hop = perfdata.NCCL_RING_STEP_LATENCY_S["net" if multi_node else "pcie"]
    return 2 * math.ceil(math.log2(n)) * hop if n > 1 else 0.0


__all__ = [
    "AllreduceCost",
    "allreduce_candidates",
    "allreduce_cost",
    "expected_max_normal",
    "Assumptions",
    "DEFAULT_ASSUMPTIONS",
    "Prediction",
    "PredictionError",
    "predict",
    "predict_cpu",
    "predict_pods",
    "single_gpu_images_per_sec",
]
