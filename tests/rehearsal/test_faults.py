"""Faults on a rehearsed built-in mode job: afterwards the job's phase is what hvdk8s reads
from the pods, and no worker keeps running (on a cluster it would keep its GPUs)."""

import signal
import time

import pytest

from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]

# Workers give a launcher that vanished this long to come back before they exit.
FAST_GRACE = {"HVDK8S_LAUNCHER_GRACE_SECONDS": "3"}


def _long_job(cluster, **kw):
    job = PodsJob(cluster, render_job(workers=2, command=("sleep", "120")),
                  worker_env=FAST_GRACE, **kw)
    job.wait_log(job.launcher, "hvdk8s: starting")
    time.sleep(2)  # mpirun has its daemons on the workers
    return job


def test_launcher_terminated_stops_the_job_and_releases_workers(cluster):
    """SIGTERM (pod deleted, deadline, eviction): fails without the launcher's TERM trap,
    since PID 1 ignores an untrapped SIGTERM and the kubelet's SIGKILL leaves the workers'
    sshd serving (issue 10, defect 7)."""
    job = _long_job(cluster)
    job.launcher.kill(grace=15)
    out = job.finish(timeout=20, worker_grace=10)
    assert out.launcher_exit == 143, out.launcher_log
    assert "launcher terminated" in out.launcher_log
    assert out.phase == "Failed" and out.reason == "BackoffLimitExceeded"
    assert out.still_running == [], "\n".join(out.worker_logs.values())
    assert all("launcher finished (exit 143)" in log for log in out.worker_logs.values())


def test_launcher_killed_outright_workers_exit_by_themselves(cluster):
    """SIGKILL (OOM, node lost): nothing in the launcher runs; fails unless workers notice
    their launcher's lease ending (issue 10, defect 7)."""
    job = _long_job(cluster)
    job.launcher.signal(signal.SIGKILL)
    out = job.finish(timeout=10, worker_grace=20)
    assert out.launcher_exit == 137
    assert out.phase == "Failed" and out.reason == "BackoffLimitExceeded"
    assert out.still_running == [], "\n".join(out.worker_logs.values())
    assert all("launcher is gone" in log for log in out.worker_logs.values())


def test_launcher_failed_releases_workers(cluster):
    job = PodsJob(cluster, render_job(workers=2, command=("sh", "-c", "exit 3")))
    out = job.finish(timeout=60, worker_grace=10)
    assert out.launcher_exit not in (0, None), out.launcher_log
    assert out.phase == "Failed" and out.reason == "BackoffLimitExceeded"
    assert out.still_running == []
    assert all(code == 0 for code in out.worker_exits.values()), out.worker_logs


def test_worker_killed_mid_run_fails_the_job_and_frees_the_rest(cluster):
    job = _long_job(cluster)
    job.workers[1].signal(signal.SIGKILL)
    out = job.finish(timeout=60, worker_grace=10)
    assert out.launcher_exit not in (0, None), out.launcher_log
    assert out.worker_exits["demo-worker-1"] == 137
    assert out.phase == "Failed"
    assert out.still_running == [], "\n".join(out.worker_logs.values())


@pytest.mark.parametrize("late", ["worker_start_delay", "dns_delay"],
                         ids=["sshd-starts-late", "dns-record-appears-late"])
def test_a_worker_that_comes_late_is_waited_for(cluster, late):
    """Its sshd starts, or its DNS record appears, 6 s after the launcher starts."""
    job = PodsJob(cluster, render_job(workers=2, command=("hostname",)),
                  **{late: {"demo-worker-1": 6}})
    out = job.finish(timeout=90)
    assert out.launcher_exit == 0, out.launcher_log
    assert "demo-worker-1" in out.launcher_log.splitlines()
    assert out.phase == "Succeeded" and out.still_running == []
