"""Corners a newcomer meets (issue's "smaller" list): --debug after the subcommand, a
client dry run of `install runtime` where Trainer is missing, the help's cluster files
shipped, a bad token named as such, a CPU-only machine not told to install the agent's
extras, cordoned nodes not advised --toleration, and Trainer's TCP not advised --rdma."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.k8s_env import hvdk8s
from tests.paths import ROOT


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def nothing_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "hvdk8s"))
    return tmp_path


def test_debug_after_the_subcommand_shows_the_traceback(nothing_configured, monkeypatch):
    from launcher.backends.local import gpus

    monkeypatch.setattr(gpus, "gpu_count", lambda: 0)
    quiet = invoke("submit", "mpi", "--gpus", "1", "python", "t.py")
    loud = invoke("submit", "mpi", "--gpus", "1", "--debug", "python", "t.py")
    assert quiet.exit_code == loud.exit_code == 2, loud.output
    assert "Traceback" not in quiet.output and "Traceback" in loud.output
    assert "No such option" not in invoke("list", "--backend", "local", "--debug").output


def test_install_runtime_dry_run_refuses_where_trainer_is_missing(k8s):
    refused = invoke("install", "runtime", "--image", "img:1", "--dry-run",
                     "--context", k8s.context)
    assert refused.exit_code == 2, refused.output
    assert refused.output.strip() == ("error: Kubeflow Trainer is not installed (no "
                                      "trainer.kubeflow.org TrainJob in the API); install "
                                      "Kubeflow Trainer first")
    k8s.server().install_trainer()
    shown = invoke("install", "runtime", "--image", "img:1", "--dry-run", "-o", "json",
                   "--context", k8s.context)
    assert shown.exit_code == 0, shown.output
    (runtime,) = json.loads(shown.stdout)["items"]
    assert runtime["kind"] == "ClusterTrainingRuntime"
    assert runtime["apiVersion"].startswith("trainer.kubeflow.org/")


def test_install_runtime_dry_run_without_a_cluster_shows_the_runtime(nothing_configured):
    shown = invoke("install", "runtime", "--image", "img:1", "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert "kind: ClusterTrainingRuntime" in shown.stdout


def test_the_helps_cluster_files_ship_with_hvdk8s(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: tests/data is not there
    helped = invoke("--help").output
    assert "--cluster example:two-dgx1" in helped
    planned = invoke("plan", "--workers", "4", "--gpus", "1", "--cluster", "example:two-dgx1")
    assert planned.exit_code == 0, planned.output
    assert "dgx1-a" in planned.output
    unknown = invoke("plan", "--workers", "1", "--gpus", "1", "--cluster", "example:nope")
    assert unknown.exit_code == 2
    assert unknown.output.strip() == ("error: --cluster example:nope: no example cluster "
                                      "'nope'; the examples: example:nvl72-two-partitions, "
                                      "example:two-dgx1")


def test_doctor_names_a_rejected_token(kube_server, tmp_path):
    bad = kube_server.write_kubeconfig(tmp_path / "bad", token="not-a-token")
    result = invoke("--kubeconfig", bad, "doctor", "-o", "json")
    assert result.exit_code == 1, result.output
    (api,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "api server"]
    assert "rejects this kubeconfig's credentials (HTTP 401 Unauthorized)" in api["finding"]
    assert "does not answer" not in api["finding"]


# What NVML says on a machine without the NVIDIA driver: without its Python binding, and
# with it (hvdk8s[agent] installed), when the binding finds no libnvidia-ml.
NO_DRIVER_NVML_ERRORS = [
    "NVML is unavailable: cannot import pynvml (No module named 'pynvml'); install hvdk8s[agent]",
    "NVML is unavailable: NVML Shared Library Not Found",
]


@pytest.mark.parametrize("nvml_error", NO_DRIVER_NVML_ERRORS)
def test_a_cpu_only_machine_is_not_told_to_install_the_agents_extras(monkeypatch,
                                                                     nothing_configured,
                                                                     nvml_error):
    from launcher.backends.local import gpus
    from launcher.hardware import nvml_topology

    def no_binding():
        raise nvml_topology.NvmlUnavailable(nvml_error)

    monkeypatch.setattr(nvml_topology, "load_nvml", no_binding)
    monkeypatch.setattr(gpus, "has_nvidia_driver", lambda: False)
    result = invoke("submit", "mpi", "--backend", "local", "--gpus", "1", "python", "t.py")
    assert result.exit_code == 2
    assert "hvdk8s[agent]" not in result.output
    assert "no NVIDIA driver: /proc/driver/nvidia is absent" in result.output


def test_cordoned_nodes_are_not_advised_a_toleration(k8s):
    srv = k8s.server()
    for node in ("gpu-node-0", "gpu-node-1"):
        srv.cordon(node)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "c", "--workers", "1", "--gpus", "1",
                    "--image", k8s.image, "python", "t.py")
    assert result.exit_code == 2, result.output
    assert "--toleration" not in result.output
    assert "node.kubernetes.io/unschedulable:NoSchedule (cordoned: kubectl uncordon NODE" in \
        result.output


def test_trainjob_on_rdma_nodes_is_not_advised_an_rdma_setting():
    result = invoke("submit", "mpi", "--name", "r", "--mode", "trainjob", "--workers", "16",
                    "--gpus", "1", "--image", "img", "--dry-run", "--cluster",
                    str(ROOT / "benchmarks/figures/rdma-two-nodes.yaml"), "python", "t.py")
    assert result.exit_code == 0, result.output
    assert "--rdma auto or on" not in result.output and ": --rdma off" not in result.output
    assert "with RDMA" in result.output
    assert "a TrainJob cannot carry RDMA devices; use --mode pods" in result.output
