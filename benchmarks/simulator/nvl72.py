"""Where NVLink-partition-aware placement pays: a GB200 NVL72 cluster in the simulator.

    .venv/bin/python benchmarks/simulator/nvl72.py [--jobs 2000] [--seeds 0 1 2] [--out DIR]

The cluster: PARTITIONS NVL72 racks, each one NVLink partition of 18 compute trays x 4
GB200 GPUs (one node per tray), 400 Gb RDMA between trays, ComputeDomains served. The
jobs: mpijob.perf.simworkload's stream (Philly/PAI-shaped sizes 1 to 64 GPUs, heavy-tailed
durations, offered load 0.7) with at most 4 GPUs per worker (a tray's GPUs). Each policy runs twice: as the product places
(partition-aware) and with the partitions hidden from placement (`simulate(...,
ignore_partitions=True)`). A multi-tray job inside one partition gets its ComputeDomain and
NVLink between trays; one split across partitions prices those links as the network.
Three settings: fp16 on one 400 Gb NIC per tray, fp16 on four, fp32 on one.
Writes nvl72.csv and nvl72.png next to this file and prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from mpijob.perf.simulate import simulate
from mpijob.perf.simworkload import RDMA_LABEL, generate_jobs
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.network import NetworkPosition
from mpijob.scheduling.presets import preset
from mpijob.wellknown import GPU_PRODUCT_LABEL

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the checkout
from benchmarks.tables import markdown, write_csv  # noqa: E402

HERE = Path(__file__).resolve().parent
PRODUCT = "NVIDIA-GB200"
TRAYS = 18
CLIQUE_UUID = "5b0e6f1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b"
# (mix label, precision, network Gb/s per tray): where the network is the bottleneck of a
# split job (fp16 on one 400 Gb NIC per tray), and where it is not (four NICs per tray; fp32).
SETTINGS = (("fp16, 400 Gb/tray", "fp16", 400.0), ("fp16, 1600 Gb/tray", "fp16", 1600.0),
            ("fp32, 400 Gb/tray", "fp32", 400.0))
RUNS = (("topology", False), ("topology", True), ("binpack", False), ("binpack", True),
        ("spread", False))
COLUMNS = ("mix", "seed", "policy", "partitions", "mean_jct_s", "p95_jct_s",
           "mean_images_per_sec_per_gpu", "makespan_s", "gpu_utilization",
           "multi_node_share", "split_share", "nvlink_share", "jobs_completed")


def nvl72_cluster(partitions: int = 4, trays: int = TRAYS, racks: bool = False,
                  network_gbps: float = 400.0) -> Cluster:
    """`partitions` NVL72 racks of `trays` 4-GPU trays, one NVLink partition each; with
    `racks`, the nodes also carry their rack (one per partition), else the network position
    is unknown, as on a cluster whose only topology labels are GPU Feature Discovery's."""
    topo = preset("gb200-nvl72-tray")
    nodes = []
    for p in range(partitions):
        for t in range(trays):
            nodes.append(Node(name=f"nvl72-{p}-tray{t:02d}", gpus=topo.gpus, topology=topo,
                              gpu_model=PRODUCT, network_gbps=network_gbps, pcie_gen=5,
                              labels={GPU_PRODUCT_LABEL: PRODUCT, RDMA_LABEL: "true"},
                              **({"network": NetworkPosition(rack=f"rack-{p}", block="b1")}
                                 if racks else {}),
                              nvlink_domain=f"{CLIQUE_UUID}.{p}"))
    return Cluster(tuple(nodes), compute_domains=True)


def nvl72_jobs(count: int, seed: int, cluster: Cluster, precision: str = "fp16"):
    """simworkload's stream with workers of at most one tray (4 GPUs)."""
    return [replace(j, gpus_per_worker=min(j.gpus_per_worker, 4))
            for j in generate_jobs(count, seed=seed, cluster=cluster, precision=precision)]


def run(cluster: Cluster, jobs, policy: str, blind: bool, precision: str = "fp16") -> dict:
    result = simulate(cluster, jobs, policy, precision=precision, ignore_partitions=blind)
    s = result.summary
    multi = [o for o in result.outcomes if o.dropped is None and o.nodes_used > 1]
    nvlink = sum(1 for o in multi if o.nvlink_across_nodes)
    done = s.jobs_completed or 1
    return dict(policy=policy, partitions="ignored" if blind else "aware",
                mean_jct_s=round(s.mean_jct_s), p95_jct_s=round(s.p95_jct_s),
                mean_images_per_sec_per_gpu=round(s.mean_images_per_sec_per_gpu, 1),
                makespan_s=round(s.makespan_s), gpu_utilization=round(s.gpu_utilization, 3),
                multi_node_share=round(s.multi_node_share, 3),
                split_share=round((len(multi) - nvlink) / done, 3),
                nvlink_share=round(nvlink / done, 3), jobs_completed=s.jobs_completed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    out = []
    for mix, precision, gbps in SETTINGS:
        cluster = nvl72_cluster(network_gbps=gbps)
        for seed in args.seeds:
            jobs = nvl72_jobs(args.jobs, seed, cluster, precision)
            for policy, blind in RUNS:
                out.append(dict(mix=mix, seed=seed, **run(cluster, jobs, policy, blind, precision)))
    write_csv(args.out / "nvl72.csv", out, COLUMNS)
    # Means over seeds, one row per setting and run.
    table = []
    for mix, _, _ in SETTINGS:
        for policy, blind in RUNS:
            rows = [r for r in out if r["mix"] == mix and r["policy"] == policy
                    and r["partitions"] == ("ignored" if blind else "aware")]
            mean = {c: round(sum(r[c] for r in rows) / len(rows), 3) for c in COLUMNS[4:]}
            table.append(dict(mix=mix, policy=policy, partitions=rows[0]["partitions"], **mean))
    print(markdown(table))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    labels = [f"{p}\n{'blind' if b else 'aware'}" for p, b in RUNS]
    for ax, (metric, title) in zip(axes, (("mean_images_per_sec_per_gpu", "mean images/s per GPU"),
                                          ("mean_jct_s", "mean JCT (s)"),
                                          ("split_share", "jobs split across partitions")),
                                   strict=True):
        width = 0.8 / len(SETTINGS)
        for k, (mix, _, _) in enumerate(SETTINGS):
            vals = [r[metric] for r in table if r["mix"] == mix]
            ax.bar([i + (k - (len(SETTINGS) - 1) / 2) * width for i in range(len(RUNS))], vals,
                   width, label=mix)
        ax.set_xticks(range(len(RUNS)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"4 x GB200 NVL72 partitions (288 GPUs), {args.jobs} jobs, "
                 f"mean of {len(args.seeds)} seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out / "nvl72.png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
