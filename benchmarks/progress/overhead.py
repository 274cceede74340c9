"""What the ranks' progress reports cost a training step, measured piece by piece.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/progress/overhead.py [--out FILE]

- per step, in Python: the benchmark's Progress.step_done (the accounting; a line every
  HVDK8S_REPORT_SECONDS);
- per report line: writing and flushing one HVDK8S_REPORT line (to /dev/null: the pipe to
  the rank wrapper costs the same write);
- per step, in the graph: the compute-time probe the benchmark adds to its train step (two
  tf.timestamp ops, the input gated on the first, and a sum of the first layer's gradient brought to the host), timed as a
  tf.function of just those ops on a tensor of resnet50's conv1 kernel size, on this CPU;
- then the share of a step: per-step costs, plus a progress line every 5 s and a heartbeat
  every 2 s, over the step time of the quick local benchmark and of a GPU ResNet-50 step.
A/B runs of the whole benchmark were not used: on this shared 2-core machine their noise
(10-50% between runs) is far above the effect.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "benchmark"))
import hvd_cnn_bench as bench  # noqa: E402

CONV1_KERNEL = (7, 7, 3, 64)  # resnet50's first layer, whose gradient the probe sums
# Step times the share is given for: the quick local CPU benchmark as measured here
# (2 ranks, resnet50 64 px, batch 8, unloaded), and ResNet-50 fp32 batch 64 on one V100
# (~360 images/sec in tf_cnn_benchmarks: 0.18 s) as a fast GPU step.
STEP_SECONDS = {"quick local CPU step": 0.3, "GPU ResNet-50 batch 64 step": 0.18}


def per_call(fn, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def python_costs() -> dict:
    with open(os.devnull, "w") as sink:
        quiet = bench.Progress(total_steps=10**9, images_per_step=128, stream=sink)
        quiet.every = float("inf")  # accounting only
        now = [0.0]

        def step():
            now[0] += 0.1
            quiet.step_done(0.1, 0.09, now[0])

        step_seconds = min(per_call(step, 100_000) for _ in range(3))
        fields = quiet.fields()
        line_seconds = min(per_call(lambda: bench.report("progress", stream=sink, **fields), 20_000)
                           for _ in range(3))
    return {"step_done_seconds": step_seconds, "report_line_seconds": line_seconds}


def probe_cost() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    grad = tf.random.normal(CONV1_KERNEL)

    @tf.function
    def bare(g):
        return g

    @tf.function
    def probed(g):
        started = tf.timestamp()
        with tf.control_dependencies([started]):  # as the benchmark gates its input
            g = tf.identity(g)
        with tf.device("/CPU:0"):
            probe = tf.reduce_sum(g)
        with tf.control_dependencies([probe]):
            computed = tf.timestamp()
        return g, computed - started

    for fn in (bare, probed):
        fn(grad)
    calls = 5_000
    bare_s = min(per_call(lambda: bare(grad), calls) for _ in range(3))
    probed_s = min(per_call(lambda: probed(grad), calls) for _ in range(3))
    return {"probe_seconds": max(0.0, probed_s - bare_s), "tensorflow": tf.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("overhead.json"))
    args = parser.parse_args()
    found = {**python_costs(), **probe_cost(), "load_before": os.getloadavg()[0]}
    per_second = found["report_line_seconds"] * (1 / bench.REPORT_SECONDS + 1 / bench.HEARTBEAT_SECONDS)
    per_step = found["step_done_seconds"] + found["probe_seconds"]
    found["share_of_step"] = {name: per_step / seconds + per_second
                              for name, seconds in STEP_SECONDS.items()}
    found["load_after"] = os.getloadavg()[0]
    args.out.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    print(f"Progress.step_done: {found['step_done_seconds'] * 1e6:.2f} us per step")
    print(f"one report line: {found['report_line_seconds'] * 1e6:.1f} us")
    print(f"compute-time probe in the graph: {found['probe_seconds'] * 1e6:.1f} us per step")
    for name, share in found["share_of_step"].items():
        print(f"share of a {name}: {share * 100:.4f}%")
    print(f"load average {found['load_before']:.1f} -> {found['load_after']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
