"""Elastic jobs in the pod rehearsal (tests/rehearsal: real sshd, dnsmasq as CoreDNS,
horovodrun elastic over Gloo, Horovod CPU ranks).

The worker pods are made by the model of the Job controller (tests/rehearsal/jobcontroller.py)
from the Indexed worker Job hvdk8s renders (mpijob/k8s/render_elastic.py): hostname
`<job>-worker-<index>`, a failed pod replaced after the controller's back-off, more pods when
the Job's completions and parallelism grow. The ready-only `<job>-ready` Service is answered
by the rehearsal's DNS as CoreDNS would (Ready pods only), which is all Horovod's host
discovery reads.

- 3 workers with --min-workers 2 survive the kill of one worker pod, go on with 2, take the
  controller's replacement back, and end with exit 0 and a `total images/sec`;
- `hvdk8s scale` (against the test API server the job was submitted to) grows a running job
  from 2 workers to 3: the rehearsal's controller reads the worker Job from that server.
"""

from __future__ import annotations

import time

import pytest

from mpijob.jobspec import names
from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import BENCHMARK, TINY_BENCHMARK

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.horovod]


def _wait(pod, text: str, count: int = 1, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pod.log().count(text) >= count:
            return
        if pod.exit_code() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{pod.name} never logged {text!r} {count}x:\n{pod.log()}")


def _replacement(job: PodsJob, lost, timeout: float = 120):
    """The pod the worker Job makes for the lost one's index (after its back-off)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        made = [w for w in job.workers if w.hostname == lost.hostname and w is not lost]
        if made:
            return made[0]
        time.sleep(0.5)
    raise AssertionError(f"no replacement for {lost.name}")


def _phases(log: str) -> list[str]:
    print("\n".join(line for line in log.splitlines() if "elastic:" in line
                    or "total images/sec" in line))  # the figures, with -s
    return [line for line in log.splitlines() if "elastic: phase" in line]


def test_three_workers_lose_one_go_on_with_two_and_take_the_replacement_back(cluster):
    from launcher.backends.kubernetes.rendering import render
    from launcher.preparing.sshkeys import generate_ssh_keys
    from mpijob.jobspec.spec import build_spec
    from mpijob.k8s.start_gate import is_gate

    # No wait before the kill: all the steps are left to cover the replacement's back-off
    # and start, however fast this machine runs them.
    spec = build_spec(name="demo", workers=3, min_workers=2, max_workers=3, gpus_per_worker=0,
                      image="rehearsal", start_timeout=0,
                      benchmark={**TINY_BENCHMARK, "num_batches": 40})
    objects = render(spec, ssh=generate_ssh_keys(), benchmark_source=BENCHMARK.read_text(),
                     elastic_source=BENCHMARK.with_name("elastic.py").read_text())
    assert not any(is_gate(o) for o in objects)  # --start-timeout 0
    assert not [o for o in objects if o["kind"] == "Pod"]  # the worker Job makes them
    job = PodsJob(cluster, objects)
    assert sorted(w.hostname for w in job.workers) == [
        "demo-worker-0", "demo-worker-1", "demo-worker-2"]
    launcher = job.launcher
    on_three = "elastic: training on 3 workers (3 ranks)"
    _wait(launcher, on_three)

    (lost,) = [w for w in job.workers if w.hostname == "demo-worker-2"]
    before = launcher.log().count(on_three)
    # Its replacement's container waits (as for an image pull) until the job has gone on
    # with 2: whether Horovod's reset sees 2 or 3 workers is otherwise a matter of timing.
    cluster.hold("demo-worker-2")
    lost.kill(grace=0, reason="Killed")  # the pod fails, its rank with it
    _wait(launcher, "now 2 workers (2 ranks)")
    # The worker Job replaces the pod after its back-off: the same index and hostname, a new
    # pod and address, which Horovod has not blacklisted.
    replacement = _replacement(job, lost)
    assert replacement.name.startswith("demo-worker-2-") and replacement.name != lost.name
    assert replacement.obj["metadata"]["labels"][
        "batch.kubernetes.io/job-completion-index"] == "2"
    cluster.release("demo-worker-2")
    _wait(launcher, on_three, count=before + 1)
    assert replacement.ip != lost.ip

    out = job.finish(timeout=900)
    log = out.launcher_log
    assert out.launcher_exit == 0, log
    assert "elastic: training on 2 workers (2 ranks)" in log, log
    phases = _phases(log)
    assert any("2 workers (2 ranks)" in p for p in phases), log
    assert any("3 workers (3 ranks)" in p for p in phases), log
    assert "total images/sec: " in log, log


def _submitted(srv, job: str) -> list[dict]:
    """What `hvdk8s submit` created on the server, launcher Job first."""
    mine = [o for kind in ("jobs", "services", "configmaps", "secrets")
            for o in srv.objects(kind)
            if (o["metadata"].get("labels") or {}).get(names.LABEL_JOB) == job]
    return sorted(mine, key=lambda o: (o["metadata"].get("labels") or {}).get(
        names.LABEL_ROLE) != names.ROLE_LAUNCHER)


def test_scale_grows_a_running_job_from_two_workers_to_three(cluster, k8s):
    """Submitted to the test API server with 2 workers (2..3), the job's objects as the
    server holds them run here; `hvdk8s scale demo --workers 3` changes the worker Job
    there, the Job controller's model makes the third pod, Horovod's host discovery finds
    it Ready in DNS, and a phase runs on 3 workers."""
    from tests.k8s_env import hvdk8s

    srv = k8s.server()
    srv.script_pod(r"demo-launcher-.*", exit_code=None)  # the rehearsal runs the real one
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "demo", "--workers", "2",
                       "--min-workers", "2", "--max-workers", "3", "--gpus", "0",
                       "--start-timeout", "0", "--image", "rehearsal", "--batch-size", "2",
                       "--num-batches", "20", "--num-warmup-batches", "1", "--image-size", "32")
    assert submitted.exit_code == 0, submitted.output
    objects = _submitted(srv, "demo")
    job = PodsJob(cluster, objects, read_job=lambda name: srv.get("jobs", name))
    assert sorted(w.hostname for w in job.workers) == ["demo-worker-0", "demo-worker-1"]
    launcher = job.launcher
    _wait(launcher, "elastic: training on 2 workers (2 ranks)")

    scaled = hvdk8s(k8s, "scale", "demo", "--workers", "3")
    assert scaled.exit_code == 0, scaled.output
    _wait(launcher, "elastic: training on 3 workers (3 ranks)")
    assert sorted(w.hostname for w in job.workers) == [
        "demo-worker-0", "demo-worker-1", "demo-worker-2"]

    out = job.finish(timeout=900)
    log = out.launcher_log
    assert out.launcher_exit == 0, log
    phases = _phases(log)
    assert any("3 workers (3 ranks)" in p for p in phases), log
    assert "total images/sec: " in log, log
    assert out.still_running == [], out.still_running
