"""Where topology-aware placement pays and where it does not: one job, three policies.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/simulator/scenarios.py [--out DIR]

Each scenario is a small cluster in a given state (some GPUs taken) and one job; the
job is placed by each policy (mpijob.scheduling.placement) and its throughput predicted
(mpijob.perf.perfmodel). Writes scenarios.csv and scenarios.png (topology / binpack and
topology / spread speed-ups) next to this file and prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpijob.perf.perfmodel import predict
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.placement import PlacementRequest, place
from mpijob.scheduling.presets import preset

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the checkout
from benchmarks.tables import markdown, write_csv  # noqa: E402

HERE = Path(__file__).resolve().parent
V100 = "Tesla-V100-SXM2-16GB"
RDMA = {"feature.node.kubernetes.io/rdma.available": "true"}


def nodes(count, topology, gbps, *, gpu=V100, taken=(), labels=None, prefix=None):
    topo = preset(topology)
    out = []
    for i in range(count):
        alloc = frozenset(taken[i] if i < len(taken) else ())
        out.append(Node(name=f"{prefix or topology}-{i}", gpus=topo.gpus, topology=topo,
                        gpu_model=gpu, network_gbps=gbps, allocated=alloc,
                        labels=dict(labels or {})))
    return out


def scenarios():
    """(name, nodes, workers, GPUs per worker): states where the policies may choose apart."""
    yield "DGX-1 idle x2, 4 GPUs", nodes(2, "dgx1-v100", 10), 4, 1
    yield "DGX-1, GPUs 1,2 taken, 4 GPUs", nodes(1, "dgx1-v100", 10, taken=[(1, 2)]), 4, 1
    yield "DGX-1, GPUs 0,5 taken, 4 GPUs", nodes(1, "dgx1-v100", 10, taken=[(0, 5)]), 4, 1
    yield "PCIe dual-socket, GPUs 0,1 taken, 4 GPUs", nodes(
        1, "pcie-8gpu-dual-socket", 10, taken=[(0, 1)]), 4, 1
    yield "PCIe dual-socket, GPUs 0,1 taken, 2 GPUs", nodes(
        1, "pcie-8gpu-dual-socket", 10, taken=[(0, 1)]), 2, 1
    half = [(0, 1, 2, 3), (0, 1, 2, 3), ()]
    yield "fragmented: 4+4+8 free DGX-1, 10 GbE, 8 GPUs", nodes(3, "dgx1-v100", 10, taken=half), 8, 1
    yield "fragmented: 4+4+8 free DGX-1, 100 Gb RDMA, 8 GPUs", nodes(
        3, "dgx1-v100", 100, taken=half, labels=RDMA), 8, 1
    split = [(0, 1, 4, 5), (0, 1, 2, 3), (4, 5, 6, 7)]  # 4 free each; only 2 nodes hold quads
    yield "fragmented: 3 DGX-1 with 4 free each, 10 GbE, 8 GPUs", nodes(
        3, "dgx1-v100", 10, taken=split), 8, 1
    yield "fragmented: 3 DGX-1 with 4 free each, 10 GbE, 2 x 4 GPUs", nodes(
        3, "dgx1-v100", 10, taken=split), 2, 4
    yield "fragmented: 4+4+8 free PCIe, 10 GbE, 8 GPUs", nodes(
        3, "pcie-8gpu-dual-socket", 10, taken=half), 8, 1


def rows(models=("vgg16", "resnet50"), precisions=("fp32", "fp16")):
    out = []
    for name, members, workers, per in scenarios():
        cluster = Cluster(tuple(members))
        req = PlacementRequest(workers=workers, gpus_per_worker=per)
        placements = {p: place(cluster, req, p) for p in ("topology", "binpack", "spread")}
        for model in models:
            for precision in precisions:
                ips = {}
                for policy, pl in placements.items():
                    ips[policy] = (predict(model=model, batch_size=64, precision=precision,
                                           placement=pl, cluster=cluster).images_per_sec
                                   if pl.feasible else float("nan"))
                out.append(dict(scenario=name, model=model, precision=precision,
                                topology=round(ips["topology"]), binpack=round(ips["binpack"]),
                                spread=round(ips["spread"]),
                                topology_over_binpack=round(ips["topology"] / ips["binpack"], 2),
                                topology_over_spread=round(ips["topology"] / ips["spread"], 2),
                                topology_nodes=placements["topology"].nodes_used,
                                binpack_nodes=placements["binpack"].nodes_used))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    out = rows()
    write_csv(args.out / "scenarios.csv", out)
    print(markdown(out))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    labels = [f"{r['scenario']}\n{r['model']} {r['precision']}" for r in out]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(out) + 1))
    y = range(len(out))
    ax.barh([i + 0.2 for i in y], [r["topology_over_binpack"] for r in out], 0.4, label="topology / binpack")
    ax.barh([i - 0.2 for i in y], [r["topology_over_spread"] for r in out], 0.4, label="topology / spread")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("predicted images/sec, ratio")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "scenarios.png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
