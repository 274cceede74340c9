"""The rehearsal's model of the Job controller for Indexed Jobs (tests/rehearsal/jobcontroller.py),
with pods that only report how they ended: one pod per pending index up to parallelism, the
back-off before a replacement, backoffLimit and backoffLimitPerIndex, and pods past the
completions removed."""

from __future__ import annotations

from tests.rehearsal.jobcontroller import IndexedJobController


class FakePod:
    def __init__(self, obj: dict) -> None:
        self.obj, self.name = obj, obj["metadata"]["name"]
        self.code: int | None = None
        self.deleted = False

    def exit_code(self) -> int | None:
        return self.code

    def kill(self, grace: float, reason: str) -> None:
        self.deleted = True


def _job(completions: int, parallelism: int | None = None, **spec) -> dict:
    return {"metadata": {"name": "demo-worker", "namespace": "default", "uid": "u"},
            "spec": {"completionMode": "Indexed", "completions": completions,
                     "parallelism": parallelism or completions, "backoffLimit": 6,
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"subdomain": "demo-worker",
                                           "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c"}]}}, **spec}}


def _controller(job: dict, now: list[float]) -> IndexedJobController:
    return IndexedJobController(read_job=lambda: job, start_pod=FakePod,
                                clock=lambda: now[0])


def _live(c: IndexedJobController) -> list[str]:
    return sorted(p.obj["spec"]["hostname"] for p in c.active())


def test_one_pod_per_index_named_and_labelled_as_the_job_controller_does():
    c = _controller(_job(3, parallelism=2), [0.0])
    c.sync()
    assert _live(c) == ["demo-worker-0", "demo-worker-1"]  # parallelism bounds it
    pod = c.pods[0]
    assert pod.name.startswith("demo-worker-0-") and len(pod.name) == len("demo-worker-0-") + 5
    assert pod.obj["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
    assert pod.obj["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    pod.code = 0  # index 0 succeeded: index 2 starts, 0 is not run again
    c.sync()
    assert _live(c) == ["demo-worker-1", "demo-worker-2"]


def test_a_failed_pod_is_replaced_after_the_back_off_which_doubles():
    now = [0.0]
    c = _controller(_job(2), now)
    c.sync()
    c.pods[1].code = 137
    c.sync()
    assert _live(c) == ["demo-worker-0"]  # 10 s back-off after the first failure
    now[0] = 10.5
    c.sync()
    assert _live(c) == ["demo-worker-0", "demo-worker-1"] and len(c.pods) == 3
    c.pods[2].code = 137
    now[0] = 11.0
    c.sync()  # the second failure in a row, seen at 11 s: 20 s of back-off
    now[0] = 25.0
    c.sync()
    assert _live(c) == ["demo-worker-0"]
    now[0] = 31.5
    c.sync()
    assert _live(c) == ["demo-worker-0", "demo-worker-1"]


def test_past_the_backoff_limit_the_job_fails_and_its_pods_are_deleted():
    now = [0.0]
    c = _controller(_job(2, backoffLimit=0), now)
    c.sync()
    c.pods[0].code = 1
    c.sync()
    assert c.failed_job == "BackoffLimitExceeded" and c.pods[1].deleted and _live(c) == []


def test_with_a_backoff_limit_per_index_only_that_index_stops_being_retried():
    now = [0.0]
    c = _controller(_job(2, backoffLimitPerIndex=0), now)
    c.sync()
    c.pods[0].code = 1
    now[0] = 100.0
    c.sync()
    assert c.failed_job is None and _live(c) == ["demo-worker-1"]


def test_scaled_down_pods_past_the_completions_are_deleted_and_not_counted():
    job = _job(3)
    c = _controller(job, [0.0])
    c.sync()
    job["spec"].update(completions=2, parallelism=2)
    c.sync()
    assert _live(c) == ["demo-worker-0", "demo-worker-1"]
    (gone,) = [p for p in c.pods if p.obj["spec"]["hostname"] == "demo-worker-2"]
    assert gone.deleted
    job["spec"].update(completions=3, parallelism=3)  # grown again: a new pod for index 2
    c.sync()
    assert _live(c) == ["demo-worker-0", "demo-worker-1", "demo-worker-2"]
