"""A newcomer's first hour against `hvdk8s dev cluster`, scripted: on every shape, the design
card's command, `logs -f` to the end, `wait` exit 0, `list` with images/sec; then an image
that does not pull and a command that fails, each with its reason and exit code; and an
elastic job scaled up across nodes while another job holds the first node.

The clusters are the dev cluster's own (kubesim.devcluster.start, over TLS, with the
kubeconfig it writes); the CLI runs in this process. Containers play their lives
SPEED times faster than real time, so a job of 30 simulated seconds takes a fraction of one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from kubesim import devcluster
from launcher.cli.app import app

SPEED = 200.0
IMAGE = "horovod/horovod:0.28.1"  # submit's default image, for which Trainer needs a runtime
DESIGN_CARD = ("submit", "mpi", "--workers", "4", "--gpus", "1")
# What a shape asks of the command beyond the design card (its --list-shapes line says so).
SHAPE_OPTIONS = {"trainer-kueue": ("--gang", "--queue", "team"),
                 "multikueue": ("--gang", "--queue", "team")}
runner = CliRunner()


@pytest.fixture
def dev(request, tmp_path, monkeypatch) -> Iterator[devcluster.DevCluster]:
    """A dev cluster of the shape the test is parametrized with (two-nodes by default), or
    of (shape, speed)."""
    param = getattr(request, "param", devcluster.DEFAULT_SHAPE)
    shape, speed = param if isinstance(param, tuple) else (param, SPEED)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    cluster = devcluster.start(shape, tmp_path / "kubeconfig", speed=speed)
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    try:
        yield cluster
    finally:
        cluster.stop()


def hvdk8s(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def predicted(output: str) -> float:
    found = re.search(r"^predicted: ([\d,]+) images/sec", output, re.MULTILINE)
    assert found, output
    return float(found.group(1).replace(",", ""))


def list_row(name: str) -> dict[str, str]:
    listed = hvdk8s("list")
    assert listed.exit_code == 0, listed.output
    header, *rows = listed.output.splitlines()
    row = next(r.split() for r in rows if r.split()[:1] == [name])
    return dict(zip(header.split(), row, strict=True))


@pytest.mark.parametrize("dev", list(devcluster.SHAPES), indirect=True)
def test_the_design_card_job_lives_from_submit_to_end_on_every_shape(dev):
    shape = dev.shape
    if shape.startswith("trainer"):  # the README's Trainer step: hvdk8s's runtime first
        installed = hvdk8s("install", "runtime", "--image", IMAGE)
        assert installed.exit_code == 0, installed.output
    submitted = hvdk8s(*DESIGN_CARD, "--name", "demo", *SHAPE_OPTIONS.get(shape, ()))
    assert submitted.exit_code == 0, submitted.output
    expected = predicted(submitted.output)

    # `wait` first: a job that never ends fails here, where `logs -f` would follow it for
    # ever (at SPEED the job ends within the second either way).
    waited = hvdk8s("wait", "demo", "--timeout", "10")
    assert waited.exit_code == 0, waited.output
    assert re.search(r"^demo +Succeeded$", waited.output, re.MULTILINE), waited.output
    followed = hvdk8s("logs", "-f", "demo")
    assert followed.exit_code == 0, followed.output
    log = followed.output
    assert "Running warm up" in log and "Done warm up" in log
    assert re.search(r"^10\timages/sec: [\d.]+ \+/- [\d.]+ \(jitter = [\d.]+\)\t[\d.]+$", log,
                     re.MULTILINE), log
    total = float(re.search(r"^total images/sec: ([\d.]+)$", log, re.MULTILINE).group(1))
    assert total == pytest.approx(expected, rel=0.03)  # at the speed submit predicted

    if shape == "multikueue":  # the rate is on worker1's pods: `tidy` copies it here
        assert hvdk8s("tidy", "demo").exit_code == 0
    row = list_row("demo")
    assert row["PHASE"] == "Succeeded"
    assert float(row["IMAGES/SEC"]) == pytest.approx(total, abs=0.1)


@pytest.mark.parametrize("dev", [pytest.param(("two-nodes", 10.0), id="two-nodes-10x")],
                         indirect=True)
def test_logs_follow_streams_a_running_job_to_its_end(dev):
    """Slower (a job of about 3 s): `logs -f` starts while the launcher waits or runs."""
    submitted = hvdk8s(*DESIGN_CARD, "--name", "live")
    assert submitted.exit_code == 0, submitted.output
    assert json.loads(hvdk8s("get", "live", "-o", "json").stdout)["phase"] in (
        "Pending", "Running")
    followed = hvdk8s("logs", "-f", "live")
    assert followed.exit_code == 0, followed.output
    assert followed.output.splitlines()[-4:-1] == [
        "-" * 64, followed.output.splitlines()[-3], "-" * 64]
    assert followed.output.splitlines()[-3].startswith("total images/sec: ")
    assert json.loads(hvdk8s("get", "live", "-o", "json").stdout)["phase"] == "Succeeded"


@pytest.mark.parametrize("dev", ["multikueue"], indirect=True)
def test_list_shows_a_multikueue_jobs_figure(dev):
    """The result is on worker1's copy; `tidy`, which follows the job there, records the
    rate on the manager's, where `list` reads with no request per job (`wait` only reads)."""
    submitted = hvdk8s(*DESIGN_CARD, "--name", "far", *SHAPE_OPTIONS["multikueue"])
    assert submitted.exit_code == 0, submitted.output
    assert hvdk8s("wait", "far", "--timeout", "60").exit_code == 0
    assert list_row("far")["IMAGES/SEC"] == "-"
    tidied = hvdk8s("tidy", "far")
    assert "images/sec on" in tidied.output and "(MultiKueue's manager cluster)" in \
        tidied.output, tidied.output
    assert list_row("far")["IMAGES/SEC"] != "-"


@pytest.mark.parametrize("dev", ["multikueue"], indirect=True)
@pytest.mark.parametrize("mode", ["operator", "trainjob"])
def test_a_multikueue_job_runs_the_benchmark_on_the_worker_cluster_in_each_mode(dev, mode):
    """Kueue copies only the job to worker1, whose kubelet holds a pod whose ConfigMap is
    missing: the pods carry their files themselves, and the benchmark runs to its end."""
    if mode == "trainjob":  # the runtime where the TrainJob is made and where it runs
        for where in ((), ("--context", devcluster.MULTIKUEUE_WORKER)):
            installed = hvdk8s("install", "runtime", "--image", IMAGE, *where)
            assert installed.exit_code == 0, installed.output
    submitted = hvdk8s(*DESIGN_CARD, "--name", "mk", "--mode", mode,
                       *SHAPE_OPTIONS["multikueue"])
    assert submitted.exit_code == 0, submitted.output
    waited = hvdk8s("wait", "mk", "--timeout", "10")
    assert waited.exit_code == 0, waited.output
    assert re.search(r"^mk +Succeeded$", waited.output, re.MULTILINE), waited.output
    assert "total images/sec: " in hvdk8s("logs", "mk").output
    worker = dev.workers[devcluster.MULTIKUEUE_WORKER]
    mounts = [e for e in worker.objects("events", "default") if e["reason"] == "FailedMount"]
    assert mounts == []
    made = [c["metadata"]["name"] for c in dev.server.objects("configmaps", "default")]
    assert not [n for n in made if n.startswith("mk-")], made  # nothing made for no one


@pytest.mark.parametrize("dev", ["multikueue"], indirect=True)
def test_a_multikueue_trainjob_whose_worker_lacks_the_runtime_is_refused(dev):
    assert hvdk8s("install", "runtime", "--image", IMAGE).exit_code == 0  # the manager only
    submitted = hvdk8s(*DESIGN_CARD, "--name", "mk", "--mode", "trainjob",
                       *SHAPE_OPTIONS["multikueue"])
    assert submitted.exit_code == 2, submitted.output
    said = submitted.output.strip().splitlines()[-1]
    assert said.startswith("error: MultiKueue worker cluster worker1 (context worker1), where "
                           "this TrainJob runs: no ClusterTrainingRuntime"), said
    assert f"hvdk8s install runtime --image {IMAGE} --context worker1" in said
    assert dev.server.objects("trainjobs.trainer.kubeflow.org", "default") == []


@pytest.mark.parametrize("dev", ["trainer-status"], indirect=True)
def test_the_launcher_posts_trainers_progress_where_its_gate_is_on(dev):
    """The shape with Trainer's TrainJobStatus on: submit gives the launcher the endpoint,
    the played launcher posts rank 0's progress through the job's poster, and the TrainJob
    carries it (list -o wide shows it with no log read)."""
    assert hvdk8s("install", "runtime", "--image", IMAGE).exit_code == 0
    submitted = hvdk8s(*DESIGN_CARD, "--name", "tracked")
    assert submitted.exit_code == 0, submitted.output
    assert "Trainer progress is off" not in submitted.output
    assert hvdk8s("wait", "tracked", "--timeout", "10").exit_code == 0
    status = dev.server.get("trainjobs.trainer.kubeflow.org", "tracked")["status"]
    metrics = {m["name"]: m["value"] for m in status["trainerStatus"]["metrics"]}
    assert status["trainerStatus"]["progressPercentage"] == 100
    assert metrics["step"] == metrics["total_steps"] and float(metrics["images_per_sec"]) > 0
    dev.server.clear_requests()
    listed = hvdk8s("list", "-o", "wide")
    header, *rows = listed.output.splitlines()
    row = dict(zip(re.split(r"\s{2,}", header.strip()),
                   re.split(r"\s{2,}", next(r for r in rows if r.startswith("tracked")).strip()),
                   strict=True))
    assert row["STEP"] == f"{metrics['step']}/{metrics['total_steps']}", listed.output
    assert dev.server.count_requests("GET", r"/log$") == 0


def test_an_image_that_does_not_pull_fails_the_job_with_the_pull_error(dev):
    submitted = hvdk8s(*DESIGN_CARD, "--name", "nopull", "--image", "registry.invalid/nosuch:0",
                       "--start-timeout", "2")
    assert submitted.exit_code == 0, submitted.output
    followed = hvdk8s("logs", "-f", "nopull")
    assert followed.exit_code == 1, followed.output
    waited = hvdk8s("wait", "nopull", "--timeout", "60")
    assert waited.exit_code == 1, waited.output  # `wait --help`: 1 when the job failed
    assert "StartTimeout" in waited.output
    said = waited.output.replace("\n", "")
    # the pod alternates between the two states: either, with the registry's answer
    assert re.search(r"nopull-\S+: (ErrImagePull|ImagePullBackOff): ", said), said
    assert "lookup registry.invalid on 127.0.0.53:53: no such host" in said
    reasons = {e["reason"]: e["message"] for e in dev.server.objects("events", "default")
               if e["involvedObject"]["name"].startswith("nopull-")}
    assert reasons["BackOff"] == 'Back-off pulling image "registry.invalid/nosuch:0"'
    assert reasons["Pulling"] == 'Pulling image "registry.invalid/nosuch:0"'


@pytest.mark.parametrize("how, status", [
    (("--env", "HVDK8S_DEV_EXIT=3"), 3),  # the benchmark, told to fail
    (("--", "/bin/sh", "-c", "python train.py; exit 4"), 4),  # a user's command
])
def test_a_failing_command_fails_the_launcher_with_its_status_and_mpiruns_report(dev, how,
                                                                               status):
    submitted = hvdk8s("submit", "mpi", "--name", "boom", "--workers", "2", "--gpus", "1", *how)
    assert submitted.exit_code == 0, submitted.output
    followed = hvdk8s("logs", "-f", "boom")
    assert followed.exit_code == 1, followed.output
    waited = hvdk8s("wait", "boom", "--timeout", "60")
    assert waited.exit_code == 1, waited.output
    got = json.loads(hvdk8s("get", "boom", "-o", "json").stdout)
    assert got["phase"] == "Failed"
    launcher = next(r for r in got["replicas"] if r["role"] == "launcher")
    assert launcher["exit_code"] == status
    tail = hvdk8s("get", "boom").output
    assert "mpirun detected that one or more processes exited with non-zero status" in tail
    assert f"Exit code:    {status}" in tail
    assert tail.rstrip().endswith("-" * 74)


def test_an_elastic_job_grows_onto_the_second_node_while_another_job_holds_the_first(dev):
    elastic = hvdk8s("submit", "mpi", "--name", "el", "--workers", "2", "--min-workers", "2",
                     "--max-workers", "4", "--gpus", "1", "--num-batches", "100000")
    assert elastic.exit_code == 0, elastic.output
    other = hvdk8s("submit", "mpi", "--name", "big", "--workers", "6", "--gpus", "1",
                   "--num-batches", "100000")
    assert other.exit_code == 0, other.output
    scaled = hvdk8s("scale", "el", "--workers", "4")
    assert scaled.exit_code == 0, scaled.output

    def running_workers() -> list[dict]:
        got = json.loads(hvdk8s("get", "el", "-o", "json").stdout)
        return [r for r in got["replicas"] if r["role"] == "worker" and r["phase"] == "Running"]
    dev.server.wait_for(lambda: len(running_workers()) == 4, timeout=10)
    assert {r["node"] for r in running_workers()} == {"gpu-node-0", "gpu-node-1"}
    assert list_row("el")["WORKERS"] == "4"
