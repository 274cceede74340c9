"""Report to hvdk8s from inside a job: one `HVDK8S_REPORT {json}` line on stdout.

mpirun forwards every rank's stdout to the launcher's log, where `hvdk8s get` reads it
(launcher/formats/rank_reports.py): no rights, no network, no dependency beyond Python.
Python 3.8 syntax: stock images (horovod/horovod) run it. Copy this file beside your
training program (or onto its PYTHONPATH); every rank reports for itself.

A plain loop:

    from hvdk8s_report import StepReporter
    reporter = StepReporter(total_steps=1000, batch_size=64, world_size=hvd.size())
    reporter.start_heartbeat()          # a rank that stops is the one whose heartbeats cease
    for step in range(1000):
        started = time.perf_counter()
        train_step()                    # time your own compute if you can: compute_seconds=
        reporter.step_done(time.perf_counter() - started)

Keras (`model.fit`):

    model.fit(..., callbacks=[keras_callback(total_steps=epochs * steps_per_epoch,
                                             batch_size=64, world_size=hvd.size())])

What `hvdk8s get` then shows: step n of N, images/sec now (over the last interval) against
the prediction, ETA, time since the last step; a rank whose step time stays above the
others' is named a straggler, and no step for a while a stall, naming the ranks whose
heartbeats ceased. One report line every `every` seconds per rank (default 5, env
HVDK8S_REPORT_SECONDS), one heartbeat every 2 (HVDK8S_HEARTBEAT_SECONDS).
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time

REPORT_PREFIX = "HVDK8S_REPORT "
# Where each MPI tells a process its rank: Open MPI, MPICH/Intel MPI (PMI), Horovod's own.
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK")
REPORT_SECONDS = 5.0
HEARTBEAT_SECONDS = 2.0
_write_lock = threading.Lock()
# Where the rank runs: on Kubernetes an hvdk8s worker's hostname is its pod's name, so
# `hvdk8s get` names a straggler's or a silent rank's pod, node and GPUs.
_HOST = socket.gethostname()


def own_rank() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def report(kind: str, rank: int | None = None, stream=None, **fields) -> None:
    """Write one report line and flush it (a buffered line would arrive late or never).
    Non-finite numbers become null: the line stays valid JSON. One write under a lock: the
    heartbeat thread's line never splits another."""
    record = {"kind": kind, "rank": own_rank() if rank is None else int(rank),
              "time": time.time(), "host": _HOST}
    record.update({key: _finite(value) for key, value in fields.items()})
    out = stream or sys.stdout
    line = REPORT_PREFIX + json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
    with _write_lock:
        out.write(line)
        out.flush()


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


class StepReporter:
    """Counts a loop's steps and reports, at most every `every` seconds, `progress`:

        step, total_steps       steps done (warm-up excluded) and planned
        images_per_sec          the whole job's rate over the last interval
                                (batch_size x world_size / this rank's mean step time)
        images_per_sec_avg      the same since the warm-up ended
        step_time               this rank's mean wall time per step over the interval
        compute_time            its own compute time per step, when given: in an
                                all-reduce every rank waits for the slowest, so only the
                                compute time shows which one is slow
        warmup                  true while in the `warmup_steps` first steps

    and, from `start_heartbeat`, `heartbeat` (step) every `heartbeat_every` seconds from a
    thread of its own."""

    def __init__(self, total_steps: int, batch_size: int, world_size: int = 1, *,
                 warmup_steps: int = 0, every: float | None = None,
                 heartbeat_every: float | None = None, stream=None, clock=time.perf_counter):
        self.total_steps = int(total_steps)
        self.images_per_step = int(batch_size) * max(1, int(world_size))
        self.warmup_steps = int(warmup_steps)
        self.every = every or _env_seconds("HVDK8S_REPORT_SECONDS", REPORT_SECONDS)
        self.heartbeat_every = heartbeat_every or _env_seconds("HVDK8S_HEARTBEAT_SECONDS",
                                                               HEARTBEAT_SECONDS)
        self.stream = stream
        self.clock = clock
        self.step = 0  # timed steps done
        self._warmup_left = self.warmup_steps
        self._last_report = clock()
        self._interval = [0, 0.0, 0.0, 0]  # steps, wall seconds, compute seconds, computed
        self._total = [0, 0.0]  # timed steps and their seconds since the warm-up
        self._stop = threading.Event()

    def step_done(self, step_seconds: float, compute_seconds: float | None = None) -> None:
        if self._warmup_left > 0:
            self._warmup_left -= 1
            if self._warmup_left == 0:
                self._report(warmup=True, step_time=step_seconds)
            return
        self.step += 1
        interval = self._interval
        interval[0] += 1
        interval[1] += step_seconds
        if compute_seconds is not None:
            interval[2] += compute_seconds
            interval[3] += 1
        self._total[0] += 1
        self._total[1] += step_seconds
        if self.clock() - self._last_report >= self.every or self.step == self.total_steps:
            self._report()

    def _report(self, warmup: bool = False, step_time: float | None = None) -> None:
        steps, wall, compute, computed = self._interval
        fields = {"step": self.step, "total_steps": self.total_steps, "warmup": warmup,
                  "images_per_step": self.images_per_step}
        if steps:
            fields["step_time"] = wall / steps
            fields["images_per_sec"] = self.images_per_step * steps / wall if wall > 0 else None
        elif step_time is not None:
            fields["step_time"] = step_time
        if computed:
            fields["compute_time"] = compute / computed
        if self._total[1] > 0:
            fields["images_per_sec_avg"] = self.images_per_step * self._total[0] / self._total[1]
        report("progress", stream=self.stream, **fields)
        self._interval = [0, 0.0, 0.0, 0]
        self._last_report = self.clock()

    def start_heartbeat(self) -> threading.Thread:
        """A daemon thread that reports `heartbeat` until `stop`: a rank whose heartbeats
        cease is stopped or gone, one that beats without steps is waiting (a collective)."""
        def beat() -> None:
            while not self._stop.wait(self.heartbeat_every):
                report("heartbeat", stream=self.stream, step=self.step,
                       every=self.heartbeat_every)

        thread = threading.Thread(target=beat, name="hvdk8s-heartbeat", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def keras_callback(total_steps: int, batch_size: int, world_size: int = 1, *,
                   warmup_steps: int = 0, heartbeat: bool = True, **reporter_options):
    """A `tf.keras.callbacks.Callback` that reports each training batch through a
    StepReporter (the batch's wall time; Keras does not split out compute). Imports
    TensorFlow only when called."""
    import tensorflow as tf

    reporter = StepReporter(total_steps, batch_size, world_size, warmup_steps=warmup_steps,
                            **reporter_options)

    class HvdK8sProgress(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            if heartbeat:
                reporter.start_heartbeat()

        def on_train_batch_begin(self, batch, logs=None):
            self._started = reporter.clock()

        def on_train_batch_end(self, batch, logs=None):
            reporter.step_done(reporter.clock() - self._started)

        def on_train_end(self, logs=None):
            reporter.stop()

    callback = HvdK8sProgress()
    callback.reporter = reporter
    return callback
