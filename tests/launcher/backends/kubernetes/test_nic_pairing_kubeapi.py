"""GPU-NIC pairing through DRA against the test API server: two DGX-like nodes whose GPUs
NVIDIA's driver and whose NICs DraNet publish in resource.k8s.io/v1 ResourceSlices, with the
standard resource.kubernetes.io/pcieRoot on both. hvdk8s plans a NIC under each planned
GPU's PCIe root, each worker's claim asks for it through matchAttribute constraints, and the
allocator (which honours them, as the structured allocator does) gives every GPU the NIC
under its own root. A GPU with no NIC under its root: --rdma on refuses, auto asks for no
NIC and says so."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kubesim.dra import PCIE_ROOT, install_dra
from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.snapshot import take_snapshot
from launcher.cli.app import app
from mpijob.jobspec import names
from tests.kubeapi_fixtures import GPU_NODE_LABELS

ROOTS = ["pci0000:00", "pci0000:40", "pci0000:80", "pci0000:c0"]  # two GPUs under each


def uuid(node: int, i: int) -> str:
    return f"GPU-{node:08x}-1111-2222-3333-{i:012x}"


def nics(roots=ROOTS) -> list[tuple[str, str]]:
    """Two NICs under each root, listed from the last root to the first, so that a NIC
    taken in slice order without the constraint sits under another GPU's root."""
    return [(f"ib{2 * r + k}", root) for r, root in reversed(list(enumerate(roots)))
            for k in range(2)]


def serve(srv, tmp_path, monkeypatch, nic_roots: dict[int, list[str]] | None = None) -> None:
    for n in range(2):
        srv.add_node(f"dgx-{n}", gpus=0, labels=dict(GPU_NODE_LABELS))
    install_dra(srv, {f"dgx-{n}": [uuid(n, i) for i in range(8)] for n in range(2)},
                pcie_roots={f"dgx-{n}": [ROOTS[i // 2] for i in range(8)] for n in range(2)},
                nics={f"dgx-{n}": nics((nic_roots or {}).get(n, ROOTS)) for n in range(2)})
    srv.set_pod_security("default", enforce="privileged")  # IPC_LOCK
    monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))


def hold_first_gpus(srv) -> None:
    """Another workload's claims hold GPUs 0-3 of both nodes: the job gets GPUs 4-7, under
    the roots whose NICs come first in the slice."""
    for n in range(2):
        claim = srv.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": f"other-{n}", "namespace": "default"},
                            "spec": {"devices": {"requests": [{"name": "g", "exactly": {
                                "deviceClassName": "gpu.nvidia.com", "count": 4}}]}}})
        results = [{"request": "g", "driver": "gpu.nvidia.com", "pool": f"dgx-{n}",
                    "device": f"gpu-{i}"} for i in range(4)]
        srv.store.mutate("resource.k8s.io/resourceclaims", "default", claim["metadata"]["name"],
                         lambda c, r=results: c.setdefault("status", {}).update(
                             {"allocation": {"devices": {"results": r}}}))


def device_roots(srv) -> dict[tuple[str, str, str], str]:
    out = {}
    for s in srv.objects("resourceslices"):
        for d in s["spec"]["devices"]:
            out[(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])] = \
                d["attributes"][PCIE_ROOT]["string"]
    return out


def test_each_worker_claim_pairs_every_gpu_with_the_nic_under_its_root(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        serve(srv, tmp_path, monkeypatch)
        hold_first_gpus(srv)
        from launcher.backends.kubernetes.client import connect

        node = take_snapshot(connect("test")).cluster.node("dgx-0")
        assert [(n.name, n.pcie_root) for n in node.dra_nics][:2] == [("ib0", ROOTS[0]),
                                                                       ("ib1", ROOTS[0])]
        srv.script_pod(r"p-launcher-.*", logs=[(0.1, "total images/sec: 100.0")], exit_code=0)
        result = CliRunner().invoke(app, [
            "submit", "mpi", "--backend", "kubernetes", "--name", "p", "--workers", "2",
            "--gpus", "4", "--image", "img", "--schedule-timeout", "20", "python", "t.py"])
        assert result.exit_code == 0, result.output
        assert "each GPU's claim also takes the dra.net NIC under its PCIe root" in result.output
        assert "nic pairs: worker 0 (dgx-0): gpu-4+ib4, gpu-5+ib5, gpu-6+ib6, gpu-7+ib7" \
            in result.output
        roots = device_roots(srv)
        workers = [p for p in srv.objects("pods", "default")
                   if p["metadata"]["labels"].get(names.LABEL_ROLE) == "worker"]
        assert len(workers) == 2
        for pod in workers:
            assert "IPC_LOCK" in pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]
            (status,) = pod["status"]["resourceClaimStatuses"]
            claim = srv.get("resourceclaims", status["resourceClaimName"])
            results = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
            assert sorted(results) == sorted([f"gpu-{i}" for i in range(4)]
                                             + [f"nic-{i}" for i in range(4)])
            gpus = sorted(results[f"gpu-{i}"]["device"] for i in range(4))
            assert gpus == [f"gpu-{i}" for i in range(4, 8)]  # the planned GPUs
            for i in range(4):
                gpu, nic = results[f"gpu-{i}"], results[f"nic-{i}"]
                assert nic["driver"] == "dra.net"
                assert roots[(gpu["driver"], gpu["pool"], gpu["device"])] == \
                    roots[(nic["driver"], nic["pool"], nic["device"])]


def test_a_gpu_without_a_nic_under_its_root(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        # dgx-1's NICs sit under the first two roots only: GPUs 4-7 have none.
        serve(srv, tmp_path, monkeypatch, nic_roots={1: ROOTS[:2]})
        hold_first_gpus(srv)
        refused = CliRunner().invoke(app, ["plan", "--workers", "2", "--gpus", "4",
                                           "--rdma", "on"])
        assert refused.exit_code == 2
        assert ("--rdma on: gpu-4 of node dgx-1 has no free dra.net NIC under its PCIe root "
                "pci0000:80 (and 3 more)") in refused.output
        plan = CliRunner().invoke(app, ["plan", "--workers", "2", "--gpus", "4", "-o", "json"])
        assert plan.exit_code == 0, plan.output
        network = json.loads(plan.stdout)["network"]
        assert network["transport"] == "tcp" and network["nic_pairs"]["used"] is False
        assert "GPU-NIC pairing: none, gpu-4 of node dgx-1" in network["nic_pairs"]["note"]
        dry = CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--name", "q",
                                       "--workers", "2", "--gpus", "4", "--dry-run",
                                       "-o", "json", "python", "t.py"])
        assert dry.exit_code == 0, dry.output
        assert "GPU-NIC pairing: none" in dry.stderr
        templates = [o for o in json.loads(dry.stdout)["items"]
                     if o["kind"] == "ResourceClaimTemplate"]
        assert len(templates) == 2
        for t in templates:
            (request,) = t["spec"]["spec"]["devices"]["requests"]
            assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"


def test_allocator_honours_match_attribute_across_requests(tmp_path, monkeypatch):
    """A GPU and a NIC under the same root, or nothing: the NICs under gpu-0's root are
    held, so the claim cannot be allocated though both requests alone could."""
    with KubeAPIServer() as srv:
        serve(srv, tmp_path, monkeypatch)
        held = srv.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": "nics", "namespace": "default"},
                           "spec": {"devices": {"requests": [{"name": "n", "exactly": {
                               "deviceClassName": "dranet", "count": 2}}]}}})
        results = [{"request": "n", "driver": "dra.net", "pool": f"dgx-{n}", "device": f"ib{i}"}
                   for n in range(2) for i in (0, 1)]
        srv.store.mutate("resource.k8s.io/resourceclaims", "default", held["metadata"]["name"],
                         lambda c: c.setdefault("status", {}).update(
                             {"allocation": {"devices": {"results": results}}}))
        selector = f'device.attributes["gpu.nvidia.com"].uuid in ["{uuid(0, 0)}", "{uuid(1, 0)}"]'
        for name, constrained in (("paired", True), ("free", False)):
            devices = {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1,
                                            "selectors": [{"cel": {"expression": selector}}]}},
                {"name": "nic", "exactly": {"deviceClassName": "dranet", "count": 1}}]}
            if constrained:
                devices["constraints"] = [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]
            srv.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"spec": {"devices": devices}}})
            srv.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"containers": [{"name": "c", "image": "x",
                                                 "resources": {"claims": [{"name": "d"}]}}],
                                 "resourceClaims": [{"name": "d", "resourceClaimTemplateName": name}]}})
        srv.step(3)
        assert not srv.get("pods", "paired")["spec"].get("nodeName")
        assert any("constraints" in why for why in srv.dra.failures.values())
        assert srv.get("pods", "free")["spec"].get("nodeName")  # without the constraint it fits
