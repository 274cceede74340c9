"""A running job's progress through the Kubernetes API: the ranks' report lines in the
launcher pod's log, which `get` reads already (no extra request) and `list` once per
running job; `logs` hides them. Against the test API server."""

from __future__ import annotations

import json
import re
import time

import pytest

from launcher.formats.rank_reports import REPORT_PREFIX
from mpijob.jobspec.spec import build_spec
from tests.k8s_env import hvdk8s
from tests.launcher.backends.contract_calls import create_job


def report(kind: str, rank: int, **fields) -> str:
    return f"[1,{rank}]<stdout>:" + REPORT_PREFIX + json.dumps(
        {"kind": kind, "rank": rank, "time": time.time(), **fields})


def progress(rank: int, step: int) -> str:
    return report("progress", rank, step=step, total_steps=100, images_per_step=64,
                  images_per_sec=640.0, images_per_sec_avg=620.0, compute_time=0.09,
                  warmup=False)


def running_with_reports(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    k8s.script_launcher("vgg16", ["[1,0]<stdout>:Running warm up", progress(0, 20),
                                  progress(1, 20), report("heartbeat", 0, step=20)],
                        exit_code=None)
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


# --- wait: a stall ends it with exit 3, read from the launcher's log at a low rate -----------
def test_wait_ends_with_3_on_a_stall_naming_the_silent_ranks_pod(k8s):
    srv = k8s.server()
    long_ago = time.time() - 120  # the last step and rank 1's last heartbeat
    worker1 = "stuck-worker-1"
    lines = [report("progress", r, step=20, total_steps=100, images_per_step=64,
                    images_per_sec=640.0, images_per_sec_avg=620.0, compute_time=0.09,
                    warmup=False, host=f"stuck-worker-{r}", time=long_ago) for r in (0, 1)]
    lines.append(report("heartbeat", 0, step=20, every=2.0, host="stuck-worker-0"))
    k8s.script_launcher("stuck", lines, exit_code=None)
    srv.script_pod(r"stuck-worker-\d+", exit_code=None)
    spec = build_spec(name="stuck", namespace=k8s.namespace, image=k8s.image, workers=2,
                      command=("python", "train.py"))
    create_job(k8s.backend(), spec, None, schedule_timeout=20)
    waited = hvdk8s(k8s, "wait", "stuck", "--timeout", "30")
    assert waited.exit_code == 3, waited.output
    assert f"not reporting: rank 1 (pod {worker1}" in waited.output


def test_wait_on_a_healthy_job_reads_the_log_once_as_it_starts_running(k8s, api_requests):
    srv, backend = running_with_reports(k8s)
    api_requests.mark()
    with pytest.raises(Exception, match="still Running"):
        backend.wait("vgg16", timeout=2)
    reads = [r for r in api_requests.since() if r.path.endswith("/log")]
    assert len(reads) == 1  # the next look is 30 s on (stallcheck.MIN_SECONDS)
