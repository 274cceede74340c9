"""RDMA end to end against the test API server: nodes whose device plugins advertise RDMA
resources, the snapshot that reads them, the pods that request them (and that the scheduler
places only where they are free), and Pod Security refusing IPC_LOCK."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kubesim.errors import ApiError
from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.snapshot import take_snapshot
from launcher.cli.app import app
from mpijob.jobspec import names
from tests.kubeapi_fixtures import GPU_NODE_LABELS

SHARED = "rdma/rdma_shared_device_a"


@pytest.fixture
def rdma_server(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        srv.add_node("ib-0", gpus=8, labels=dict(GPU_NODE_LABELS), resources={SHARED: 63})
        srv.add_node("ib-1", gpus=8, labels=dict(GPU_NODE_LABELS), resources={SHARED: 63})
        srv.add_node("vf-0", gpus=8, labels=dict(GPU_NODE_LABELS),
                     resources={"openshift.io/mlx5_vf": 8},
                     taints=["dedicated=vf:NoSchedule"])
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        yield srv


def submit(*args):
    return CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", *args])


def workers(srv, job, ns="default"):
    return [p for p in srv.objects("pods", ns)
            if p["metadata"]["labels"].get(names.LABEL_JOB) == job
            and p["metadata"]["labels"].get(names.LABEL_ROLE) == "worker"]


def test_snapshot_reads_each_kind_of_rdma_resource(rdma_server):
    from launcher.backends.kubernetes.client import connect

    snap = take_snapshot(connect("test"))
    ib, vf = snap.cluster.node("ib-0"), snap.cluster.node("vf-0")
    assert [(r.name, r.kind, r.free) for r in ib.rdma] == [(SHARED, "shared", 63)]
    assert [(r.name, r.kind, r.free) for r in vf.rdma] == [("openshift.io/mlx5_vf", "vf", 8)]


def test_submit_requests_the_device_and_the_pods_are_scheduled_on_rdma_nodes(rdma_server):
    srv = rdma_server
    # RDMA workloads run in a privileged namespace (IPC_LOCK); the test server's cluster
    # default is baseline, which refuses it (test_baseline_default_refuses_before_creating).
    srv.set_pod_security("default", enforce="privileged")
    srv.script_pod(r"r-launcher-.*", logs=[(0.1, "total images/sec: 100.0")], exit_code=0)
    result = submit("--name", "r", "--workers", "16", "--gpus", "1")
    assert result.exit_code == 0, result.output
    assert "network: RDMA" in result.output
    pods = srv.wait_for(lambda: (ps := workers(srv, "r")) and all(
        p["spec"].get("nodeName") for p in ps) and ps)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["ib-0", "ib-1"]
    for p in pods:
        c = p["spec"]["containers"][0]
        assert c["resources"]["limits"][SHARED] == "1"
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    # Their slots are now taken: the next snapshot sees 62 free on each node.
    from launcher.backends.kubernetes.client import connect

    assert take_snapshot(connect("test")).cluster.node("ib-0").rdma[0].free == 62


def test_baseline_default_refuses_before_creating(rdma_server):
    """A cluster-wide default level is not visible through the API (no namespace label):
    the admission dry run before creating refuses the pods, and nothing is created."""
    result = submit("--name", "r", "--workers", "16", "--gpus", "1")
    assert result.exit_code == 2, result.output
    assert 'must not include "IPC_LOCK"' in result.output
    assert rdma_server.objects("pods", "default") == []
    assert rdma_server.objects("jobs", "default") == []


def test_restricted_namespace_refuses_on_before_creating_anything(rdma_server):
    srv = rdma_server
    srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "secure", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    result = submit("--name", "r", "--workers", "16", "--gpus", "1", "--rdma", "on",
                    "-n", "secure")
    assert result.exit_code == 2, result.output
    assert "Pod Security 'restricted'" in result.output and "IPC_LOCK" in result.output
    assert srv.objects("pods", "secure") == [] and srv.objects("jobs", "secure") == []


def test_pod_security_admission_refuses_ipc_lock_under_baseline(rdma_server):
    srv = rdma_server
    srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "base", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "base"},
           "spec": {"containers": [{"name": "worker", "image": "x", "securityContext": {
               "capabilities": {"add": ["IPC_LOCK"]}}}]}}
    with pytest.raises(ApiError) as err:
        srv.create(pod)
    assert err.value.code == 403
    assert 'violates PodSecurity "baseline:latest": non-default capabilities' in str(err.value)
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE"]
    assert srv.create(pod)["metadata"]["name"] == "p"
