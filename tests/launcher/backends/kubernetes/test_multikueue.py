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


def _manager_for(kube_server, mode):
    """A MultiKueue manager with the operator, and for a TrainJob Trainer and a runtime."""
    kube_server.install_mpi_operator()
    if mode == "trainjob":
        kube_server.install_trainer()
        kube_server.create(tj.horovod_runtime(build_spec(name="r", image=IMAGE)))
    _manager(kube_server)


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
    _manager_for(kube_server, mode)
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


def _pod_templates(root: dict) -> list[dict]:
    if root["kind"] == "MPIJob":
        return [r["template"] for r in root["spec"]["mpiReplicaSpecs"].values()]
    rjobs = root["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"]
    return [r["template"]["spec"]["template"] for r in rjobs]


@pytest.mark.parametrize("mode", ["operator", "trainjob"])
def test_a_multikueue_jobs_pods_carry_their_files_in_the_job(kube_server, kubeconfig,
                                                             monkeypatch, mode):
    """Kueue copies only the job to the worker cluster: no ConfigMap; each pod's
    downwardAPI volume writes the files its annotations carry under /etc/hvdk8s."""
    from launcher.preparing.benchmark_program import benchmark_source

    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    _manager_for(kube_server, mode)
    result = _cli(*SUBMIT, "--name", "mk", "--mode", mode, "--dry-run=server")
    assert result.exit_code == 0, result.output
    assert "its pods carry their files (under /etc/hvdk8s) in their annotations" in result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert [o["kind"] for o in objects] == ["MPIJob" if mode == "operator" else "TrainJob"]
    for template in _pod_templates(objects[0]):
        volume = next(v for v in template["spec"]["volumes"] if v["name"] == "hvdk8s-config")
        files = {i["path"]: i["fieldRef"]["fieldPath"] for i in volume["downwardAPI"]["items"]}
        key = "files.hvdk8s.io/hvd_cnn_bench.py"
        assert files["hvd_cnn_bench.py"] == f"metadata.annotations['{key}']"
        assert template["metadata"]["annotations"][key] == benchmark_source()


def test_files_too_large_for_a_pods_annotations_are_refused_before_anything_is_made(
        kube_server, kubeconfig, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    big = tmp_path / "hvd_cnn_bench.py"
    big.write_text("#" * 300_000)
    monkeypatch.setenv("HVDK8S_BENCHMARK", str(big))
    kube_server.install_mpi_operator()
    _manager(kube_server)
    result = _cli(*SUBMIT, "--name", "big", "--mode", "operator")
    assert result.exit_code == 2, result.output
    said = result.output.strip().splitlines()
    assert said[-1].startswith("error: --queue: team dispatches through Kueue's MultiKueue, "
                               "which copies only the job to the worker cluster"), said
    assert "over the 240 KiB a pod's annotations may hold here" in said[-1]
    assert kube_server.objects("mpijobs.kubeflow.org", "default") == []
    assert [c for c in kube_server.objects("configmaps", "default")
            if c["metadata"]["name"].startswith("big-")] == []


def test_a_multikueue_job_that_needs_a_claim_template_is_refused():
    """DRA's ResourceClaimTemplate would be made on the manager only."""
    from launcher.backends.kubernetes.rendering import render
    from mpijob.errors import SpecError

    spec = build_spec(name="d", workers=2, gpus_per_worker=1, image=IMAGE, gpu_request="dra",
                      gang="kueue", queue="team", command=("python", "t.py"))
    # here, with the ConfigMap of the launcher's monitor
    assert [o["kind"] for o in render(spec, mode="operator")] == [
        "MPIJob", "ResourceClaimTemplate", "ConfigMap"]
    with pytest.raises(SpecError) as refused:
        render(spec, mode="operator", managed_by=MANAGED)
    assert refused.value.where == "--queue"
    assert refused.value.message.endswith(
        "but this job also needs ResourceClaimTemplate, which hvdk8s would create here; use "
        "a queue that runs its jobs in this cluster, or --gpu-request device-plugin")


def test_gpu_request_auto_takes_the_device_plugin_where_dra_could_not_travel(
        kube_server, kubeconfig, monkeypatch, tmp_path):
    """The worker cluster publishes DRA GPUs, which auto would take here; sent through
    MultiKueue, the job takes the device plugin's, and says so, instead of being refused."""
    from kubesim.dra import install_dra

    kube_server.install_mpi_operator()
    _manager(kube_server)
    with KubeAPIServer() as worker:
        worker.add_node("w-node-0", gpus=8, labels=dict(GPU_NODE_LABELS))
        install_dra(worker, {"w-node-0": [f"GPU-{i}" for i in range(8)]})
        path = worker.write_kubeconfig(tmp_path / "worker1", context="worker1")
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([kubeconfig, path]))
        result = _cli(*SUBMIT, "--name", "auto", "--mode", "operator", "--dry-run=server",
                      "python", "t.py")
        assert result.exit_code == 0, result.output
        assert "--gpu-request auto: the device plugin's GPUs, not DRA" in result.output
        objects = [o for o in yaml.safe_load_all(result.stdout) if o]
        assert [o["kind"] for o in objects] == ["MPIJob"]
        worker_pod = objects[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
        assert "nvidia.com/gpu" in worker_pod["containers"][0]["resources"]["limits"]
        assert "resourceClaims" not in worker_pod


def test_a_multikueue_job_carries_its_monitor_and_makes_no_pod_monitor():
    """The launcher's monitor travels in the pods like the other files; a PodMonitor made
    here would watch nothing (the pods run on the worker cluster), so none is rendered."""
    from launcher.backends.kubernetes.rendering import render
    from mpijob.k8s.pod_files import FILE_ANNOTATION_PREFIX

    spec = build_spec(name="m", workers=2, gpus_per_worker=1, image=IMAGE, gang="kueue",
                      queue="team", metrics_port=9400, command=("python", "t.py"))
    (mpijob,) = render(spec, mode="operator", managed_by=MANAGED)
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    assert FILE_ANNOTATION_PREFIX + "hvdk8s_monitor.py" in launcher["metadata"]["annotations"]
    assert "PodMonitor" in [o["kind"] for o in render(spec, mode="operator")]
