"""How often `wait` reads the launcher's log for a stall on Kubernetes (pure)."""

from __future__ import annotations

from launcher.backends.kubernetes.stallcheck import IDLE_MAX_SECONDS, MIN_SECONDS, StallCheck
from launcher.formats.job_progress import JobProgress


def progress(step_time: float | None) -> JobProgress:
    return JobProgress(step=5, total_steps=10, images_per_sec=1.0, images_per_sec_avg=1.0,
                       predicted_images_per_sec=None, last_step_age=0.0,
                       expected_step_time=step_time, eta_seconds=None, warmup=False)


def test_first_look_at_once_then_three_step_times_at_least_thirty_seconds_apart():
    check = StallCheck()
    assert check.due(0.0) and check.seconds_left(0.0) is None
    check.looked(progress(0.5), 0.0)
    assert not check.due(29.0) and check.due(MIN_SECONDS)
    check.looked(progress(40.0), 100.0)
    assert check.seconds_left(100.0) == 120.0


def test_a_program_that_does_not_report_is_looked_at_ever_more_rarely():
    check, now, pauses = StallCheck(), 0.0, []
    for _ in range(7):
        check.looked(None, now)
        pauses.append(check.seconds_left(now))
        now += pauses[-1]
    assert pauses == [30.0, 60.0, 120.0, 240.0, 480.0, IDLE_MAX_SECONDS, IDLE_MAX_SECONDS]
    check.looked(progress(1.0), now)  # it reports now: back to the usual pace
    assert check.seconds_left(now) == MIN_SECONDS


def test_wait_reports_one_image_pull_failure_once_not_at_each_back_off():
    from launcher.backends.base import JobStatus
    from launcher.backends.kubernetes.waiting import what_it_waits_for

    def pending(why: str) -> JobStatus:
        return JobStatus(name="bad", namespace="default", backend="kubernetes",
                         phase="Pending", why=why)

    cause = "bad-launcher-x: image r.invalid/n:0 cannot be pulled on node gpu-node-0"
    pulling = pending(f"{cause} (ErrImagePull: no such host) (fix: check the image)")
    backing_off = pending(f"{cause} (ImagePullBackOff: Back-off pulling image) (fix: check)")
    assert what_it_waits_for(pulling) == what_it_waits_for(backing_off)
    assert what_it_waits_for(pulling) != what_it_waits_for(
        pending("bad-worker-0 cannot be scheduled: 0/2 nodes are available"))


def launcher(probe: dict | None, ready: bool, state: str = "running") -> dict:
    container = {"name": "launcher", **({"readinessProbe": probe} if probe else {})}
    return {"spec": {"containers": [container]},
            "status": {"containerStatuses": [{"name": "launcher", "ready": ready,
                                              "state": {state: {}}}]}}


def test_only_the_monitors_passing_probe_says_the_ranks_progress():
    from launcher.backends.kubernetes.stallcheck import probe_says_progressing
    from mpijob.k8s.monitor import readiness_probe

    probe = readiness_probe()
    assert probe_says_progressing(launcher(probe, ready=True))
    assert not probe_says_progressing(launcher(probe, ready=False))  # stalled, or no monitor
    assert not probe_says_progressing(launcher(probe, ready=False, state="terminated"))
    # a probe that is not the monitor's (a user's pod patch) says nothing of progress
    assert not probe_says_progressing(launcher({"tcpSocket": {"port": 22}}, ready=True))
    assert not probe_says_progressing(launcher(None, ready=True))
    assert not probe_says_progressing(None)


def test_a_failing_probe_looks_at_once():
    check = StallCheck()
    check.looked(None, 0.0)
    assert not check.due(10.0)
    check.reset()
    assert check.due(10.0)
