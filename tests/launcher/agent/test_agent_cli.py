"""`hvdk8s agent` end to end: fake NVML, a fake kubelet over gRPC, the test API server over HTTP."""

from __future__ import annotations

import json
import sys
from concurrent import futures

import pytest
from typer.testing import CliRunner

from kubesim.server import KubeAPIServer
from launcher.cli.app import app
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, parse_annotation
from tests import fake_pynvml
from tests.launcher.agent.test_podresources import ListPodResourcesResponse
from tests.topo_files import gpu_links

grpc = pytest.importorskip("grpc")
runner = CliRunner()


@pytest.fixture
def nvml(monkeypatch):
    fake = fake_pynvml.dgx1_v100()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.fixture
def kubelet(tmp_path, nvml):
    """The kubelet's PodResources service: one training pod holding GPUs 2 and 3."""
    response = ListPodResourcesResponse()
    pod = response.pod_resources.add(name="bert-worker-1", namespace="ml")
    pod.containers.add(name="worker").devices.add(
        resource_name="nvidia.com/gpu", device_ids=[nvml.gpus[3].uuid, nvml.gpus[2].uuid]
    )
    answer = response.SerializeToString()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {"List": grpc.unary_unary_rpc_method_handler(lambda request, context: answer)},
    ),))
    socket = tmp_path / "kubelet.sock"
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    yield str(socket)
    server.stop(None)


@pytest.fixture
def apiserver(tmp_path, monkeypatch):
    with KubeAPIServer() as server:
        server.add_node("dgx-07", annotations={"team": "vision"})
        monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(tmp_path / "kubeconfig"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        server.clear_requests()
        yield server


def node_requests(server) -> list[tuple[str, str | None]]:
    return [(r.method, r.content_type) for r in server.request_log if r.path == "/api/v1/nodes/dgx-07"]


def test_dry_run_prints_the_annotation(kubelet):
    result = runner.invoke(app, ["agent", "--once", "--dry-run", "--node-name", "dgx-07",
                                 "--kubelet-socket", kubelet])

    assert result.exit_code == 0, result.output
    topology, taken, meta = parse_annotation(result.stdout)
    assert topology.links == gpu_links("dgx1-v100-mlx5.txt")
    assert taken == frozenset({2, 3})
    assert json.loads(result.stdout)["allocated"] == {"ml/bert-worker-1": [2, 3]}
    assert meta["node"] == "dgx-07"


def test_once_patches_its_node_then_leaves_it_alone(kubelet, apiserver, monkeypatch):
    monkeypatch.setenv("NODE_NAME", "dgx-07")
    args = ["agent", "--once", "--kubelet-socket", kubelet]

    first = runner.invoke(app, args)

    assert first.exit_code == 0, first.output
    annotations = apiserver.get("Node", "dgx-07")["metadata"]["annotations"]
    assert annotations["team"] == "vision"  # a merge patch: other annotations stay
    _, taken, meta = parse_annotation(annotations[ANNOTATION_TOPOLOGY])
    assert taken == frozenset({2, 3}) and meta["node"] == "dgx-07"
    assert node_requests(apiserver) == [("GET", None), ("PATCH", "application/merge-patch+json")]
    assert [r.query.get("fieldManager") for r in apiserver.request_log if r.method == "PATCH"] == [
        "hvdk8s-agent"]

    second = runner.invoke(app, args)  # the pod restarted; nothing changed on the node

    assert second.exit_code == 0, second.output
    assert [method for method, _ in node_requests(apiserver)] == ["GET", "PATCH", "GET"]


def test_api_errors_are_retried(kubelet, apiserver, monkeypatch):
    monkeypatch.setattr("launcher.agent.node_agent.BACKOFF_FIRST_SECONDS", 0.01)
    apiserver.fail_next(1, status=500)

    result = runner.invoke(app, ["agent", "--once", "--node-name", "dgx-07", "--kubelet-socket", kubelet])

    assert result.exit_code == 0, result.output
    assert ANNOTATION_TOPOLOGY in apiserver.get("Node", "dgx-07")["metadata"]["annotations"]
    assert [method for method, _ in node_requests(apiserver)] == ["GET", "GET", "PATCH"]


def test_without_nvml_exits_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.dgx1_v100(
        init_error=fake_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))

    result = runner.invoke(app, ["agent", "--once", "--node-name", "n1"])

    assert result.exit_code == 1
    assert result.stderr.startswith("error: NVML is unavailable: NVML Shared Library Not Found")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, option",
    [(["--once"], "--node-name"), (["--node-name", "n1", "--interval", "0"], "--interval")],
)
def test_bad_options_exit_2(monkeypatch, nvml, args, option):
    monkeypatch.delenv("NODE_NAME", raising=False)
    result = runner.invoke(app, ["agent", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {option}: ")
