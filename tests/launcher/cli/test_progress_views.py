"""What get, list -o wide, logs -f and wait print of a running job's progress and of the
cause of a failure (a stand-in backend: the views, not the backends, are under test)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from launcher.backends.base import JobStatus, ReplicaStatus
from launcher.cli import jobs
from launcher.cli.app import app
from launcher.cli.common import EXIT_FAILED, EXIT_STALLED, exit_for_status
from launcher.formats.causes import why
from launcher.formats.job_progress import summarize
from launcher.formats.rank_reports import for_people

T0 = 1_000_000.0


def running(*, stalled: bool = False) -> JobStatus:
    reports = [{"kind": "progress", "rank": r, "time": T0, "step": 30, "total_steps": 60,
                "images_per_step": 16, "images_per_sec": 8.0, "images_per_sec_avg": 7.9,
                "compute_time": 1.8} for r in (0, 1)]
    reports.append({"kind": "heartbeat", "rank": 0, "time": T0 + (20 if stalled else 1),
                    "step": 30})
    status = JobStatus(name="bench", namespace="default", backend="local", phase="Running",
                       workers=2, predicted_images_per_sec=10.0,
                       replicas=[ReplicaStatus(f"bench-rank-{r}", "rank", "Running")
                                 for r in (0, 1)])
    status.progress = summarize(reports, T0 + (21 if stalled else 2), ranks=2,
                                predicted_images_per_sec=10.0)
    status.why = why(status)
    return status


def failed() -> JobStatus:
    status = JobStatus(name="bench", namespace="default", backend="local", phase="Failed",
                       reason="rank failed", message="rank 1 exited with code 1",
                       log_tail=["Traceback (most recent call last):",
                                 "ValueError: bad learning rate"])
    status.why = why(status)
    return status


class Backend:
    name = "local"
    namespace = "default"

    def __init__(self, status: JobStatus, lines=(), before=()):
        self.status, self.lines, self.before = status, list(lines), list(before)

    def get(self, name, namespace=None):
        return self.status

    def list(self, namespace=None, all_namespaces=False, *, live=False):
        return [self.status]

    def wait(self, name, namespace=None, *, timeout=None, on_change=None):
        for seen in self.before:
            on_change(seen)
        return self.status

    def logs(self, name, namespace=None, **_):
        yield from self.lines


@pytest.fixture
def backend(monkeypatch):
    def use(status, lines=(), before=()):
        fake = Backend(status, lines, before)
        monkeypatch.setattr(jobs, "open_backend", lambda *a, **k: fake)
        return fake
    return use


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_get_shows_step_rate_against_prediction_eta_and_last_step(backend):
    backend(running())
    out = invoke("get", "bench").stdout
    # the step was first reported 2 s ago (a later heartbeat at the same step is no new step)
    assert "step 30/60  images/sec 8.0 (predicted 10.0, 0.80x)  ETA 1m00s  last step 2s ago" \
        in out.splitlines()
    assert "why:" not in out


def test_get_and_wait_name_a_stall_and_wait_exits_3(backend):
    backend(running(stalled=True))
    assert "why: stalled: no step for 21s (threshold 6s); not reporting: rank 1" in \
        invoke("get", "bench").stdout.splitlines()
    result = invoke("wait", "bench")
    assert result.exit_code == EXIT_STALLED
    assert "why: stalled: no step for 21s" in result.output


def test_list_shows_the_rate_now_and_wide_the_progress(backend):
    backend(running())
    plain = invoke("list").stdout.splitlines()
    assert plain[0].split()[6] == "IMAGES/SEC" and plain[1].split()[6] == "8.0"
    header, row = invoke("list", "-o", "wide").stdout.splitlines()
    cells = dict(zip(re.split(r"\s{2,}", header), re.split(r"\s{2,}", row), strict=True))
    assert (cells["STEP"], cells["PREDICTED"], cells["RATIO"], cells["ETA"],
            cells["LAST STEP"]) == ("30/60", "10.0", "0.80x", "1m00s", "2s ago")


def test_logs_follow_and_wait_end_with_the_cause_of_a_failure(backend):
    backend(failed(), ["[1,0]<stdout>:step 1", "HVDK8S_REPORT {}", "HVDK8S_RESULT {}"])
    result = invoke("logs", "-f", "bench")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["step 1"]
    assert "job bench failed: the program raised ValueError: bad learning rate" in result.output
    waited = invoke("wait", "bench")
    assert waited.exit_code == EXIT_FAILED
    assert "why: the program raised ValueError: bad learning rate" in waited.output
    raw = invoke("logs", "bench", "--raw").stdout.splitlines()
    assert raw == ["[1,0]<stdout>:step 1", "HVDK8S_REPORT {}", "HVDK8S_RESULT {}"]


def test_wait_exit_codes_tell_failed_from_stalled():
    ended_stalled = JobStatus(name="j", namespace="d", backend="local", phase="Failed",
                              reason="stalled")
    for status, code in ((failed(), EXIT_FAILED), (ended_stalled, EXIT_STALLED),
                         (running(stalled=True), EXIT_STALLED),
                         (JobStatus(name="j", namespace="d", backend="local",
                                    phase="Succeeded"), 0)):
        with pytest.raises(typer.Exit) as exc:
            exit_for_status(status)
        assert exc.value.exit_code == code


def test_people_see_no_rank_tags_and_no_lines_meant_for_hvdk8s():
    assert for_people("[1,3]<stderr>:oops") == "oops"
    assert for_people("[1,3]<stdout>: spaced") == "spaced"
    assert for_people("[0]<stdout>:short tag") == "short tag"
    assert for_people("[pod-1] kept as is") == "[pod-1] kept as is"
    assert for_people('[1,0]<stdout>:HVDK8S_REPORT {"kind": "heartbeat"}') is None
    assert for_people('HVDK8S_RESULT {"total_images_per_sec": 1}') is None


def test_wait_says_what_it_waits_for_on_stderr_then_the_cause(backend):
    pending = JobStatus(name="bench", namespace="default", backend="kubernetes",
                        phase="Pending", replicas=[ReplicaStatus(
                            "bench-worker-0", "worker", "Pending", node="n1",
                            reason="ImagePullBackOff",
                            message='Back-off pulling image "horovod/horovod:9"')])
    pending.why = why(pending)
    backend(failed(), before=[pending])
    result = CliRunner().invoke(app, ["wait", "bench"])
    assert result.exit_code == EXIT_FAILED
    assert result.stdout == ""  # the waiting lines and the result: stderr, stdout for data
    assert result.stderr.splitlines()[0] == (
        "waiting: bench Pending: bench-worker-0: image horovod/horovod:9 cannot be pulled on "
        "node n1 (ImagePullBackOff: Back-off pulling image \"horovod/horovod:9\") (fix: check "
        "the image name and tag, and that the node can reach the registry, with an "
        "imagePullSecret if private)")
    assert "why: the program raised ValueError: bad learning rate" in result.stderr


def test_stall_timeout_and_metrics_reach_the_launcher_pods_monitor():
    from pathlib import Path

    import yaml

    cluster = Path(__file__).resolve().parents[2] / "data" / "clusters" / \
        "nvl72-two-partitions.yaml"
    result = invoke("submit", "mpi", "--stall-timeout", "10", "--metrics-port", "9400",
                    "--workers", "1", "--gpus", "1", "--dry-run", "--cluster", str(cluster))
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    job = next(o for o in objects if o["kind"] == "Job")
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor"]  # shown; created where served
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"path": "/metrics", "interval": "30s", "port": "metrics"}]
    launcher = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in launcher["env"]}
    assert (env["HVDK8S_STALL_TIMEOUT"], env["HVDK8S_METRICS_PORT"]) == ("10", "9400")
    assert launcher["ports"] == [{"name": "metrics", "containerPort": 9400}]
    assert launcher["readinessProbe"]["exec"]["command"][:2] == ["/bin/sh", "-c"]


def test_get_json_has_every_progress_figure(backend):
    import json

    backend(running())
    data = json.loads(invoke("get", "bench", "-o", "json").stdout)
    p = data["progress"]
    assert (p["step"], p["total_steps"], p["images_per_sec"], p["ratio"], p["eta_seconds"],
            p["stalled"], p["stragglers"]) == (30, 60, 8.0, 0.8, 60.0, False, [])
