"""Re-measure the whole-command figures the README and the CLI print, recording the machine
and its load beside each (a figure without its load says little on a shared machine).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/figures/measure.py            # all
    PYTHONPATH=$PWD .venv/bin/python benchmarks/figures/measure.py simulate   # one

Each figure's JSON goes to benchmarks/figures/measured/<name>.json: the command, the wall
seconds of each repetition, and the machine (CPUs, model, load average before and after).
benchmarks/figures/figures.yaml says which README text each figure is.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "measured"
HVDK8S = [sys.executable, "-m", "launcher.cli.app"]


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": platform.python_version()}


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout + done.stderr


def _env(home: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HVDK8S_HOME": home}
    for k in ("KUBECONFIG", "HVDK8S_CONFIG"):
        env.pop(k, None)
    return env


def simulate(home: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [*HVDK8S, "simulate", "--jobs", "10000", "--nodes", "500", "--out", out]
        secs, _ = timed(cmd, _env(home), ROOT)
    return {"command": "hvdk8s simulate --jobs 10000 --nodes 500 --out DIR", "seconds": [secs]}


def quick_benchmark(home: str) -> dict:
    cmd = [*HVDK8S, "submit", "mpi", "--backend", "local", "--name", "try", "--workers", "2",
           "--gpus", "0", "--wait", "--rm"]
    runs = []
    for _ in range(2):
        secs, text = timed(cmd, _env(home), ROOT)
        runs.append(secs)
    return {"command": "hvdk8s submit mpi --backend local --name try --workers 2 --gpus 0 "
                       "--wait --rm", "seconds": runs,
            "last_line": [line for line in text.splitlines() if "images/sec" in line][-1:]}


def list_500(home: str) -> dict:
    cmd = [sys.executable, "benchmarks/cli/bench_list.py", "--jobs", "500", "--repeat", "3"]
    secs, text = timed(cmd, _env(home), ROOT)
    row = text.strip().splitlines()[-1].split()  # jobs pods backend.list() `hvdk8s list` ...
    return {"command": "benchmarks/cli/bench_list.py --jobs 500 --repeat 3",
            "output": text.strip().splitlines()[-12:], "seconds": [secs],
            "list_seconds": float(row[3])}  # the whole `hvdk8s list` process, median


FIGURES = {"simulate": simulate, "quick-benchmark": quick_benchmark, "list-500": list_500}


def main(names: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    for name in names or list(FIGURES):
        with tempfile.TemporaryDirectory() as home:
            before = os.getloadavg()
            result = FIGURES[name](home)
            after = os.getloadavg()
        result.update({"figure": name, "machine": machine(),
                       "load_1min_before": round(before[0], 2),
                       "load_1min_after": round(after[0], 2),
                       "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        if result.get("seconds"):
            result["median_seconds"] = round(statistics.median(result["seconds"]), 2)
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(name, result.get("median_seconds"), "load", result["load_1min_before"],
              result["load_1min_after"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
