"""The local backend reads its ranks' reports from the job's log: progress in `get`, a
stall ended by --stall-timeout in the supervisor (no processes: a stand-in for mpirun)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from launcher.backends.local import supervisor
from launcher.backends.local.state import JobPaths


def report_line(kind: str, rank: int, when: float, **fields) -> str:
    return "HVDK8S_REPORT " + json.dumps({"kind": kind, "rank": rank, "time": when, **fields})


class NeverEnds:
    """mpirun that runs until terminated; counts the waits."""

    def __init__(self):
        self.waits = 0

    def wait(self, timeout=None):
        self.waits += 1
        raise subprocess.TimeoutExpired("mpirun", timeout)


@pytest.fixture
def job(tmp_path):
    paths = JobPaths(tmp_path / "default" / "j")
    paths.dir.mkdir(parents=True)
    return paths


def write_log(paths: JobPaths, lines: list[str]) -> None:
    paths.launcher_log.write_text("\n".join(lines) + "\n")


def test_a_stall_longer_than_the_timeout_ends_the_job_naming_the_silent_rank(job):
    now = time.time()
    write_log(job, [report_line("progress", r, now - 100, step=5, total_steps=60,
                                images_per_step=16, images_per_sec=16.0,
                                images_per_sec_avg=16.0) for r in (0, 1)]
              + [report_line("heartbeat", 0, now - 1, step=5)])
    stop = supervisor._Stop()
    with pytest.raises(subprocess.TimeoutExpired):
        supervisor._run(stop, NeverEnds(), job, None, stall_timeout=60, ranks=2)
    assert not stop.deadline
    assert stop.stalled.startswith("no step for 1m40s") and \
        stop.stalled.endswith("not reporting: rank 1")


def test_a_stall_shorter_than_the_timeout_does_not(job, monkeypatch):
    now = time.time()
    write_log(job, [report_line("progress", 0, now - 30, step=5, total_steps=60,
                                images_per_step=16, images_per_sec=16.0,
                                images_per_sec_avg=16.0)])
    proc = NeverEnds()
    # the deadline ends the loop after the stall check said "not yet"
    monkeypatch.setattr(supervisor, "STALL_CHECK_SECONDS", 0.0)
    stop = supervisor._Stop()
    with pytest.raises(subprocess.TimeoutExpired):
        supervisor._run(stop, proc, job, deadline=0.0, stall_timeout=60, ranks=1)
    assert stop.deadline and stop.stalled is None


def test_without_a_stall_timeout_the_log_is_not_read(job):
    stop = supervisor._Stop()

    class EndsAtOnce:
        def wait(self, timeout=None):
            assert timeout is None  # one wait, no polling
            return 0

    supervisor._run(stop, EndsAtOnce(), job, None, None, 2)
    assert stop.stalled is None and not stop.deadline


def test_tail_text_keeps_whole_lines_only(tmp_path):
    path = tmp_path / "log"
    path.write_text("first line\nsecond\nthird\n")
    assert supervisor.tail_text(path, 13) == ["third", ""]
    assert supervisor.tail_text(path, 1000) == ["first line", "second", "third", ""]
    assert supervisor.tail_text(tmp_path / "missing", 10) == []


def test_get_reads_a_running_jobs_reports_and_marks_the_silent_rank(job):
    from launcher.backends.local.backend import _status_from
    from launcher.backends.local.state import StatusRecord
    from launcher.backends.local.state import now as stamp
    from mpijob.phases import JobPhase

    when = time.time()
    write_log(job, [report_line("progress", r, when - 30, step=5, total_steps=60,
                                images_per_step=16, images_per_sec=16.0,
                                images_per_sec_avg=16.0) for r in (0, 1)]
              + [report_line("heartbeat", 0, when - 1, step=5)])
    running = StatusRecord(phase=JobPhase.RUNNING, started=stamp(), ranks=2, node="vm")
    status = _status_from(job, running, {"workers": 2})
    assert (status.progress.step, status.progress.silent_ranks) == (5, [1])
    assert status.why == "stalled: no step for 30s (threshold 6s); not reporting: rank 1"
    assert status.replicas[1].message == "not reporting (stopped, or gone)"
    ended = StatusRecord(phase=JobPhase.SUCCEEDED, started=stamp(), ranks=2, node="vm")
    assert _status_from(job, ended, {"workers": 2}).progress is None  # its log is not read
