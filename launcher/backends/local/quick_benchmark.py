"""The local backend's sizing of a built-in benchmark left to the defaults (the quick
benchmark: this machine's CPU, not a GPU cluster), and what submit says it is and how long
it should take."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpijob.jobspec import defaults
from mpijob.plural import plural

if TYPE_CHECKING:
    from launcher.preparing.planning import Plan
    from mpijob.jobspec.spec import JobSpec

# The quick benchmark on an idle 2-core VM (benchmarks/calibration/measured/*/results.jsonl,
# wall_seconds): 17.1-17.3 s with 1 rank, 18.4-19.8 s with 2, of which the 12 steps took
# about 3 s: the rest, about 14 s, is starting Python, TensorFlow, Horovod and MPI. Said
# where no calibration predicts this machine's steps (a busy machine takes longer).
LOCAL_START_SECONDS = 14.0
QUICK_BENCHMARK_SECONDS = 20.0

QUICK_SIZE = {"benchmark.image_size": defaults.QUICK_IMAGE_SIZE,
              "benchmark.batch_size": defaults.QUICK_BATCH_SIZE,
              "benchmark.num_batches": defaults.QUICK_NUM_BATCHES,
              "benchmark.num_warmup_batches": defaults.QUICK_NUM_WARMUP_BATCHES}


def quick_sized(values: Mapping[str, Any], command: tuple[str, ...]) -> Mapping[str, Any]:
    """The quick benchmark for a built-in benchmark run on this machine's CPU whose size was
    left to the defaults; other jobs' options as they are (the same mapping)."""
    if command or values.get("gpus_per_worker") or any(
            values.get(path) is not None for path in QUICK_SIZE):
        return values
    return {**values, **QUICK_SIZE}


def describe_start(spec: JobSpec, plan: Plan, quick: bool) -> str | None:
    """What a built-in benchmark run on this machine is, and how long it should take."""
    if not spec.runs_benchmark:
        return None
    b = spec.benchmark
    steps = b.num_warmup_batches + b.num_batches
    what = (f"{'quick benchmark' if quick else 'benchmark'}: {b.model} at {b.image_size or 224} "
            f"px, batch {b.batch_size}, {b.num_warmup_batches} warm-up + {b.num_batches} "
            f"timed steps on {plural(spec.ranks, 'rank')}")
    if quick:
        what += " (--image-size/--batch-size/--num-batches set another size)"
    if plan.prediction is not None:
        seconds = LOCAL_START_SECONDS + steps * plan.prediction.step_seconds
        what += f"; predicted {seconds:.0f} s"
    elif quick:
        what += (f"; about {QUICK_BENCHMARK_SECONDS:.0f} s on an idle 2-core machine "
                 "(hvdk8s calibrate predicts this one)")
    return what
