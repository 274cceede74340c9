"""DRA end to end against the test API server: two DGX-1-like nodes whose GPUs a
gpu.nvidia.com driver publishes in resource.k8s.io/v1 ResourceSlices; hvdk8s reads them (and
the claims that hold some), plans, creates a ResourceClaimTemplate per worker pod selecting
the planned GPUs, and the scripted allocator gives the pod exactly those devices."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kubesim.dra import CelError, cel_matches, gpu_slice, install_dra
from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.snapshot import take_snapshot
from launcher.cli.app import app
from tests.kubeapi_fixtures import GPU_NODE_LABELS


def uuid(node: int, i: int) -> str:
    return f"GPU-{node:08x}-1111-2222-3333-{i:012x}"


@pytest.fixture
def dra_server(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        for n in range(2):
            # No device plugin: the GPUs exist only as DRA devices.
            srv.add_node(f"dgx-{n}", gpus=0, labels=dict(GPU_NODE_LABELS))
        install_dra(srv, {f"dgx-{n}": [uuid(n, i) for i in range(8)] for n in range(2)})
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        yield srv


def hold(srv, node: int, devices: list[int], name="other") -> None:
    """A claim of another workload holding some GPUs of a node."""
    claim = srv.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"devices": {"requests": [{"name": "g", "exactly": {
                            "deviceClassName": "gpu.nvidia.com", "count": len(devices)}}]}}})
    results = [{"request": "g", "driver": "gpu.nvidia.com", "pool": f"dgx-{node}",
                "device": f"gpu-{i}"} for i in devices]
    srv.store.mutate("resource.k8s.io/resourceclaims", "default", claim["metadata"]["name"],
                     lambda c: c.setdefault("status", {}).update({"allocation": {"devices": {"results": results}}}))


def test_snapshot_sees_dra_gpus_and_the_claims_that_hold_them(dra_server):
    from launcher.backends.kubernetes.client import connect

    hold(dra_server, 0, [0, 1, 2])
    snap = take_snapshot(connect("test"))
    n0, n1 = snap.cluster.node("dgx-0"), snap.cluster.node("dgx-1")
    assert n0.gpus == 8 and n0.allocated == frozenset({0, 1, 2})
    assert n1.allocated == frozenset()
    assert [d.uuid for d in n0.dra_devices] == [uuid(0, i) for i in range(8)]


def test_submit_requests_the_planned_gpus_and_the_pod_gets_exactly_them(dra_server):
    srv = dra_server
    hold(srv, 0, [0, 1, 4, 5])  # dgx-0 keeps the quad 2,3,6,7 free (not one NVLink quad)
    srv.script_pod(r"d-launcher-.*", logs=[(0.1, "total images/sec: 100.0")], exit_code=0)
    result = CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--name", "d",
                                      "--workers", "4", "--gpus", "1", "--image", "img",
                                      "--schedule-timeout", "20", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert "requested through DRA ResourceClaims selecting the planned devices" in result.output
    (pod,) = [p for p in srv.objects("pods", "default") if p["metadata"]["name"] == "d-worker-0"]
    planned = [int(i) for i in pod["metadata"]["annotations"]["hvdk8s.io/gpus"].split(",")]
    # The best free quad: dgx-1's NVLink-connected GPUs, not dgx-0's leftovers.
    assert pod["spec"]["nodeName"] == "dgx-1" and planned in ([0, 1, 2, 3], [4, 5, 6, 7])
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0].get("resources"))
    (template,) = srv.objects("resourceclaimtemplates", "default")
    assert uuid(1, planned[0]) in str(template["spec"])
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = srv.get("resourceclaims", status["resourceClaimName"])
    got = sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])
    assert got == sorted(f"gpu-{i}" for i in planned)
    assert claim["status"]["reservedFor"][0]["name"] == "d-worker-0"
    # `get` shows what the claim was allocated next to the plan.
    shown = CliRunner().invoke(app, ["get", "d", "--backend", "kubernetes", "-o", "json"])
    assert shown.exit_code == 0, shown.output
    import json

    (row,) = [p for p in json.loads(shown.stdout)["placement"] if p["pod"] == "d-worker-0"]
    assert row["gpus"] == planned
    assert row["allocated_devices"] == sorted(f"gpu-{i}" for i in planned)
    table = CliRunner().invoke(app, ["get", "d", "--backend", "kubernetes"]).output
    assert "d-worker-0: planned GPUs" in table and f"DRA allocated gpu-{planned[0]}" in table
    # Deleting the job deletes its claim templates too.
    assert CliRunner().invoke(app, ["delete", "d", "--backend", "kubernetes"]).exit_code == 0
    assert srv.objects("resourceclaimtemplates", "default") == []


def test_allocator_refuses_what_the_selector_excludes(dra_server):
    srv = dra_server
    hold(srv, 1, [0])
    srv.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                    "deviceClassName": "gpu.nvidia.com", "count": 1,
                    "selectors": [{"cel": {"expression":
                                           f'device.attributes["gpu.nvidia.com"].uuid in ["{uuid(1, 0)}"]'}}]}}]}}}})
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
                         "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]}})
    srv.step(3)
    pod = srv.get("pods", "p")
    assert not pod["spec"].get("nodeName")  # gpu-0 of dgx-1 is held; nothing else matches
    assert any("needs 1" in why for why in srv.dra.failures.values())


def test_cel_evaluator_knows_only_the_forms_hvdk8s_emits():
    device = gpu_slice("n", [uuid(0, 0)], pcie_roots=["pci0000:00"])["spec"]["devices"][0]
    assert cel_matches(f'device.attributes["gpu.nvidia.com"].uuid in ["{uuid(0, 0)}"]', device, "gpu.nvidia.com")
    assert not cel_matches('device.attributes["gpu.nvidia.com"].uuid in ["GPU-x"]', device, "gpu.nvidia.com")
    assert cel_matches('device.driver == "gpu.nvidia.com" && '
                       'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"',
                       device, "gpu.nvidia.com")
    with pytest.raises(CelError):
        cel_matches("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('8Gi')) >= 0",
                    device, "gpu.nvidia.com")


def test_operator_mode_workers_get_their_nodes_planned_gpus(dra_server):
    srv = dra_server
    srv.install_mpi_operator()
    hold(srv, 0, [0, 1, 2, 3])
    hold(srv, 1, [4, 5, 6, 7], name="other-1")
    result = CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--mode", "operator",
                                      "--name", "op", "--workers", "8", "--gpus", "1", "--image", "img",
                                      "python", "train.py"])
    assert result.exit_code == 0, result.output
    (template,) = srv.objects("resourceclaimtemplates", "default")
    assert template["metadata"]["name"] == "op-worker-gpus"
    srv.wait_for(lambda: len([p for p in srv.objects("pods", "default")
                              if p["metadata"]["name"].startswith("op-worker")
                              and p["spec"].get("nodeName")]) == 2, timeout=20)
    for pod in (p for p in srv.objects("pods", "default") if p["metadata"]["name"].startswith("op-worker")):
        (status,) = pod["status"]["resourceClaimStatuses"]
        claim = srv.get("resourceclaims", status["resourceClaimName"])
        got = sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])
        # dgx-0 has 4,5,6,7 free, dgx-1 0,1,2,3: each pod gets exactly its node's free quad.
        expected = {"dgx-0": ["gpu-4", "gpu-5", "gpu-6", "gpu-7"], "dgx-1": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]}
        assert got == expected[pod["spec"]["nodeName"]]


def test_elastic_workers_each_claim_their_gpus_as_the_dry_run_shows(dra_server):
    """An elastic job with --gpu-request dra: what the client dry run shows is what submit
    creates (the worker Job's template names one ResourceClaimTemplate), and each worker
    pod the Job controller makes, the one `scale` adds too, gets a claim of its own with
    its GPUs, none shared. The drivers here publish no PCIe root, so a claim that asked for
    GPUs under one root could never be allocated."""
    from tests.launcher.pipeline.test_dry_run_equals_submit import (
        AFTER_CREATE,
        _created,
        _differences,
        _items,
    )

    srv = dra_server
    srv.script_pod(r"el-launcher-.*", logs=["horovodrun elastic"], exit_code=None)
    base = ["submit", "mpi", "--backend", "kubernetes", "--name", "el", "--workers", "2",
            "--min-workers", "1", "--max-workers", "3", "--gpus", "2", "--gpu-request", "dra",
            "--image", "img"]
    shown = _items(CliRunner().invoke(app, [*base, "--dry-run", "-o", "json", "python", "t.py"]))
    submitted = CliRunner().invoke(app, [*base, "python", "t.py"])
    assert submitted.exit_code == 0, submitted.output
    assert "elastic: each worker pod claims any free GPUs of its node" in submitted.output
    created = _created(srv, shown)
    assert sorted(created) == sorted(shown)
    for key, sent in shown.items():
        kept = [d for d in _differences(sent, created[key])
                if (key[1], d.split(":")[0]) not in AFTER_CREATE]
        assert kept == [], (key, kept)
    (template,) = [o for (_, kind, _), o in shown.items() if kind == "ResourceClaimTemplate"]
    job = shown[("batch/v1", "Job", "el-worker")]
    assert job["spec"]["template"]["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": template["metadata"]["name"]}]

    def allocations() -> dict[str, tuple[str, tuple[str, ...]]]:
        """Each running worker pod's node and the devices its own claim got."""
        out = {}
        for pod in srv.objects("pods", "default"):
            if not pod["metadata"]["name"].startswith("el-worker-") or \
                    not pod["spec"].get("nodeName"):
                continue
            (status,) = pod["status"].get("resourceClaimStatuses") or [{}]
            claim = srv.get("resourceclaims", status.get("resourceClaimName", ""))
            results = (((claim or {}).get("status") or {}).get("allocation") or {}).get(
                "devices", {}).get("results") or []
            out[pod["metadata"]["name"]] = (pod["spec"]["nodeName"],
                                            tuple(sorted(r["device"] for r in results)))
        return out

    def disjoint(got: dict) -> bool:
        held = [(node, d) for node, devices in got.values() for d in devices]
        return len(held) == len(set(held)) and all(len(d) == 2 for _, d in got.values())

    srv.wait_for(lambda: len(allocations()) == 2, timeout=20)
    assert disjoint(allocations()), allocations()
    scaled = CliRunner().invoke(app, ["scale", "el", "--workers", "3", "--backend", "kubernetes"])
    assert scaled.exit_code == 0, scaled.output
    srv.wait_for(lambda: len(allocations()) == 3, timeout=20)
    got = allocations()
    assert disjoint(got) and any(name.startswith("el-worker-2-") for name in got), got
