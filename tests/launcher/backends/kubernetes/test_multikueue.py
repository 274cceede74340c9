"""MultiKueue: a --queue whose ClusterQueue dispatches through Kueue's MultiKueue admission
check gets managedBy on the MPIJob (and the TrainJob), no placement on the manager
cluster, and get/wait/logs follow the job on the worker cluster Kueue chose: a second test
API server, to which the model (kubesim/multikueue.py) copies the job."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import yaml
from typer.testing import CliRunner

from kubesim import multikueue
from kubesim.server import KubeAPIServer
from launcher.cli.app import app
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj
from tests.kubeapi_fixtures import GPU_NODE_LABELS

runner = CliRunner()
IMAGE = "img:1"
MANAGED = "kueue.x-k8s.io/multikueue"
SUBMIT = ("submit", "mpi", "--workers", "2", "--gpus", "1", "--image", IMAGE,
          "--gang-scheduler", "kueue", "--queue", "team")


def _manager(srv) -> None:
    srv.install_kueue()
    multikueue.setup(srv, "mk", ["worker1"], "team", {"nvidia.com/gpu": 16, "cpu": 64,
                                                      "memory": "512Gi"})


def _cli(*args: str):
    result = runner.invoke(app, [*args, "--context", "test", "-n", "default"])
    assert "Traceback" not in result.output, result.output
    return result


@contextmanager
def _dispatching(manager: KubeAPIServer, setup: Callable[[KubeAPIServer], None], tmp_path,
                 monkeypatch, kubeconfig: str) -> Iterator[KubeAPIServer]:
    """A worker cluster `worker1` of two GPU nodes, readied by `setup`, to which MultiKueue
    dispatches the manager's jobs; KUBECONFIG names both clusters."""
    with KubeAPIServer() as worker:
        for i in range(2):
            worker.add_node(f"w-node-{i}", gpus=8, labels=dict(GPU_NODE_LABELS))
        setup(worker)
        path = worker.write_kubeconfig(tmp_path / "worker1", context="worker1")
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([kubeconfig, path]))
        loop = multikueue.MultiKueue(manager, {"worker1": worker})
        loop.start()
        try:
            yield worker
        finally:
            loop.stop()


@pytest.mark.parametrize("mode, path", [("operator", ("spec", "runPolicy", "managedBy")),
                                        ("trainjob", ("spec", "managedBy"))])
def test_a_multikueue_dry_run_carries_managed_by(kube_server, kubeconfig, monkeypatch,
                                                 mode, path):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    kube_server.install_mpi_operator()
    if mode == "trainjob":
        kube_server.install_trainer()
        kube_server.create(tj.horovod_runtime(build_spec(name="r", image=IMAGE)))
    _manager(kube_server)
    result = _cli(*SUBMIT, "--name", "mk", "--mode", mode, "--dry-run=server", "python", "t.py")
    assert result.exit_code == 0, result.output
    root = next(o for o in yaml.safe_load_all(result.stdout) if o)
    value = root
    for key in path:
        value = value[key]
    assert value == MANAGED
    assert "no placement is planned" in result.output
    if mode == "trainjob":  # the worker cluster's Trainer is not read: nothing to post to
        assert ("Kubeflow Trainer progress is off for this job: the worker cluster MultiKueue "
                "picks runs it") in result.output


def test_without_multikueue_the_queue_sets_no_managed_by(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    kube_server.install_mpi_operator()
    kube_server.install_kueue()
    kube_server.kueue_queue("team", {"nvidia.com/gpu": 16})
    result = _cli(*SUBMIT, "--name", "plain", "--mode", "operator", "--dry-run=server",
                  "python", "t.py")
    assert result.exit_code == 0, result.output
    root = next(o for o in yaml.safe_load_all(result.stdout) if o)
    assert "managedBy" not in root["spec"]["runPolicy"]


def test_plan_says_a_multikueue_queue_is_not_placed_here(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    _manager(kube_server)
    result = runner.invoke(app, ["plan", "--workers", "2", "--gpus", "1", "--queue", "team",
                                 "--context", "test"])
    assert result.exit_code == 0, result.output
    assert "dispatches through Kueue's MultiKueue" in result.output


def test_get_and_wait_follow_the_job_on_the_worker_cluster_kueue_chose(
        kube_server, kubeconfig, monkeypatch, tmp_path):
    manager = kube_server
    manager.install_mpi_operator()  # serves MPIJob; leaves managedBy jobs to MultiKueue
    _manager(manager)

    def setup(worker: KubeAPIServer) -> None:
        worker.install_mpi_operator()
        worker.script_pod(r"far-worker-\d+", exit_code=None)
        worker.script_pod(r"far-launcher-\w{5}", logs=["total images/sec: 77.0"], exit_code=0)

    with _dispatching(manager, setup, tmp_path, monkeypatch, kubeconfig) as worker:
        result = _cli(*SUBMIT, "--name", "far", "--mode", "operator", "python", "t.py")
        assert result.exit_code == 0, result.output
        assert manager.get("mpijobs.kubeflow.org", "far")["spec"]["runPolicy"][
            "managedBy"] == MANAGED
        worker.wait_for(lambda: worker.get("mpijobs.kubeflow.org", "far") is not None)
        assert manager.objects("pods", "default") == []  # nothing runs on the manager
        waited = _cli("wait", "far", "--timeout", "60")
        assert waited.exit_code == 0, waited.output
        assert "worker cluster worker1" in waited.output
        got = _cli("get", "far", "-o", "json")
        status = json.loads(got.stdout)
        assert status["phase"] == "Succeeded"
        assert {r["node"] for r in status["replicas"] if r["node"]} <= {"w-node-0", "w-node-1"}
        logs = _cli("logs", "far")
        assert "total images/sec: 77.0" in logs.output


def test_the_only_worker_cluster_hvdk8s_can_see_is_where_the_job_is_planned(
        kube_server, kubeconfig, monkeypatch, tmp_path):
    kube_server.install_mpi_operator()
    _manager(kube_server)
    with KubeAPIServer() as worker:
        worker.add_node("w-node-0", gpus=8, labels=dict(GPU_NODE_LABELS))
        path = worker.write_kubeconfig(tmp_path / "worker1", context="worker1")
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([kubeconfig, path]))
        result = _cli(*SUBMIT, "--name", "seen", "--mode", "operator", "--dry-run=server",
                      "python", "t.py")
        assert result.exit_code == 0, result.output
        assert "to its only worker cluster worker1: planned there" in result.output
        assert "placement: w-node-0" in result.output
        root = next(o for o in yaml.safe_load_all(result.stdout) if o)
        assert "w-node-0" in json.dumps(root["spec"]["mpiReplicaSpecs"]["Worker"]["template"])
        planned = runner.invoke(app, ["plan", "--workers", "2", "--gpus", "1", "--queue", "team",
                                      "--context", "test"])
        assert planned.exit_code == 0 and "w-node-0" in planned.output, planned.output


def test_a_trainjob_dispatched_by_multikueue_is_followed_and_waited_on_there(
        kube_server, kubeconfig, monkeypatch, tmp_path):
    manager = kube_server
    runtime = tj.horovod_runtime(build_spec(name="r", image=IMAGE))
    manager.install_trainer()  # leaves a TrainJob managed by MultiKueue alone
    manager.create(runtime)
    _manager(manager)

    def setup(worker: KubeAPIServer) -> None:
        worker.install_trainer()
        worker.create(runtime)
        worker.script_pod(r"tfar-node-0-\d+-\w{5}", exit_code=None)
        worker.script_pod(r"tfar-launcher-0-0-\w{5}", logs=["total images/sec: 55.0"],
                          exit_code=0)

    with _dispatching(manager, setup, tmp_path, monkeypatch, kubeconfig) as worker:
        result = _cli(*SUBMIT, "--name", "tfar", "--mode", "trainjob", "python", "t.py")
        assert result.exit_code == 0, result.output
        assert manager.get("trainjobs.trainer.kubeflow.org", "tfar")["spec"][
            "managedBy"] == MANAGED
        assert manager.objects("jobsets.jobset.x-k8s.io", "default") == []
        waited = _cli("wait", "tfar", "--timeout", "60")
        assert waited.exit_code == 0, waited.output
        assert "worker cluster worker1" in waited.output
        remote = worker.get("trainjobs.trainer.kubeflow.org", "tfar")
        assert "managedBy" not in remote["spec"]
        status = json.loads(_cli("get", "tfar", "-o", "json").stdout)
        assert status["phase"] == "Succeeded" and status["mode"] == "trainjob"
        assert status["images_per_sec"] == pytest.approx(55.0)
