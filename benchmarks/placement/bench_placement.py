"""Placement speed: in-process `place()` on synthetic clusters, and `hvdk8s plan` as a process.

    .venv/bin/python benchmarks/placement/bench_placement.py [--quick] [--out DIR]

Clusters: N nodes of 8 GPUs (a third each DGX-1 V100, DGX A100 and 8-GPU PCIe), every GPU
taken with probability 0.5 (seeded). Requests: 1, 8, 64 and 256 GPUs as that many 1-GPU
workers (the hardest shape for node choice: any node can contribute), plus 4-GPU
workers (at 50% occupancy few nodes have 8 free GPUs, so 8-GPU workers rarely fit).
Each cell's first call runs with empty best-set caches (the "cold" column, what a fresh
`hvdk8s plan` process pays); then it is timed `--repeat` more times (p50/p99). Writes
results.csv next to this file (or to --out) and prints the results as Markdown tables.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mpijob.scheduling import placement_sets  # noqa: E402
from mpijob.scheduling.cluster import Cluster, Node  # noqa: E402
from mpijob.scheduling.placement import PlacementRequest, place  # noqa: E402
from mpijob.scheduling.presets import PRESETS  # noqa: E402

MIX = (("dgx1-v100", "Tesla-V100-SXM2-16GB"), ("dgx-a100", "NVIDIA-A100-SXM4-80GB"),
       ("pcie-8gpu-dual-socket", "NVIDIA-A10"))


def synthetic(count: int, occupancy: float = 0.5, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        topo, model = MIX[i % len(MIX)]
        nodes.append({"name": f"node-{i:05d}", "gpus": 8, "topology": topo, "gpu_model": model,
                      "allocated": [g for g in range(8) if rng.random() < occupancy],
                      "network_gbps": 100})
    return nodes


def to_cluster(nodes: list[dict]) -> Cluster:
    return Cluster(tuple(
        Node(n["name"], 8, PRESETS[n["topology"]], allocated=frozenset(n["allocated"]),
             gpu_model=n["gpu_model"], network_gbps=n["network_gbps"])
        for n in nodes
    ))


def clear_caches() -> None:
    placement_sets._indexes.clear()
    placement_sets._by_identity.clear()


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def time_place(cluster, request, policy, repeat):
    clear_caches()
    t0 = time.perf_counter()
    result = place(cluster, request, policy)
    cold = time.perf_counter() - t0
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        place(cluster, request, policy)
        samples.append(time.perf_counter() - t0)
    return result, cold, samples


def in_process(sizes, repeat):
    rows = []
    shapes = [(1, 1), (8, 1), (64, 1), (256, 1), (2, 4), (16, 4), (64, 4)]
    for count in sizes:
        cluster = to_cluster(synthetic(count))
        for workers, g in shapes:
            for policy in ("topology", "binpack", "spread"):
                result, cold, samples = time_place(cluster, PlacementRequest(workers, g), policy, repeat)
                rows.append({
                    "kind": "in-process", "nodes": count, "gpus": workers * g, "workers": workers,
                    "gpus_per_worker": g, "policy": policy, "feasible": result.feasible,
                    "nodes_used": result.nodes_used, "cold_ms": round(cold * 1e3, 2),
                    "p50_ms": round(percentile(samples, 0.5) * 1e3, 2),
                    "p99_ms": round(percentile(samples, 0.99) * 1e3, 2), "runs": repeat,
                })
                print(f"{count:>6} nodes {workers * g:>4} GPUs ({workers}x{g}) {policy:<8} "
                      f"cold {rows[-1]['cold_ms']:>8.2f} ms  p50 {rows[-1]['p50_ms']:>8.2f} ms  "
                      f"p99 {rows[-1]['p99_ms']:>8.2f} ms  nodes used {result.nodes_used}", flush=True)
    return rows


def whole_process(count, repeat):
    rows = []
    hvdk8s = ROOT / ".venv" / "bin" / "hvdk8s"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cluster-{count}.json"
        path.write_text(json.dumps({"nodes": synthetic(count)}))
        for label, extra in (("plan -o json", ["-o", "json"]), ("plan table", []),
                             ("plan --compare -o json", ["--compare", "-o", "json"])):
            cmd = [str(hvdk8s), "plan", "--workers", "64", "--gpus", "1", "--cluster", str(path), *extra]
            samples = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True,
                                      env={**os.environ, "COLUMNS": "120"})
                samples.append(time.perf_counter() - t0)
                if proc.returncode != 0:
                    raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr}")
            rows.append({
                "kind": "process", "nodes": count, "gpus": 64, "workers": 64, "gpus_per_worker": 1,
                "policy": label, "feasible": True, "nodes_used": "", "cold_ms": "",
                "p50_ms": round(percentile(samples, 0.5) * 1e3, 1),
                "p99_ms": round(max(samples) * 1e3, 1), "runs": repeat,
            })
            print(f"hvdk8s {label:<24} on {count} nodes: p50 {rows[-1]['p50_ms']} ms, "
                  f"max {rows[-1]['p99_ms']} ms over {repeat} runs", flush=True)
    return rows


def markdown(rows) -> str:
    lines = ["| nodes | GPUs (workers x GPUs) | policy | cold ms | p50 ms | p99 ms | nodes used |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["kind"] == "in-process":
            used = r["nodes_used"] if r["feasible"] else "does not fit"
            lines.append(f"| {r['nodes']} | {r['gpus']} ({r['workers']} x {r['gpus_per_worker']}) | "
                         f"{r['policy']} | {r['cold_ms']} | {r['p50_ms']} | {r['p99_ms']} | {used} |")
    lines += ["", "| command (2,000-node JSON file, 64 x 1 GPU) | p50 ms | max ms | runs |",
              "| --- | ---: | ---: | ---: |"]
    for r in rows:
        if r["kind"] == "process":
            lines.append(f"| hvdk8s {r['policy']} | {r['p50_ms']} | {r['p99_ms']} | {r['runs']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller clusters and fewer runs")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--out", default=str(Path(__file__).parent))
    args = parser.parse_args()
    sizes = (100, 2000) if args.quick else (100, 1000, 2000, 10000)
    repeat = args.repeat or (10 if args.quick else 50)
    rows = in_process(sizes, repeat)
    rows += whole_process(2000, 5 if args.quick else 10)
    print()
    print(markdown(rows))
    out = Path(args.out) / "results.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
