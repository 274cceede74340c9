"""The ranks' reports: the benchmark's own copy of the emitter writes what hvdk8s_report.py
writes, and both are what `get` reads (pure: no TensorFlow, no mpirun)."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import pytest

from launcher.formats.job_progress import summarize
from launcher.formats.rank_reports import iter_reports

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "benchmark"))
import hvd_cnn_bench as bench  # noqa: E402
import hvdk8s_report  # noqa: E402


@pytest.fixture
def frozen_time(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1234.5)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")


def test_the_benchmarks_copy_writes_the_helpers_lines(frozen_time):
    fields = {"step": 3, "total_steps": 9, "images_per_sec": float("inf"), "x": [1.0, 2]}
    mine, theirs = io.StringIO(), io.StringIO()
    bench.report("progress", stream=mine, **fields)
    hvdk8s_report.report("progress", stream=theirs, **fields)
    assert mine.getvalue() == theirs.getvalue()
    assert bench.REPORT_PREFIX == hvdk8s_report.REPORT_PREFIX


def test_each_report_says_its_host_which_is_the_pods_name_on_kubernetes(frozen_time,
                                                                        monkeypatch):
    monkeypatch.setattr(bench.socket, "gethostname", lambda: "job-worker-1")
    monkeypatch.setattr(hvdk8s_report, "_HOST", "job-worker-1")
    for emit in (bench.report, hvdk8s_report.report):
        out = io.StringIO()
        emit("heartbeat", stream=out, step=4)
        (line,) = iter_reports(out.getvalue())
        assert (line["rank"], line["host"]) == (2, "job-worker-1")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_benchmarks_progress_and_the_step_reporter_report_the_same_fields(monkeypatch):
    monkeypatch.setenv("HVDK8S_REPORT_SECONDS", "5")
    clock = Clock()
    out_bench, out_helper = io.StringIO(), io.StringIO()
    progress = bench.Progress(total_steps=4, images_per_step=16, stream=out_bench)
    reporter = hvdk8s_report.StepReporter(4, batch_size=8, world_size=2, stream=out_helper,
                                          clock=clock)
    for _ in range(4):
        clock.now += 2.0
        progress.step_done(2.0, 1.5, clock.now)
        reporter.step_done(2.0, compute_seconds=1.5)
    ours, helpers = (list(iter_reports(o.getvalue().splitlines())) for o in (out_bench, out_helper))
    # every 5 s of steps (after 3 steps of 2 s), and the last step
    assert [r["step"] for r in ours] == [r["step"] for r in helpers] == [3, 4]
    for a, b in zip(ours, helpers, strict=True):
        assert {k: v for k, v in a.items() if k != "time"} == \
            {k: v for k, v in b.items() if k != "time"}
    assert (ours[0]["images_per_sec"], ours[0]["compute_time"], ours[0]["step_time"]) == \
        (16 / 2.0, 1.5, 2.0)


def test_a_reporters_lines_are_what_get_summarizes(monkeypatch):
    clock = Clock()
    out = io.StringIO()
    reporter = hvdk8s_report.StepReporter(10, batch_size=4, world_size=1, warmup_steps=2,
                                          every=1.0, stream=out, clock=clock)
    for _ in range(6):
        clock.now += 0.5
        reporter.step_done(0.5)
    lines = out.getvalue().splitlines()
    last = json.loads(lines[-1].split(" ", 1)[1])
    p = summarize(iter_reports(lines), last["time"] + 1.0, ranks=1)
    assert (p.step, p.total_steps, p.images_per_sec, p.warmup) == (4, 10, 8.0, False)
    assert p.eta_seconds == 6 * 4 / 8.0


def test_the_heartbeat_thread_beats_until_stopped():
    out = io.StringIO()
    reporter = hvdk8s_report.StepReporter(10, 1, heartbeat_every=0.01, stream=out)
    thread = reporter.start_heartbeat()
    deadline = time.monotonic() + 5
    while "heartbeat" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    reporter.stop()
    thread.join(5)
    (beat, *_) = iter_reports(out.getvalue().splitlines(), kind="heartbeat")
    assert (beat["step"], beat["every"]) == (0, 0.01) and not thread.is_alive()
