"""The simulator's inputs: a synthetic GPU cluster and a job stream shaped like real traces.

Job stream (seedable, `generate_jobs`):
- Sizes 1 to 64 GPUs, mostly small: P(1, 2, 4, 8, 16, 32, 64 GPUs) =
  (0.55, 0.12, 0.15, 0.10, 0.04, 0.025, 0.015). The shape follows the Microsoft Philly
  trace (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
  Workloads", USENIX ATC'19, whose runtime figures bucket jobs as 1, 2-4, 5-8 and >8 GPUs,
  single-GPU jobs being the majority) and Alibaba PAI (Weng et al., "MLaaS in the Wild",
  NSDI'22: most tasks ask for one GPU or less, a few ask for many). Powers of two because
  that is what users ask Horovod for.
- Durations heavy-tailed: the run time a job would have at perfect scaling is log-normal
  with a 20-minute median and sigma 1.6 (mean ~1.2 h, 5% longer than ~4.6 h), clipped to
  [2 min, 5 days]: minutes for most jobs, days for a few, the long tail both traces
  report. Sizes and durations are drawn independently.
- Arrivals are Poisson at the rate that makes the offered load (GPU-seconds at perfect
  scaling per second) `load` times the cluster's GPUs.
- A job's work is images: its ideal run time x its GPUs x the single-GPU images/s of its
  model on its pool's GPU, so on a perfectly scaling placement it runs for its drawn time,
  and slower placements stretch it.
- 75% of jobs run one GPU per worker (Horovod's usual one process per GPU); the rest put
  min(GPUs, 8) GPUs in each worker. Models are drawn evenly from the six the throughput
  model knows; batch 64 per GPU (32 for ResNet-101/152 and Inception V3, the
  tf_cnn_benchmarks defaults the built-in benchmark uses).
- Each job asks for one GPU type (a node selector on nvidia.com/gpu.product), picked in
  proportion to the GPUs of that type.

CSV traces (`parse_jobs_csv`): columns submit_s,gpus,gpus_per_worker,model,batch_size,
work_images (extra columns are ignored, except an optional gpu_product that becomes the
job's node selector).

Default cluster (`default_cluster`): 500 nodes of 8 GPUs from mpijob.scheduling.presets in fixed shares:
40% DGX-1 V100 on 25 GbE (TCP), 20% PCIe P100 servers on 10 GbE, 30% DGX A100 on 100 Gb
RoCE, 10% DGX H100 on 400 Gb InfiniBand.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from mpijob.perf import perfdata
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.presets import preset
from mpijob.wellknown import GPU_COUNT_LABEL, GPU_PRODUCT_LABEL

RDMA_LABEL = "feature.node.kubernetes.io/rdma.available"

SIZE_WEIGHTS = ((1, 0.55), (2, 0.12), (4, 0.15), (8, 0.10), (16, 0.04), (32, 0.025), (64, 0.015))
DURATION_MEDIAN_S = 20 * 60
DURATION_SIGMA = 1.6
DURATION_RANGE_S = (120.0, 5 * 24 * 3600.0)
ONE_GPU_PER_WORKER_SHARE = 0.75
MODEL_BATCH = {"vgg16": 64, "vgg19": 64, "resnet50": 64, "resnet101": 32, "resnet152": 32,
               "inception3": 32}
CSV_COLUMNS = ("submit_s", "gpus", "gpus_per_worker", "model", "batch_size", "work_images")


@dataclass(frozen=True)
class NodeKind:
    preset: str
    product: str
    network_gbps: float
    pcie_gen: int
    rdma: bool
    share: float


DEFAULT_KINDS = (
    NodeKind("dgx1-v100", "Tesla-V100-SXM2-32GB", 25.0, 3, False, 0.40),
    NodeKind("pcie-8gpu-dual-socket", "Tesla-P100-PCIE-16GB", 10.0, 3, False, 0.20),
    NodeKind("dgx-a100", "NVIDIA-A100-SXM4-80GB", 100.0, 4, True, 0.30),
    NodeKind("dgx-h100", "NVIDIA-H100-80GB-HBM3", 400.0, 5, True, 0.10),
)


@dataclass(frozen=True)
class SimJob:
    id: int
    submit_s: float
    gpus: int
    gpus_per_worker: int
    model: str
    batch_size: int
    work_images: float
    # (label, value) pairs the job's nodes must carry.
    node_selector: tuple[tuple[str, str], ...] = field(default=())

    @property
    def workers(self) -> int:
        return self.gpus // self.gpus_per_worker


def default_cluster(nodes: int = 500, kinds: Sequence[NodeKind] = DEFAULT_KINDS) -> Cluster:
    """`nodes` nodes split over `kinds` by share (largest remainders), named by kind."""
    if nodes < 1:
        raise ValueError(f"a cluster has at least one node, got {nodes}")
    total = sum(k.share for k in kinds)
    exact = [nodes * k.share / total for k in kinds]
    counts = [math.floor(x) for x in exact]
    for i in sorted(range(len(kinds)), key=lambda i: exact[i] - counts[i], reverse=True):
        if sum(counts) == nodes:
            break
        counts[i] += 1
    out: list[Node] = []
    for kind, count in zip(kinds, counts, strict=True):
        topo = preset(kind.preset)
        labels = {GPU_PRODUCT_LABEL: kind.product, GPU_COUNT_LABEL: str(topo.gpus)}
        if kind.rdma:
            labels[RDMA_LABEL] = "true"
        for i in range(count):
            out.append(Node(name=f"{kind.preset}-{i:03d}", gpus=topo.gpus, topology=topo,
                            gpu_model=kind.product, network_gbps=kind.network_gbps,
                            labels=dict(labels), pcie_gen=kind.pcie_gen))
    return Cluster(tuple(out))


def gpu_pools(cluster: Cluster) -> dict[str, int]:
    """GPUs per nvidia.com/gpu.product value (nodes without the label are left out)."""
    pools: dict[str, int] = {}
    for n in cluster.nodes:
        product = n.labels.get(GPU_PRODUCT_LABEL)
        if product:
            pools[product] = pools.get(product, 0) + n.gpus
    return pools


def _reference_ips(product: str | None, model: str, batch: int, precision: str) -> float:
    gpu = perfdata.normalize_gpu(product) or perfdata.DEFAULT_GPU
    gpu = perfdata.GPU_SAME_AS.get(gpu, gpu)
    fig = perfdata.figure(gpu, model, precision) or perfdata.flops_estimate(gpu, model, precision)
    return fig.at_batch(batch)


def generate_jobs(count: int, *, seed: int, cluster: Cluster, load: float = 0.7,
                  precision: str = "fp32") -> list[SimJob]:
    """`count` jobs for `cluster`, sorted by submit time; the same seed gives the same jobs.

    Jobs select a GPU type by the nvidia.com/gpu.product label; on a cluster whose nodes
    lack it, jobs select nothing and their work is sized for the most common GPU model."""
    if count < 0:
        raise ValueError(f"job count must be >= 0, got {count}")
    if load <= 0:
        raise ValueError(f"load must be > 0, got {load}")
    rng = random.Random(seed)
    sizes, size_w = zip(*SIZE_WEIGHTS, strict=True)
    pools = gpu_pools(cluster)
    products = sorted(pools)
    fallback = _most_common_model(cluster)
    models = sorted(MODEL_BATCH)
    capacity = sum(n.gpus for n in cluster.nodes if n.ready) or 1
    largest = _largest_power_of_two(capacity)
    drafts = []
    for _ in range(count):
        product = rng.choices(products, weights=[pools[p] for p in products])[0] if products else None
        gpus = min(rng.choices(sizes, weights=size_w)[0],
                   _largest_power_of_two(pools[product]) if product else largest)
        gpw = 1 if gpus == 1 or rng.random() < ONE_GPU_PER_WORKER_SHARE else min(gpus, 8)
        model = rng.choice(models)
        batch = MODEL_BATCH[model]
        ideal_s = rng.lognormvariate(math.log(DURATION_MEDIAN_S), DURATION_SIGMA)
        ideal_s = min(max(ideal_s, DURATION_RANGE_S[0]), DURATION_RANGE_S[1])
        work = ideal_s * gpus * _reference_ips(product or fallback, model, batch, precision)
        drafts.append((gpus, gpw, model, batch, work, product, ideal_s))
    offered = sum(d[0] * d[6] for d in drafts)  # GPU-seconds at perfect scaling
    rate = load * capacity * count / offered if offered else 1.0  # jobs per second
    jobs: list[SimJob] = []
    t = 0.0
    for i, (gpus, gpw, model, batch, work, product, _) in enumerate(drafts):
        t += rng.expovariate(rate)
        selector = ((GPU_PRODUCT_LABEL, product),) if product else ()
        jobs.append(SimJob(i, t, gpus, gpw, model, batch, work, selector))
    return jobs


def _most_common_model(cluster: Cluster) -> str | None:
    counts: dict[str, int] = {}
    for n in cluster.nodes:
        counts[n.gpu_model] = counts.get(n.gpu_model, 0) + n.gpus
    return max(sorted(counts), key=lambda m: counts[m]) if counts else None


def _largest_power_of_two(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


class TraceError(ValueError):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


def parse_jobs_csv(text: str) -> list[SimJob]:
    """Jobs from CSV text with the CSV_COLUMNS header; TraceError names the line."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise TraceError(f"missing column(s) {', '.join(missing)}; expected a header with "
                         f"{','.join(CSV_COLUMNS)}", 1)
    jobs: list[SimJob] = []
    for row in reader:
        line = reader.line_num
        try:
            submit = float(row["submit_s"])
            gpus = int(row["gpus"])
            gpw = int(row["gpus_per_worker"])
            batch = int(row["batch_size"])
            work = float(row["work_images"])
        except (TypeError, ValueError):
            raise TraceError("submit_s and work_images must be numbers; gpus, gpus_per_worker "
                             "and batch_size integers", line) from None
        model = perfdata.normalize_model(row["model"] or "")
        if model is None:
            raise TraceError(f"unknown model {row['model']!r}; expected one of "
                             f"{', '.join(perfdata.MODELS)}", line)
        if gpus < 1 or gpw < 1 or gpus % gpw:
            raise TraceError(f"gpus ({gpus}) must be a positive multiple of gpus_per_worker "
                             f"({gpw})", line)
        if batch < 1 or work <= 0 or submit < 0 or not math.isfinite(submit + work):
            raise TraceError("batch_size and work_images must be > 0 and submit_s >= 0", line)
        product = (row.get("gpu_product") or "").strip()
        selector = ((GPU_PRODUCT_LABEL, product),) if product else ()
        jobs.append(SimJob(len(jobs), submit, gpus, gpw, model, batch, work, selector))
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    return jobs
