"""The preflight's figures: what it costs per job size by the model's arithmetic
(mpijob.perf.preflight.estimated_seconds), and on this machine, measured, how long a CPU
preflight takes and how much its busbw spreads from run to run (the noise the threshold
must tolerate).

    python benchmarks/preflight/measure.py [--runs 8] [--out FILE]

In the pod rehearsal (root, network namespaces), from the checkout's root, which adds its
"rehearsal" entry to the same file (the rehearsal lives with the tests):

    python -m tests.rehearsal.measure_preflight [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.formats.preflight_reports import preflight_status  # noqa: E402
from mpijob.perf import preflight  # noqa: E402
from mpijob.perf.perfmodel import Assumptions  # noqa: E402
from mpijob.scheduling.cluster import Node  # noqa: E402
from mpijob.scheduling.presets import preset  # noqa: E402

PROGRAM = ROOT / "mpijob" / "k8s" / "podscripts" / "hvdk8s_preflight.py"


def model_costs() -> list[dict]:
    """Seconds by the model for H100 nodes of 8 GPUs, over 100 Gb/s TCP and 400 Gb/s RDMA."""
    rows = []
    for gpus in (8, 16, 64, 256, 512):
        nodes = gpus // 8
        for transport, gbps in (("tcp", 100.0), ("rdma", 400.0)):
            if nodes == 1 and transport == "rdma":
                continue
            pods = [(Node(name=f"n{i}", gpus=8, topology=preset("dgx-h100"),
                          gpu_model="NVIDIA-H100-80GB-HBM3", network_gbps=gbps), tuple(range(8)))
                    for i in range(nodes)]
            plan = preflight.gpu_plan(pods, [8] * nodes, assumptions=Assumptions(transport=transport))
            rows.append({"gpus": gpus, "nodes": nodes, "network": f"{gbps:g} Gb/s {transport}",
                         "seconds": round(preflight.estimated_seconds(plan), 1),
                         "expected_node_gbs": plan["pods"][0]["node_path"]["gbs"],
                         "expected_across_gbs": (plan.get("nodes") or {}).get("gbs")})
    return rows


def measure(ranks: int, runs: int) -> dict:
    plan = preflight.plain_plan([ranks], nodes=["this machine"])
    walls, figures, inside = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "-mca", "mpi_yield_when_idle", "1",
             "-np", str(ranks), sys.executable, str(PROGRAM), "--plan-json", json.dumps(plan)],
            capture_output=True, text=True, timeout=300, check=True).stdout
        walls.append(time.perf_counter() - start)
        status = preflight_status(out.splitlines())
        figures.append(status["paths"][0]["busbw_gbs"])
        inside.append(status["seconds"])
    mean = statistics.mean(figures)
    return {"ranks": ranks, "runs": runs, "wall_seconds_median": round(statistics.median(walls), 2),
            "wall_seconds_max": round(max(walls), 2),
            "program_seconds_median": round(statistics.median(inside), 2),
            "busbw_gbs_mean": round(mean, 4),
            "busbw_min_over_mean": round(min(figures) / mean, 2),
            "busbw_max_over_mean": round(max(figures) / mean, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--out", default=str(Path(__file__).with_name("measured.json")))
    args = parser.parse_args()
    result = {"machine": f"{platform.node()} ({platform.machine()}, "
                         f"{len(__import__('os').sched_getaffinity(0))} cores)",
              "model": model_costs(), "cpu": []}
    if shutil.which("mpirun"):
        result["cpu"] = [measure(ranks, args.runs) for ranks in (2, 4)]
    previous = Path(args.out)
    if previous.exists():  # the rehearsal's figure, made by tests/rehearsal/measure_preflight.py
        result.update({k: v for k, v in json.loads(previous.read_text()).items()
                       if k == "rehearsal"})
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
