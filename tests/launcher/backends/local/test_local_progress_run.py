"""A real local run (mpirun, Horovod, TensorFlow on CPU): `get` follows the ranks'
progress, and a rank stopped with SIGSTOP is reported as a stall naming it, then ended by
--stall-timeout. Slow: minutes on two shared cores."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launcher.backends.local.procs import DIR_MARKER_ENV
from launcher.cli.app import app
from launcher.cli.common import EXIT_STALLED

pytestmark = pytest.mark.slow

QUICK = ["--workers", "2", "--gpus", "0", "--image-size", "64", "--batch-size", "8",
         "-e", "HVDK8S_REPORT_SECONDS=2"]


def submit(name: str, *extra: str) -> None:
    result = CliRunner().invoke(app, ["submit", "mpi", "--backend", "local", "--name", name,
                                      *QUICK, *extra])
    assert result.exit_code == 0, result.output


def program_of_rank(job_dir: Path, rank: int) -> int:
    """The pid of the benchmark of `rank` (not the rank wrapper around it)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = dict(item.split("=", 1) for item in
                       (entry / "environ").read_bytes().decode(errors="replace").split("\0")
                       if "=" in item)
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (env.get(DIR_MARKER_ENV) == str(job_dir) and env.get("OMPI_COMM_WORLD_RANK") == str(rank)
                and any(a.endswith(b"hvd_cnn_bench.py") for a in argv)
                and not any(a.endswith(b"rank.py") for a in argv)):
            return int(entry.name)
    raise AssertionError(f"no benchmark process of rank {rank} under {job_dir}")


def test_get_follows_the_steps_and_the_rate_reaches_the_final_total(backend):
    submit("progress", "--num-batches", "60")
    seen = []  # (step, images/sec now, since warm-up)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = backend.get("progress")
        if status.done:
            break
        p = status.progress
        if p is not None and not p.warmup and (not seen or p.step != seen[-1][0]):
            seen.append((p.step, p.images_per_sec, p.images_per_sec_avg))
        time.sleep(1.0)
    assert status.phase == "Succeeded", status.message
    steps = [s for s, _, _ in seen]
    assert len(steps) >= 3 and steps == sorted(steps), seen
    total = status.images_per_sec
    late = [avg for step, _, avg in seen if step >= 30]
    print(f"get while running (step, now, since warm-up): {seen}; final total {total:.2f}")
    assert late and abs(late[-1] - total) / total < 0.2, (late, total)


def test_a_stopped_rank_is_a_stall_naming_it_and_the_stall_timeout_ends_the_job(backend):
    submit("stall", "--num-batches", "1000", "--stall-timeout", "30")
    job_dir = Path(os.environ["HVDK8S_HOME"]) / "jobs" / "default" / "stall"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        p = backend.get("stall").progress
        if p is not None and not p.warmup and p.step >= 3:
            break
        time.sleep(1.0)
    step_time = p.expected_step_time
    pid = program_of_rank(job_dir, 1)
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        while time.monotonic() < stopped + 120:
            status = backend.get("stall")
            p = status.progress
            if p is not None and p.stalled and p.silent_ranks:
                break
            time.sleep(0.5)
        named_after = time.monotonic() - stopped
        print(f"stall named after {named_after:.1f}s (step time {step_time:.2f}s, threshold "
              f"{p.stall_after:.1f}s): {status.why}")
        assert p.silent_ranks == [1], status.why
        assert status.why.startswith("stalled: no step for") and "rank 1" in status.why
        result = CliRunner().invoke(app, ["wait", "stall", "--backend", "local",
                                          "--timeout", "120"])
        assert result.exit_code == EXIT_STALLED, result.output
        # the rank stays stopped: the supervisor ends the job 30 s into the stall
        while not (ended := backend.get("stall")).done and time.monotonic() < stopped + 180:
            time.sleep(1.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert (ended.phase, ended.reason) == ("Failed", "stalled")
    assert "ended by --stall-timeout: no step for" in ended.message and "rank 1" in ended.message


def test_a_rank_slowed_by_a_cpu_hog_on_its_core_is_named_a_straggler(backend):
    submit("hog", "--num-batches", "1000")
    job_dir = Path(os.environ["HVDK8S_HOME"]) / "jobs" / "default" / "hog"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        p = backend.get("hog").progress
        if p is not None and not p.warmup:
            break
        time.sleep(1.0)
    pid = program_of_rank(job_dir, 1)
    cores = os.sched_getaffinity(pid)
    # two busy loops on rank 1's cores (mpirun bound it to its own): its compute slows
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             preexec_fn=lambda: os.sched_setaffinity(0, cores))
            for _ in range(2)]
    try:
        found = None
        while time.monotonic() < deadline and found is None:
            status = backend.get("hog")
            found = next(iter(status.progress.stragglers), None)
            time.sleep(2.0)
        print(f"straggler: {found and found.describe()}; rank 1 cores {sorted(cores)}")
        assert found is not None and found.rank == 1
        assert status.replicas[1].message.startswith("straggler:")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
