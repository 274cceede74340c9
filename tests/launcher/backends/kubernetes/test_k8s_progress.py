"""A running job's progress through the Kubernetes API: the ranks' report lines in the
launcher pod's log, which `get` reads already (no extra request) and `list` once per
running job; `logs` hides them. Against the test API server."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from kubesim import Run
from launcher.backends.kubernetes.client import EVENT, POD
from launcher.backends.kubernetes.stallcheck import probe_says_progressing
from launcher.formats.rank_reports import REPORT_PREFIX
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.phases import STALLED_REASON
from mpijob.progress import STALL_MESSAGE_PREFIX
from tests.k8s_env import hvdk8s
from tests.launcher.backends.contract_calls import create_job
from tests.mpijob.k8s.test_monitor_program import mon

STALL_EXIT = mon.STALL_EXIT


def report(kind: str, rank: int, **fields) -> str:
    return f"[1,{rank}]<stdout>:" + REPORT_PREFIX + json.dumps(
        {"kind": kind, "rank": rank, "time": time.time(), **fields})


def progress(rank: int, step: int) -> str:
    return report("progress", rank, step=step, total_steps=100, images_per_step=64,
                  images_per_sec=640.0, images_per_sec_avg=620.0, compute_time=0.09,
                  warmup=False)


# What the launcher's probe says in an image without python3 (launcher.sh).
NO_MONITOR = ("hvdk8s: no python3 (3.8 or later) in the image: the launch line runs without "
              "its monitor (no stall probe, --stall-timeout or metrics)")


def watching(logs_for: float | None) -> tuple[bool, str]:
    """The launcher's probe while its monitor watches a job that progresses."""
    return True, ""


def running_with_reports(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    k8s.script_launcher("vgg16", ["[1,0]<stdout>:Running warm up", progress(0, 20),
                                  progress(1, 20), report("heartbeat", 0, step=20)],
                        exit_code=None, probe=watching)
    spec = build_spec(name="vgg16", namespace=k8s.namespace, image=k8s.image, workers=1,
                      command=("python", "train.py"))
    create_job(backend, spec, None, schedule_timeout=20)
    srv.wait_for(lambda: (backend.get("vgg16").progress or False) and True, timeout=30)
    return srv, backend


def test_get_reads_progress_from_the_log_it_already_reads(k8s, api_requests):
    _, backend = running_with_reports(k8s)
    api_requests.mark()
    status = backend.get("vgg16")
    requests = api_requests.since()
    assert status.phase == "Running"
    p = status.progress
    assert (p.step, p.total_steps, p.images_per_sec, p.stalled) == (20, 100, 640.0, False)
    # one read of the launcher's log, as before progress existed (it looked for the result)
    assert sum(1 for r in requests if r.path.endswith("/log")) == 1


def test_list_shows_the_rate_of_a_running_job_and_logs_hides_the_reports(k8s):
    running_with_reports(k8s)
    listed = hvdk8s(k8s, "list", "-o", "wide")
    header, row = listed.stdout.splitlines()[:2]
    cells = dict(zip(re.split(r"\s{2,}", header), re.split(r"\s{2,}", row), strict=True))
    assert cells["IMAGES/SEC"] == "640.0" and cells["STEP"] == "20/100"
    logs = hvdk8s(k8s, "logs", "vgg16").stdout.splitlines()
    assert logs == ["Running warm up"]
    assert len(hvdk8s(k8s, "logs", "vgg16", "--raw").stdout.splitlines()) == 4
    got = hvdk8s(k8s, "get", "vgg16").stdout
    assert "step 20/100  images/sec 640.0" in got


def test_plain_list_reads_no_running_log_and_wide_reads_one_each(k8s):
    """`list` pays one paged list per kind, as kubectl does; the live progress of running
    jobs (a log tail each) only when `-o wide` asks for it."""
    running_with_reports(k8s)
    srv = k8s.server()
    srv.clear_requests()
    assert hvdk8s(k8s, "list").exit_code == 0
    assert srv.count_requests("GET", r"/log$") == 0
    srv.clear_requests()
    assert hvdk8s(k8s, "list", "-o", "wide").exit_code == 0
    assert srv.count_requests("GET", r"/log$") == 1


# --- why, in one place: the single line get prints, and logs -f / wait end with it ---------
CAUSES = {
    "image": ({"phase": "Pending", "containerStatuses": [{"name": "worker", "restartCount": 0,
               "state": {"waiting": {"reason": "ErrImagePull",
                                     "message": 'failed to pull image "x:9": not found'}}}]},
              "why: img-worker-0: image x:9 cannot be pulled on node ghost (ErrImagePull"),
    "unschedulable": ({"phase": "Pending", "conditions": [
                          {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]},
                      "why: img-worker-0 cannot be scheduled: 0/3 nodes are available: 3 "
                      "Insufficient nvidia.com/gpu."),
    "oom": ({"phase": "Failed", "containerStatuses": [{"name": "worker", "restartCount": 0,
             "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]},
            "why: img-worker-0 was killed out of memory (memory limit 2Gi) on node ghost"),
    "evicted": ({"phase": "Failed", "reason": "Evicted",
                 "message": "The node was low on resource: memory."},
                "why: img-worker-0 was evicted on node ghost: The node was low on resource"),
}


def a_worker_that(k8s, status: dict, unscheduled: bool):
    from mpijob.jobspec import names

    srv = k8s.server()
    spec = {"containers": [{"name": "worker", "image": "x:9",
                            "resources": {"limits": {"memory": "2Gi"}}}]}
    if not unscheduled:
        spec["nodeName"] = "ghost"  # a node no kubelet serves: only this test writes status
    else:
        spec["schedulerName"] = "nobody"  # no scheduler binds it
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "img-worker-0", "namespace": "default",
                             "labels": {**names.job_labels("img"), names.LABEL_INDEX: "0",
                                        names.LABEL_ROLE: names.ROLE_WORKER}},
                "spec": spec})
    srv.store.mutate("/pods", "default", "img-worker-0", lambda p: p.__setitem__("status", status))


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_get_gives_the_one_cause_with_its_fix(k8s, cause):
    status, line = CAUSES[cause]
    a_worker_that(k8s, status, unscheduled=cause == "unschedulable")
    got = hvdk8s(k8s, "get", "img")
    assert [x for x in got.stdout.splitlines() if x.startswith("why:")][0].startswith(line)
    if status["phase"] == "Failed":
        waited = hvdk8s(k8s, "wait", "img", "--timeout", "10")
        assert waited.exit_code == 1 and line in waited.output
        followed = hvdk8s(k8s, "logs", "-f", "img")
        assert followed.exit_code == 1 and line.removeprefix("why: ") in followed.output


# --- a finished job's rate, from the pods list: the launcher's termination message ----------
@pytest.mark.parametrize("mode", ["pods", "operator", "trainjob"])
def test_list_shows_an_ended_jobs_rate_from_its_termination_message(k8s, mode, api_requests):
    from kubesim.kubelet import Run
    from mpijob.k8s import render_trainjob as trainjob

    srv = k8s.server()
    spec = build_spec(name="done", namespace=k8s.namespace, image=k8s.image, workers=1,
                      command=("python", "train.py"))
    if mode == "operator":
        srv.install_mpi_operator()
    if mode == "trainjob":
        srv.install_trainer()
        srv.create(trainjob.horovod_runtime(spec))
    backend = k8s.backend()
    srv.script_pod(r"done-(worker|node)-.*", exit_code=None)
    srv.script_pod(r"done-launcher-.*", runs=[Run(
        ["[1,0]<stdout>:total images/sec: 1.0"], exit_code=0,
        # what the launch script's filter wrote: the log above is not read
        termination_message="total images/sec: 321.5\n")])
    create_job(backend, spec, None, mode=mode, schedule_timeout=20)
    srv.wait_for(lambda: any(r.name == "done" and r.done for r in backend.list()), timeout=30)
    api_requests.mark()
    (row,) = [r for r in backend.list() if r.name == "done"]
    requests = api_requests.since()
    assert row.images_per_sec == 321.5
    assert not [r for r in requests if r.path.endswith("/log") or r.method != "GET"]


# --- wait: a stall ends it with exit 3 ------------------------------------------------------
def stuck_lines(job: str) -> list[str]:
    long_ago = time.time() - 120  # the last step and rank 1's last heartbeat
    lines = [report("progress", r, step=20, total_steps=100, images_per_step=64,
                    images_per_sec=640.0, images_per_sec_avg=620.0, compute_time=0.09,
                    warmup=False, host=f"{job}-worker-{r}", time=long_ago) for r in (0, 1)]
    lines.append(report("heartbeat", 0, step=20, every=2.0, host=f"{job}-worker-0"))
    return lines


def test_wait_ends_with_3_on_a_stall_naming_the_silent_ranks_pod(k8s):
    """An image without python3 runs no monitor: its probe never passes, and `wait` finds
    the stall in the launcher's log, read at a low rate."""
    srv = k8s.server()
    worker1 = "stuck-worker-1"
    k8s.script_launcher("stuck", stuck_lines("stuck"), exit_code=None,
                        probe=lambda _: (False, NO_MONITOR))
    srv.script_pod(r"stuck-worker-\d+", exit_code=None)
    spec = build_spec(name="stuck", namespace=k8s.namespace, image=k8s.image, workers=2,
                      command=("python", "train.py"))
    create_job(k8s.backend(), spec, None, schedule_timeout=20)
    waited = hvdk8s(k8s, "wait", "stuck", "--timeout", "30")
    assert waited.exit_code == 3, waited.output
    assert f"not reporting: rank 1 (pod {worker1}" in waited.output


def launcher_pod(k8s, backend, job: str) -> dict | None:
    pods = backend.client.items(POD, k8s.namespace, label_selector=names.job_selector(job))
    return next((p for p in pods if p["metadata"]["name"].startswith(f"{job}-launcher")), None)


def test_wait_on_a_healthy_job_reads_no_log_while_the_probe_passes(k8s, api_requests):
    srv, backend = running_with_reports(k8s)
    srv.wait_for(lambda: probe_says_progressing(launcher_pod(k8s, backend, "vgg16")), timeout=30)
    api_requests.mark()
    with pytest.raises(Exception, match="still Running"):
        backend.wait("vgg16", timeout=2)
    assert [r for r in api_requests.since() if r.path.endswith("/log")] == []


def test_wait_reads_the_log_only_once_the_probe_says_stalled(k8s, api_requests):
    """Steady progress: the probe passes and `wait` reads no log; the monitor marks a stall:
    the probe fails with the silent ranks, the kubelet makes the launcher not Ready, and
    `wait` reads the log for the ranks' lines and ends with the stall."""
    srv = k8s.server()
    srv.kubelet.probe_scale = 0.1  # a probe every second
    stalled = threading.Event()
    said = "hvdk8s: stalled: no step for 2m00s (threshold 6s); not reporting: rank 1"

    def probe(logs_for):
        return (False, said) if stalled.is_set() else watching(logs_for)

    k8s.script_launcher("stall", stuck_lines("stall"), exit_code=None, probe=probe)
    srv.script_pod(r"stall-worker-\d+", exit_code=None)
    backend = k8s.backend()
    spec = build_spec(name="stall", namespace=k8s.namespace, image=k8s.image, workers=2,
                      command=("python", "train.py"))
    create_job(backend, spec, None, schedule_timeout=20)
    srv.wait_for(lambda: probe_says_progressing(launcher_pod(k8s, backend, "stall")), timeout=30)
    api_requests.mark()
    ended: list = []
    waiter = threading.Thread(target=lambda: ended.append(backend.wait("stall", timeout=60)))
    waiter.start()
    waiter.join(3)  # steady: the probe passes
    assert waiter.is_alive()
    assert [r for r in api_requests.since() if r.path.endswith("/log")] == []
    stalled.set()
    waiter.join(30)
    assert not waiter.is_alive() and ended[0].progress.stalled
    assert "not reporting: rank 1 (pod stall-worker-1" in ended[0].why
    assert [r for r in api_requests.since() if r.path.endswith("/log")] != []
    events = backend.client.items(EVENT, k8s.namespace)
    assert any(e["reason"] == "Unhealthy" and e["message"] == f"Readiness probe failed: {said}"
               and e["involvedObject"]["name"].startswith("stall-launcher") for e in events)


def test_a_job_its_monitor_ended_for_a_stall_is_failed_stalled_and_wait_exits_3(k8s):
    """--stall-timeout: the launcher pod's monitor ended the launch line and left the reason
    in the termination message (mpijob/k8s/podscripts/hvdk8s_monitor.py)."""
    srv = k8s.server()
    ended = ("no step for 5m01s (threshold 6s); not reporting: rank 1 (host ended-worker-1) "
             "(--stall-timeout 300s); the launch line was ended")
    srv.script_pod(r"ended-launcher-.*", runs=[Run(
        ["hvdk8s: starting: mpirun ...", STALL_MESSAGE_PREFIX + ended,
         "mpirun: Forwarding signal 15 to job"], exit_code=STALL_EXIT,
        termination_message=STALL_MESSAGE_PREFIX + ended + "\n")])
    srv.script_pod(r"ended-worker-\d+", exit_code=None)
    spec = build_spec(name="ended", namespace=k8s.namespace, image=k8s.image, workers=2,
                      command=("python", "train.py"), stall_timeout=300)
    create_job(k8s.backend(), spec, None, schedule_timeout=20)
    waited = hvdk8s(k8s, "wait", "ended", "--timeout", "30")
    assert waited.exit_code == 3, waited.output
    status = k8s.backend().get("ended")
    assert (status.phase, status.reason, status.message) == ("Failed", STALLED_REASON, ended)
    assert status.why == f"stalled: {ended}"
