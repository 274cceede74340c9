"""The local backend end to end: real mpirun (OpenMPI), real processes, a temp HVDK8S_HOME.

The Horovod benchmark run is marked slow (tens of seconds on two cores); the other jobs
run tiny commands under mpirun and take a second or two each. What every MPI must do the
same (success, logs, a failing or killed rank, delete, the user's python) is in
test_local_mpis.py, once per MPI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from launcher.backends.base import FAILED, SUCCEEDED
from launcher.backends.local import procs as local_procs
from launcher.backends.local.state import job_paths, read_json
from launcher.errors import NotFound, Timeout, UsageError, UserError
from mpijob.jobspec.spec import JobSpec
from tests.launcher.backends.contract_calls import start_local

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")


def _sleeper(name: str, token: str, **kw) -> JobSpec:
    """Two ranks that sleep; `token` in their command line makes them findable in /proc."""
    return JobSpec(name=name, workers=2, command=("sh", "-c", f"sleep 300; echo {token}"), **kw)


def _cmdline_pids(token: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return [p for p in pids if local_procs.is_alive(p)]


def _wait_until(predicate, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# ------------------------------------------------------------------ the benchmark
@pytest.mark.slow
@pytest.mark.horovod
def test_two_rank_horovod_benchmark_runs_to_success(backend):
    pytest.importorskip("horovod.tensorflow")
    spec = JobSpec(name="bench", workers=2, gpus_per_worker=0, benchmark=dict(
        model="resnet50", batch_size=8, image_size=64, num_batches=5, num_warmup_batches=2))
    started = time.monotonic()
    result = start_local(backend, spec, None, mode="pods")
    assert result.backend == "local" and result.name == "bench"
    status = backend.wait("bench", timeout=600)
    elapsed = time.monotonic() - started
    print(f"2-rank resnet50 run: {elapsed:.1f}s wall, {status.images_per_sec} images/sec")

    assert status.phase == SUCCEEDED, status.log_tail
    assert status.images_per_sec > 0
    assert status.result["world_size"] == 2
    assert len(status.result["per_rank_images_per_sec"]) == 2
    assert status.result["model"] == "resnet50" and status.result["device"] == "cpu"

    got = backend.get("bench")
    assert got.backend == "local" and got.namespace == "default" and got.mode == "pods"
    assert (got.workers, got.gpus_per_worker) == (2, 0)
    assert [r.name for r in got.replicas] == ["bench-rank-0", "bench-rank-1"]
    assert {r.role for r in got.replicas} == {"rank"} and {r.phase for r in got.replicas} == {SUCCEEDED}
    assert got.placement == [{"node": socket.gethostname(), "gpus": []}]
    assert got.created and got.started and got.finished and got.started <= got.finished

    launcher_log = list(backend.logs("bench"))
    assert any(line.startswith("total images/sec:") for line in launcher_log)
    assert any(line.startswith("HVDK8S_RESULT ") for line in launcher_log)
    rank0, rank1 = list(backend.logs("bench", rank=0)), list(backend.logs("bench", rank=1))
    # Only rank 0 reports; each rank's log holds its own output only.
    assert any("total images/sec:" in line for line in rank0)
    assert not any("total images/sec:" in line for line in rank1)
    assert list(backend.logs("bench", tail=3)) == launcher_log[-3:]
    assert [s.name for s in backend.list()] == ["bench"]


# ------------------------------------------------------------------ the contract
def test_submit_starts_the_launch_prepare_decided_and_decides_nothing_again(backend, monkeypatch):
    """The backend contract (launcher.backends.base.Prepared): what a dry run shows is what
    starts; submit asks this machine nothing a second time."""
    from launcher.backends.local import launching
    from launcher.backends.local.backend import LocalOptions
    from launcher.preparing.planning import Plan
    from mpijob.k8s.command import shell_join

    prepared = backend.prepare(Plan(JobSpec(name="once", workers=2, command=("true",))),
                               LocalOptions())

    def decided_again(*_args, **_kwargs):
        raise AssertionError("submit decided the launch a second time")

    monkeypatch.setattr(launching, "build_launch", decided_again)
    monkeypatch.setattr(launching, "choose_gpus", decided_again)
    result = backend.submit(prepared, LocalOptions())
    (shown,) = prepared.objects
    assert shell_join(result.objects[0]["argv"]) == shown["command"]
    assert backend.wait("once", timeout=60).phase == SUCCEEDED


# ------------------------------------------------------------------ failures
def test_ranks_stopped_because_another_failed_are_terminated_not_failed(backend):
    program = ("import os,sys,time; r=int(os.environ['OMPI_COMM_WORLD_RANK']); "
               "time.sleep(0.5) if r==2 else None; sys.exit(3) if r==2 else time.sleep(60)")
    start_local(backend, JobSpec(name="cut", workers=3, command=("python", "-c", program)), None, mode="pods")
    status = backend.wait("cut", timeout=60)
    assert status.phase == FAILED and status.message == "rank 2 exited with code 3"
    phases = [(r.phase, r.exit_code, r.message) for r in status.replicas]
    assert phases == [("Terminated", None, "terminated: rank 2 failed")] * 2 + [
        (FAILED, 3, "rank 2 exited with code 3")]


def test_a_job_past_its_deadline_is_stopped(backend):
    token = uuid.uuid4().hex
    spec = _sleeper("late", token, run_policy=dict(active_deadline_seconds=1))
    start_local(backend, spec, None, mode="pods")
    status = backend.wait("late", timeout=30)
    assert status.phase == FAILED and status.reason == "deadline exceeded"
    assert {r.phase for r in status.replicas} == {"Terminated"}
    assert status.replicas[0].message == "terminated: the job ran longer than its deadline of 1s"
    _wait_until(lambda: not _cmdline_pids(token))


# ------------------------------------------------------------------ names
def test_a_taken_name_is_refused_and_the_job_left_untouched(backend):
    start_local(backend, JobSpec(name="twice", workers=1, command=("true",)), None, mode="pods")
    paths = job_paths("twice", "default")
    with pytest.raises(UserError) as err:
        start_local(backend, JobSpec(name="twice", workers=2, command=("false",)), None, mode="pods")
    assert str(err.value) == ("job twice already exists in namespace default; "
                              "delete it first: hvdk8s delete twice")
    assert err.value.exit_code == 2
    assert backend.wait("twice", timeout=30).phase == SUCCEEDED
    assert json.loads(paths.spec.read_text())["workers"] == 1
    # A finished job still holds its name, as on Kubernetes.
    with pytest.raises(UserError, match="already exists"):
        start_local(backend, JobSpec(name="twice", command=("true",)), None, mode="pods")
    assert [p.name for p in paths.dir.parent.iterdir()] == ["twice"]


def test_namespaces_keep_jobs_apart(backend):
    start_local(backend, JobSpec(name="same", command=("true",)), None, mode="pods")
    start_local(backend, JobSpec(name="same", namespace="team", command=("true",)), None, mode="pods")
    assert backend.wait("same", "team", timeout=30).namespace == "team"
    assert [s.namespace for s in backend.list()] == ["default"]
    assert [s.namespace for s in backend.list("team")] == ["team"]
    assert sorted(s.namespace for s in backend.list(all_namespaces=True)) == ["default", "team"]
    with pytest.raises(UserError, match=r"hvdk8s delete same -n team$"):
        start_local(backend, JobSpec(name="same", namespace="team", command=("true",)), None, mode="pods")


def test_unknown_job_and_bad_rank(backend):
    with pytest.raises(NotFound, match="job ghost not found in namespace default"):
        backend.get("ghost")
    with pytest.raises(NotFound):
        backend.logs("ghost")
    start_local(backend, JobSpec(name="one", workers=2, command=("true",)), None, mode="pods")
    with pytest.raises(UsageError, match=r"--rank: job one has ranks 0\.\.1, not 2"):
        backend.logs("one", rank=2)


# ------------------------------------------------------------------ supervision
def test_a_lost_supervisor_is_reported_and_its_ranks_can_be_deleted(backend):
    token = uuid.uuid4().hex
    start_local(backend, _sleeper("orphan", token), None, mode="pods")
    _wait_until(lambda: len(_cmdline_pids(token)) >= 2)
    pid = read_json(job_paths("orphan", "default").status)["supervisor_pid"]
    os.kill(pid, signal.SIGKILL)
    _wait_until(lambda: not local_procs.is_alive(pid))

    status = backend.get("orphan")
    assert status.phase == FAILED and status.reason == "supervisor lost"
    assert "hvdk8s delete orphan" in status.message
    assert backend.wait("orphan", timeout=5).phase == FAILED
    assert _cmdline_pids(token)  # the ranks outlived it...
    assert backend.delete("orphan") is True
    assert _cmdline_pids(token) == []  # ...until delete


def test_sigterm_to_the_supervisor_stops_the_ranks_and_fails_the_job(backend):
    token = uuid.uuid4().hex
    start_local(backend, _sleeper("stopped", token), None, mode="pods")
    _wait_until(lambda: len(_cmdline_pids(token)) >= 2)
    os.kill(read_json(job_paths("stopped", "default").status)["supervisor_pid"], signal.SIGTERM)
    status = backend.wait("stopped", timeout=30)
    assert (status.phase, status.reason) == (FAILED, "terminated")
    assert "SIGTERM" in status.message
    _wait_until(lambda: not _cmdline_pids(token))


def test_wait_times_out_with_exit_code_124(backend):
    token = uuid.uuid4().hex
    start_local(backend, _sleeper("slow", token), None, mode="pods")
    started = time.monotonic()
    with pytest.raises(Timeout) as err:
        backend.wait("slow", timeout=0.5)
    assert err.value.exit_code == 124
    assert 0.5 <= time.monotonic() - started < 5
    assert "slow" in str(err.value)


def test_follow_streams_lines_until_the_job_ends(backend):
    program = "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)\n"
    start_local(backend, JobSpec(name="talk", command=("python", "-c", program)), None, mode="pods")
    seen = []
    for line in backend.logs("talk", follow=True):
        seen.append((time.monotonic(), line))
    assert [line for _, line in seen] == ["line 0", "line 1", "line 2"]
    assert seen[-1][0] - seen[0][0] >= 0.4  # streamed as printed, not read at the end
    assert backend.get("talk").phase == SUCCEEDED
    assert list(backend.logs("talk", rank=0, follow=True, tail=1)) == ["line 2"]


def test_a_users_own_mpirun_line_runs_untouched(backend):
    line = f"mpirun -np 2 python -c {json.dumps('print(42)')}"
    start_local(backend, JobSpec(name="own", command=(line,), shell=True), None, mode="pods")
    status = backend.wait("own", timeout=60)
    assert status.phase == SUCCEEDED, status.log_tail
    # Both ranks share mpirun's stdout, so their lines may interleave ("4242").
    assert "".join(backend.logs("own")).count("42") == 2
    with pytest.raises(UserError, match="writes no per-rank logs"):
        backend.logs("own", rank=0)


def test_a_bare_python3_in_a_users_own_mpirun_line_is_this_python(backend):
    line = "mpirun -np 1 python3 -c 'import sys; print(sys.executable)'"
    start_local(backend, JobSpec(name="ownpy", command=(line,), shell=True), None, mode="pods")
    status = backend.wait("ownpy", timeout=60)
    assert status.phase == SUCCEEDED, status.log_tail
    assert list(backend.logs("ownpy")) == [sys.executable]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has GPUs")
def test_gpus_on_a_machine_without_gpus_fail_before_anything_starts(backend, tmp_path):
    with pytest.raises(UserError, match="--gpus 1: cannot see this machine's GPUs.*--gpus 0"):
        start_local(backend, JobSpec(name="nogpu", gpus_per_worker=1), None, mode="pods")
    assert not (tmp_path / "home" / "jobs" / "default" / "nogpu").exists()
