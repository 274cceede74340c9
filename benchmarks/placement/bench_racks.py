"""Network-aware placement: the cost of choosing racks, and the racks it saves.

    .venv/bin/python benchmarks/placement/bench_racks.py [--repeat N]

The cluster of bench_placement.py (N 8-GPU nodes, GPUs taken with probability 0.5, seeded)
cut into racks of 16 nodes, 8 racks a block. Each request is placed twice: with the
network positions (mpijob.scheduling.placement_network: fewest nodes, then fewest racks, then one
block) and with the positions erased (the placement hvdk8s made before); the table gives
the p50 time of each and the racks/blocks the chosen nodes span. Writes results-racks.csv.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from bench_placement import percentile, synthetic, time_place, to_cluster  # noqa: E402

from mpijob.scheduling.cluster import Cluster  # noqa: E402
from mpijob.scheduling.network import NetworkPosition, span  # noqa: E402
from mpijob.scheduling.placement import PlacementRequest  # noqa: E402

RACK_NODES, RACKS_PER_BLOCK = 16, 8


def racked(cluster: Cluster) -> Cluster:
    return Cluster(tuple(
        replace(n, network=NetworkPosition(block=f"b{i // (RACK_NODES * RACKS_PER_BLOCK)}",
                                           rack=f"r{i // RACK_NODES}"))
        for i, n in enumerate(cluster.nodes)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=2000)
    args = parser.parse_args()
    with_net = racked(to_cluster(synthetic(args.nodes)))
    positions = {n.name: n.network for n in with_net.nodes}
    rows = []
    for workers, g in ((16, 1), (64, 1), (256, 1), (16, 4), (64, 4)):
        row = {"nodes": args.nodes, "gpus": workers * g, "workers": workers, "gpus_per_worker": g}
        for label, cluster in (("racks", with_net), ("no_racks", to_cluster(synthetic(args.nodes)))):
            result, cold, samples = time_place(cluster, PlacementRequest(workers, g), "topology",
                                               args.repeat)
            where = span([(a.node, positions[a.node]) for a in result.assignments])
            row.update({f"{label}_p50_ms": round(percentile(samples, 0.5) * 1e3, 2),
                        f"{label}_nodes": result.nodes_used, f"{label}_racks": where["racks"],
                        f"{label}_blocks": where["blocks"]})
        rows.append(row)
        print(row, flush=True)
    out = Path(__file__).parent / "results-racks.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("\n| GPUs (workers x GPUs) | p50 with racks | p50 without | nodes | racks with / without | blocks with / without |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['gpus']} ({r['workers']} x {r['gpus_per_worker']}) | {r['racks_p50_ms']} ms | "
              f"{r['no_racks_p50_ms']} ms | {r['racks_nodes']} | {r['racks_racks']} / {r['no_racks_racks']} | "
              f"{r['racks_blocks']} / {r['no_racks_blocks']} |")


if __name__ == "__main__":
    main()
