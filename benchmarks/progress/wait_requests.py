"""The API requests of `wait` on a running job that reports, on the test API server.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/progress/wait_requests.py [--seconds 95]
        [--no-monitor]

A job whose launcher prints a progress report every 5 s and heartbeats every 2 s (stamped
as it prints them) runs while `wait` waits for it for --seconds of real time (the stall
check runs on the real clock); the requests are counted by kind, and the launcher-log
reads per minute reported. The launcher's readiness probe answers as its monitor does
(mpijob.k8s.monitor): passing while the job progresses; --no-monitor: as in an image
without python3, where it fails once the launch line starts and `wait` reads the log. The watches here run their production length (300-600 s), so
none is resumed in a short window: see test_api_load.py for the watches' own rate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.errors import Timeout
from launcher.formats.rank_reports import REPORT_PREFIX


def scripted_reports(start: float, seconds: float) -> list[tuple[float, str]]:
    """(delay from the previous line, line): progress every 5 s, heartbeats every 2 s."""
    out, t, last = [], 0.0, 0.0
    while t <= seconds + 10:
        t += 1.0
        step = int(t * 10)
        lines = []
        if t % 5 == 0:
            lines.append({"kind": "progress", "step": step, "total_steps": 100000,
                          "images_per_step": 64, "images_per_sec": 640.0,
                          "images_per_sec_avg": 640.0, "warmup": False})
        if t % 2 == 0:
            lines.append({"kind": "heartbeat", "step": step, "every": 2.0})
        for fields in lines:
            record = {**fields, "rank": 0, "time": start + t, "host": "req-worker-0"}
            out.append((t - last, "[1,0]<stdout>:" + REPORT_PREFIX + json.dumps(record)))
            last = t
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=95.0)
    parser.add_argument("--no-monitor", action="store_true")
    args = parser.parse_args()

    def probe(logs_for: float | None) -> tuple[bool, str]:
        if args.no_monitor and logs_for is not None:  # launcher.sh found no python3
            return False, "hvdk8s: no python3 (3.8 or later) in the image"
        return True, ""

    with KubeAPIServer() as srv, tempfile.TemporaryDirectory() as tmp:
        srv.add_node("gpu-node-0", gpus=8)
        srv.script_pod(r"req-launcher-.*", logs=scripted_reports(time.time(), args.seconds),
                       exit_code=None, probe=probe)
        srv.script_pod(r"req-worker-.*", exit_code=None)
        kubeconfig = srv.write_kubeconfig(Path(tmp) / "kubeconfig")
        # Submitted as a user would: the CLI, in its own process.
        subprocess.run([sys.executable, "-m", "launcher.cli.app", "submit", "mpi", "--name", "req",
                        "--workers", "1", "--image", "img:1", "python", "train.py"],
                       env={**os.environ, "KUBECONFIG": str(kubeconfig)}, check=True)
        backend = KubernetesBackend(context="test", namespace="default", kubeconfig=kubeconfig)
        srv.wait_for(lambda: backend.get("req").phase == "Running", timeout=30)
        # steady state: the probe has run once the launch line started
        srv.wait_for(lambda: all(c.get("ready") for p in srv.objects("Pod", "default")
                                 for c in (p.get("status") or {}).get("containerStatuses") or []
                                 if p["metadata"]["name"].startswith("req-launcher-"))
                     or args.no_monitor, timeout=30)
        srv.clear_requests()
        started = time.monotonic()
        try:
            status = backend.wait("req", timeout=args.seconds)
            print(f"wait ended early: {status.phase}")
        except Timeout:
            pass
        elapsed = time.monotonic() - started
        requests = list(srv.request_log)
    logs = [r for r in requests if r.path.endswith("/log")]
    kinds = Counter(f"{r.method} {r.path.split('?')[0].rstrip('/').rsplit('/', 1)[-1]}"
                    for r in requests if r not in logs)
    print(json.dumps({"monitor": not args.no_monitor, "seconds": round(elapsed, 1),
                      "log_reads": len(logs),
                      "log_reads_per_minute_after_the_first":
                          round(max(0, len(logs) - 1) / (elapsed / 60), 2),
                      "other_requests": dict(kinds)}, indent=1))


if __name__ == "__main__":
    main()
