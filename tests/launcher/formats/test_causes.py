"""One cause per kind of trouble, the single `why:` line `get` prints (pure: statuses from
pod objects as the API server returns them, and from the launcher's log)."""

from __future__ import annotations

import pytest

from launcher.backends.base import JobStatus, ReplicaStatus
from launcher.backends.kubernetes import status as st
from launcher.formats.causes import log_cause, why
from launcher.formats.job_progress import summarize
from tests.launcher.backends.kubernetes.test_k8s_status import launcher, root, worker


def k8s(pods, *, log=(), conditions=()):
    return st.job_status("vgg16", "default", root=root(conditions=conditions), pods=pods,
                         launcher_log=list(log))


def test_unschedulable_gives_the_schedulers_message():
    s = k8s([launcher("Pending", unscheduled="0/4 nodes are available: 4 Insufficient "
                      "nvidia.com/gpu."), worker(0)])
    assert s.why == ("vgg16-launcher-abcde cannot be scheduled: 0/4 nodes are available: 4 "
                     "Insufficient nvidia.com/gpu. (fix: free or add the resources named, or "
                     "relax --selector/--toleration/--gputopology)")


def test_an_image_that_does_not_pull_names_image_and_node():
    s = k8s([launcher(), worker(0, "Pending", waiting={
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "horovod/horovod:0.99"'})])
    assert s.why.startswith("vgg16-worker-0: image horovod/horovod:0.99 cannot be pulled on "
                            "node gpu-node-0 (ImagePullBackOff")


def test_oom_killed_names_the_memory_limit():
    pod = worker(1, "Failed", terminated={"exitCode": 137, "reason": "OOMKilled"})
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "8Gi"}}
    s = k8s([launcher(), worker(0), pod])
    assert s.why == ("vgg16-worker-1 was killed out of memory (memory limit 8Gi) on node "
                     "gpu-node-0 (fix: raise --memory, or lower --batch-size)")


def test_evicted():
    pod = worker(0, "Failed")
    pod["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    s = k8s([launcher(), pod])
    assert s.why.startswith("vgg16-worker-0 was evicted on node gpu-node-0: The node was low "
                            "on resource: memory.")


def test_preempted():
    pod = worker(0, "Failed")
    pod["status"].update(reason="Preempted", message="Preempted in order to admit critical pod")
    s = k8s([launcher(), pod])
    assert s.why.startswith("vgg16-worker-0 was preempted on node gpu-node-0")


def test_a_gang_not_admitted_gives_the_schedulers_reason():
    # as queue.py marks it: its pods look unschedulable too, but the gang is the cause
    s = JobStatus(name="j", namespace="d", backend="kubernetes", phase="Queued",
                  reason="QueuedByKueue", message="Workload: couldn't assign flavors to pod "
                  "set workers: insufficient quota for nvidia.com/gpu",
                  replicas=[ReplicaStatus("j-worker-0", "worker", "Pending",
                                          reason="Unschedulable", message="gated")])
    assert why(s) == ("the gang is not admitted (QueuedByKueue): Workload: couldn't assign "
                      "flavors to pod set workers: insufficient quota for nvidia.com/gpu "
                      "(fix: free quota or capacity in the queue, or ask for fewer GPUs)")


def test_the_operators_condition_is_the_cause_when_nothing_else_is():
    s = k8s([launcher("Failed", terminated={"exitCode": 1})],
            conditions=[("Failed", "MPIJobFailed", "launcher failed: BackoffLimitExceeded")])
    assert s.why == "MPIJobFailed: launcher failed: BackoffLimitExceeded"


LOGS = {
    "ssh refused": (["ssh: connect to host vgg16-worker-1.vgg16 port 22: Connection refused"],
                    "ssh to worker vgg16-worker-1.vgg16 refused on port 22: its sshd is not up"),
    "host key": (["Host key verification failed.", "ORTE was unable to reliably start one or "
                  "more daemons."], "ssh to a worker failed: host key verification failed"),
    "open mpi start": (["ORTE was unable to reliably start one or more daemons."],
                       "mpirun could not start its daemons on the workers (ORTE)"),
    "prte start": (["PRTE was unable to reliably start one or more daemons."],
                   "mpirun could not start its daemons on the workers (PRTE)"),
    "nccl": (["[1,0]<stderr>:vm:123:456 [0] NCCL WARN Net : Connect to 10.0.0.2<1234> failed"],
             "NCCL failed: Net : Connect to 10.0.0.2<1234> failed"),
    "horovod stall": (["[2024-01-01 00:00:00.000000: W horovod/common/stall_inspector.cc:107] "
                       "One or more tensors were submitted to be reduced, gathered or "
                       "broadcasted by subset of ranks and are waiting for remainder of "
                       "ranks for more than 60 seconds. This may indicate that different "
                       "ranks are trying to submit different tensors or that only subset of "
                       "ranks is submitting tensors, which will cause deadlock. ",
                       "Missing ranks:", "1: [DistributedGradientTape_Allreduce/...]"],
                      "Horovod stall: some ranks stopped submitting tensors (missing ranks: 1)"),
    "traceback": (["[1,1]<stderr>:Traceback (most recent call last):",
                   '[1,1]<stderr>:  File "train.py", line 3, in <module>',
                   "[1,1]<stderr>:ModuleNotFoundError: No module named 'horovod'"],
                  "the program raised ModuleNotFoundError: No module named 'horovod'"),
}


@pytest.mark.parametrize("case", sorted(LOGS))
def test_a_recognised_log_pattern_is_the_cause_of_a_failed_job(case):
    lines, expected = LOGS[case]
    assert log_cause(lines).startswith(expected)
    s = JobStatus(name="j", namespace="d", backend="local", phase="Failed",
                  reason="rank failed", message="rank 1 exited with code 1",
                  replicas=[ReplicaStatus("j-rank-1", "rank", "Failed", exit_code=1)],
                  log_tail=["unrelated", *lines])
    assert why(s).startswith(expected)


def test_a_stall_is_the_cause_of_a_running_job_that_does_not_step():
    reports = [{"kind": "progress", "rank": r, "time": 100.0, "step": 4, "total_steps": 60,
                "images_per_step": 16, "images_per_sec": 16.0, "images_per_sec_avg": 16.0}
               for r in (0, 1)] + [{"kind": "heartbeat", "rank": 0, "time": 120.0, "step": 4}]
    s = JobStatus(name="j", namespace="d", backend="local", phase="Running",
                  progress=summarize(reports, 121.0, ranks=2))
    assert why(s) == "stalled: no step for 21s (threshold 6s); not reporting: rank 1"


def test_a_job_that_runs_or_succeeded_has_no_cause():
    assert why(JobStatus(name="j", namespace="d", backend="local", phase="Succeeded")) is None
    assert k8s([launcher(), worker(0), worker(1)]).why is None
