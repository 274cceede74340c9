"""The preflight's cost in the pod rehearsal (real sshd, mpirun and pod network namespaces;
root only), written as the "rehearsal" entry of benchmarks/preflight/measured.json:

    python -m tests.rehearsal.measure_preflight [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from launcher.formats.preflight_reports import preflight_status
from tests.rehearsal.cluster import Cluster, PodsJob

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "preflight" / "measured.json"


def measure_rehearsal(workers: int, runs: int) -> dict:
    """The preflight in the pod rehearsal (tests/rehearsal: real sshd, mpirun and pod network
    namespaces, root only): `workers` pods of one CPU rank, the job's own program `true`;
    the program's own seconds, and the launcher's from start to the program's start."""
    from launcher.backends.kubernetes.rendering import render
    from launcher.preparing.sshkeys import generate_ssh_keys
    from mpijob.jobspec.spec import build_spec

    inside, walls = [], []
    for _ in range(runs):
        spec = build_spec(name="demo", workers=workers, gpus_per_worker=0, image="rehearsal",
                          command=("true",), preflight="warn")
        cluster = Cluster()
        try:
            cluster.start()
            start = time.perf_counter()
            out = PodsJob(cluster, render(spec, mode="pods", ssh=generate_ssh_keys())).finish(300)
            walls.append(time.perf_counter() - start)
        finally:
            cluster.close()
        status = preflight_status(out.launcher_log.splitlines())
        inside.append(status["seconds"])
    return {"workers": workers, "ranks": workers, "runs": runs,
            "program_seconds_median": round(statistics.median(inside), 2),
            "program_seconds_max": round(max(inside), 2),
            "job_wall_seconds_median": round(statistics.median(walls), 2)}



def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    result = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    result["rehearsal"] = [measure_rehearsal(4, args.runs)]
    MEASURED.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["rehearsal"], indent=1))


if __name__ == "__main__":
    main()
