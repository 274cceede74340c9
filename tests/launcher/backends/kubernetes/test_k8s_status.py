"""Phase rules of a Kubernetes job, from its objects (pure: no server)."""

from __future__ import annotations

import json

from launcher.backends.kubernetes import status as st
from mpijob.jobspec import names

JOB = "vgg16"


def pod(name: str, role: str, phase: str = "Running", *, node: str | None = "gpu-node-0",
        index: int | None = None, gpus: str | None = None, waiting: dict | None = None,
        terminated: dict | None = None, unscheduled: str | None = None,
        created: str = "2024-01-01T00:00:00Z", restarts: int = 0) -> dict:
    labels = {**names.job_labels(JOB), names.LABEL_ROLE: role}
    if index is not None:
        labels[names.LABEL_INDEX] = str(index)
    meta = {"name": name, "namespace": "default", "labels": labels, "uid": f"uid-{name}",
            "creationTimestamp": created}
    if gpus:
        meta["annotations"] = {names.ANNOTATION_GPUS: gpus}
    state = {"running": {}} if phase == "Running" else {}
    if waiting:
        state = {"waiting": waiting}
    if terminated:
        state = {"terminated": terminated}
    status: dict = {"phase": phase, "containerStatuses": [
        {"name": role, "state": state, "restartCount": restarts}] if state else []}
    if unscheduled is not None:
        node = None
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": unscheduled}]
    spec = {"containers": [{"name": role}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": status}


def launcher(phase="Running", **kw):
    return pod(f"{JOB}-launcher-abcde", names.ROLE_LAUNCHER, phase, **kw)


def worker(i, phase="Running", **kw):
    return pod(names.worker(JOB, i), names.ROLE_WORKER, phase, index=i, **kw)


def root(*, suspend=False, conditions=(), workers=2, placement=None, policy="Running",
         prediction=None, succeeded=0):
    spec = {"name": JOB, "workers": workers, "gpus_per_worker": 1,
            "run_policy": {"clean_pod_policy": policy}}
    ann = {names.ANNOTATION_SPEC: json.dumps(spec)}
    if placement is not None:
        ann[names.ANNOTATION_PLACEMENT] = json.dumps(placement)
    if prediction is not None:
        ann[names.ANNOTATION_PREDICTION] = json.dumps(prediction)
    status = {"conditions": [{"type": t, "status": "True", "reason": r, "message": m}
                             for t, r, m in conditions]}
    if succeeded:
        status["succeeded"] = succeeded
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": names.launcher(JOB), "namespace": "default",
                         "labels": names.job_labels(JOB), "annotations": ann,
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"suspend": suspend}, "status": status}


def status(pods, r=None, **kw):
    return st.job_status(JOB, "default", root=root() if r is None else r, pods=pods, **kw)


def test_running_only_when_launcher_and_every_worker_run():
    assert status([launcher(), worker(0), worker(1)]).phase == "Running"
    # The MPI operator says Running here; one worker is not even scheduled.
    s = status([launcher(), worker(0),
                worker(1, "Pending", unscheduled="0/2 nodes are available: 2 Insufficient "
                                                 "nvidia.com/gpu.")])
    assert s.phase == "Pending" and s.reason == "Unschedulable"
    assert s.message == ("vgg16-worker-1 Pending: 0/2 nodes are available: 2 Insufficient "
                         "nvidia.com/gpu.")


def test_failed_scheduling_event_is_preferred_to_the_condition():
    event = {"involvedObject": {"kind": "Pod", "name": "vgg16-worker-1"},
             "reason": "FailedScheduling", "lastTimestamp": "2024-01-01T00:01:00Z",
             "message": "0/2 nodes are available: 1 node(s) were unschedulable."}
    s = status([launcher(), worker(0), worker(1, "Pending", unscheduled="old news")],
               events=[event])
    assert s.message == "vgg16-worker-1 Pending: 0/2 nodes are available: 1 node(s) were unschedulable."


def test_image_pull_errors_are_named():
    bad = worker(1, "Pending", waiting={"reason": "ImagePullBackOff",
                                        "message": 'Back-off pulling image "nope:1"'})
    s = status([launcher("Pending"), worker(0), bad])
    assert (s.phase, s.reason) == ("Pending", "ImagePullBackOff")
    assert 'vgg16-worker-1 Pending: Back-off pulling image "nope:1"' in s.message


def test_a_failed_worker_fails_the_job_even_while_the_launcher_runs():
    s = status([launcher(), worker(0),
                worker(1, "Failed", terminated={"exitCode": 137, "reason": "OOMKilled"})])
    assert (s.phase, s.reason) == ("Failed", "WorkerFailed")
    assert s.message == "vgg16-worker-1 failed (exit 137)"
    assert st.failing_pod([launcher(), worker(1, "Failed")])["metadata"]["name"] == "vgg16-worker-1"


def test_job_conditions_decide_success_and_failure():
    done = root(conditions=[("Complete", "CompletionsReached", "")])
    assert status([launcher("Succeeded")], done).phase == "Succeeded"
    failed = root(conditions=[("Failed", "BackoffLimitExceeded", "Job has reached the "
                                                                 "specified backoff limit")])
    s = status([launcher("Failed", terminated={"exitCode": 1})], failed)
    assert (s.phase, s.reason) == ("Failed", "BackoffLimitExceeded")


def test_suspended_root_waits_for_the_gang():
    s = status([worker(0), worker(1)], root(suspend=True))
    assert (s.phase, s.reason) == ("Pending", "WaitingForGang")


def test_a_retried_launcher_is_not_a_failure_yet():
    old = launcher("Failed", terminated={"exitCode": 1}, created="2024-01-01T00:00:00Z")
    new = pod(f"{JOB}-launcher-fghij", names.ROLE_LAUNCHER, "Running",
              created="2024-01-01T00:01:00Z")
    s = status([old, new, worker(0), worker(1)])
    assert s.phase == "Running"
    assert [r.name for r in s.replicas[:2]] == [f"{JOB}-launcher-fghij", f"{JOB}-launcher-abcde"]
    assert st.current_launcher([new, old])["metadata"]["name"] == f"{JOB}-launcher-fghij"


def test_a_worker_that_vanished_before_the_end_fails_the_job():
    s = status([launcher(), worker(0)])
    assert (s.phase, s.reason) == ("Failed", "WorkerLost")
    assert "vgg16-worker-1" in s.message


def test_placement_result_and_prediction_are_reported():
    lines = ["step 10", "total images/sec: 987.6"]
    s = status([launcher("Succeeded"), worker(0, gpus="0,1,2,3", node="gpu-node-1")],
               root(workers=4, placement=[{"node": "gpu-node-1", "gpus": [0, 1, 2, 3]}],
                    prediction={"images_per_sec": 1000.0}),
               launcher_log=lines)
    assert s.phase == "Succeeded"
    assert s.placement == [{"pod": "vgg16-worker-0", "node": "gpu-node-1", "gpus": [0, 1, 2, 3]}]
    assert (s.images_per_sec, s.predicted_images_per_sec) == (987.6, 1000.0)
    assert (s.workers, s.gpus_per_worker) == (4, 1)


def test_the_rate_recorded_on_the_root_is_reported_without_a_log():
    recorded = root(workers=1)
    recorded["metadata"].setdefault("annotations", {})[st.ANNOTATION_IMAGES_PER_SEC] = "400.0"
    pods = [launcher("Succeeded"), worker(0)]
    assert st.job_status(JOB, "default", root=recorded, pods=pods).images_per_sec == 400.0
    assert [r.images_per_sec for r in st.group_statuses([recorded], pods)] == [400.0]
    # The launcher's own log, when read, is the measurement itself.
    assert st.job_status(JOB, "default", root=recorded, pods=pods,
                         launcher_log=["total images/sec: 401.5"]).images_per_sec == 401.5
    for junk in ("fast", "nan", ""):
        recorded["metadata"]["annotations"][st.ANNOTATION_IMAGES_PER_SEC] = junk
        assert st.job_status(JOB, "default", root=recorded, pods=pods).images_per_sec is None


def test_operator_mode_reads_mpijob_conditions():
    mpijob = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
              "metadata": {"name": JOB, "namespace": "default", "labels": names.job_labels(JOB)},
              "status": {"conditions": [{"type": "Created", "status": "True"},
                                        {"type": "Running", "status": "True"}]}}
    # The operator says Running; a worker is unscheduled, so hvdk8s says Pending.
    s = st.job_status(JOB, "default", root=mpijob, mode="operator",
                      pods=[launcher(), worker(0), worker(1, "Pending", unscheduled="no GPUs")])
    assert (s.phase, s.mode) == ("Pending", "operator")
    assert st.job_status(JOB, "default", root=mpijob, mode="operator", pods=[]).reason == \
        "WaitingForOperator"
    mpijob["status"]["conditions"].append({"type": "Succeeded", "status": "True"})
    assert st.job_status(JOB, "default", root=mpijob, mode="operator", pods=[]).phase == "Succeeded"


def test_group_statuses_builds_one_row_per_job_from_labels():
    other = pod("other-worker-0", names.ROLE_WORKER, index=0)
    other["metadata"]["labels"][names.LABEL_JOB] = "other"
    rows = st.group_statuses([root()], [launcher(), worker(0), worker(1), other])
    assert [(r.name, r.phase) for r in rows] == [("other", "Pending"), ("vgg16", "Running")]


# --- ranks mapped to their pods: the host each report carries is its pod's name -----------------
def reports_from(rank: int, host: str, *, at: float, step: int, compute: float) -> list[str]:
    progress = {"kind": "progress", "rank": rank, "time": at, "host": host, "step": step,
                "total_steps": 100, "images_per_step": 64, "images_per_sec": 64.0,
                "images_per_sec_avg": 64.0, "compute_time": compute, "warmup": False}
    return ["HVDK8S_REPORT " + json.dumps(progress)]


def ranked_pods():
    return [launcher(), worker(0, gpus="0,1", node="gpu-node-0"),
            worker(1, gpus="2,3", node="gpu-node-7")]


def test_a_straggler_is_named_with_its_pod_node_and_gpus():
    log = []
    for i, at in enumerate((100.0, 105.0, 110.0), 1):
        log += reports_from(0, names.worker(JOB, 0), at=at, step=10 * i, compute=1.0)
        log += reports_from(1, f"{names.worker(JOB, 1)}.{JOB}.default.svc", at=at,
                            step=10 * i, compute=2.0)
    s = status(ranked_pods(), launcher_log=log, now=111.0)
    assert s.progress.problems() == [
        f"straggler: rank 1 (pod {JOB}-worker-1, node gpu-node-7, GPUs 2,3) computes 2s per "
        "step against the other ranks' median 1s (2.00x)"]
    row = {r.name: r for r in s.replicas}[names.worker(JOB, 1)]
    assert row.message == "rank 1 straggler: 2s compute per step, others 1s"


def test_a_stall_names_the_silent_ranks_pod_and_shows_its_tagged_lines_or_where_to_look():
    log = reports_from(0, names.worker(JOB, 0), at=100.0, step=10, compute=1.0)
    log += reports_from(1, names.worker(JOB, 1), at=100.0, step=10, compute=1.0)
    beat = {"kind": "heartbeat", "rank": 0, "time": 160.0, "host": names.worker(JOB, 0),
            "step": 10, "every": 2.0}
    log.append("HVDK8S_REPORT " + json.dumps(beat))
    s = status(ranked_pods(), launcher_log=log, now=161.0)
    assert s.progress.stalled and s.progress.silent_ranks == [1]
    assert s.why.endswith(f"not reporting: rank 1 (pod {JOB}-worker-1, node gpu-node-7, "
                          "GPUs 2,3)")
    assert s.log_tail == [
        "[rank 1] its output is not tagged with its rank in the launcher's log (mpirun "
        f"without --tag-output): kubectl describe pod {JOB}-worker-1; "
        f"kubectl logs {JOB}-launcher-abcde"]
    tagged = [*log, "[1,1]<stdout>:loading shard 7", "[1,0]<stdout>:epoch 1"]
    s = status(ranked_pods(), launcher_log=tagged, now=161.0)
    assert s.log_tail == ["[rank 1] loading shard 7"]
