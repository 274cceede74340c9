"""GPU-NIC pairing through DRA on a cluster file: `plan` shows the pairs (table and JSON),
the dry run's claims pair each GPU with a NIC under its PCIe root, and the objects validate
against the Kubernetes 1.34 schema (resource.k8s.io/v1 is GA there). The allocation itself
against the test API server: tests/launcher/backends/kubernetes/test_nic_pairing_kubeapi.py."""

from __future__ import annotations

import json

import pytest

from launcher.backends.kubernetes.rendering import render
from launcher.formats.clusterfile import cluster_from_data
from launcher.preparing.planning import plan_job
from mpijob.jobspec.spec import build_spec
from mpijob.scheduling.dra_devices import PCIE_ROOT
from tests.cluster_cli import docs_of, invoke, write
from tests.schemas import K8S_VERSION_DRA, validate_core

ROOTS = ["pci0000:00", "pci0000:40"]


def cluster(nic_roots=ROOTS) -> dict:
    return {"defaults": {"gpus": 2, "topology": "dgx1-v100"},
            "nodes": [{"name": f"n{n}", "dra": {
                "devices": [{"index": i, "uuid": f"GPU-{n}-{i}", "pcie_root": ROOTS[i]}
                            for i in range(2)],
                "nics": [{"name": f"eth{k + 1}", "pcie_root": r} for k, r in enumerate(nic_roots)]}}
                for n in range(2)]}


def test_plan_shows_the_pairs_in_the_table_and_json(tmp_path):
    path = write(tmp_path, cluster())
    table = invoke("plan", "--cluster", path, "--workers", "2", "--gpus", "2")
    assert table.exit_code == 0, table.output
    assert "nic pairs: worker 0 (n0): gpu-0+eth1, gpu-1+eth2" in table.output
    assert "network: RDMA" in table.output
    data = json.loads(invoke("plan", "--cluster", path, "--workers", "2", "--gpus", "2",
                             "-o", "json").stdout)
    pairs = data["network"]["nic_pairs"]
    assert pairs["used"] is True and pairs["driver"] == "dra.net"
    assert [(p["gpu"], p["nic"], p["pcie_root"]) for p in pairs["workers"][1]["pairs"]] == [
        ("gpu-0", "eth1", ROOTS[0]), ("gpu-1", "eth2", ROOTS[1])]
    assert data["network"]["transport"] == "rdma"


def test_dry_run_claims_pair_each_gpu_and_validate_against_1_34(tmp_path):
    result = invoke("submit", "mpi", "--name", "p", "--workers", "2", "--gpus", "2",
                    "--dry-run", "--cluster", write(tmp_path, cluster()))
    assert result.exit_code == 0, result.output
    docs = docs_of(result)
    templates = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert len(templates) == 2
    for t in templates:
        devices = t["spec"]["spec"]["devices"]
        assert [r["name"] for r in devices["requests"]] == ["gpu-0", "nic-0", "gpu-1", "nic-1"]
        assert devices["constraints"] == [
            {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT} for i in range(2)]
        nic = devices["requests"][1]["exactly"]
        assert nic["deviceClassName"] == "dranet" and nic["count"] == 1
        assert nic["selectors"][0]["cel"]["expression"] == 'device.attributes["dra.net"].rdma == true'
    for d in docs:
        if d["kind"] in ("Pod", "Job", "ResourceClaimTemplate"):
            validate_core(d, K8S_VERSION_DRA)
    worker = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "p-worker-0")
    c = worker["spec"]["containers"][0]
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert "dranet" not in json.dumps(c["resources"])  # the NICs are in the claim, not resources
    assert c["resources"]["claims"] == [{"name": "gpus"}]


def test_operator_mode_template_pairs_the_pods_gpus():
    spec = build_spec(name="j", workers=2, gpus_per_worker=2, gpu_request="dra")
    plan = plan_job(spec, cluster_from_data(cluster()))
    objects = render(plan.spec, decisions=plan.decisions, mode="operator", placement=plan.placement, benchmark_source="x")
    (template,) = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    devices = template["spec"]["spec"]["devices"]
    assert len(devices["requests"]) == 4 and len(devices["constraints"]) == 2
    assert "GPU-1-1" in devices["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    validate_core(template, K8S_VERSION_DRA)


def test_no_nic_under_a_root_on_refuses_auto_falls_back_and_says_so(tmp_path):
    path = write(tmp_path, cluster(nic_roots=["pci0000:00", "pci0000:80"]))
    refused = invoke("plan", "--cluster", path, "--workers", "2", "--gpus", "2", "--rdma", "on")
    assert refused.exit_code == 2
    assert "gpu-1 of node n0 has no free dra.net NIC under its PCIe root pci0000:40" in refused.output
    auto = invoke("plan", "--cluster", path, "--workers", "2", "--gpus", "2")
    assert auto.exit_code == 0
    assert "GPU-NIC pairing: none, gpu-1 of node n0" in auto.output and "network: TCP" in auto.output
    dry = invoke("submit", "mpi", "--name", "p", "--workers", "2", "--gpus", "2",
                 "--dry-run", "--cluster", path)
    assert dry.exit_code == 0 and "GPU-NIC pairing: none" in dry.stderr
    assert "nic-0" not in dry.stdout and "IPC_LOCK" not in dry.stdout


def test_device_plugin_gpus_pair_nothing(tmp_path):
    spec = build_spec(name="j", workers=2, gpus_per_worker=2, gpu_request="device-plugin")
    plan = plan_job(spec, cluster_from_data(cluster()))
    assert plan.decisions.rdma_request is None and plan.network.decision.pairing is None


@pytest.mark.parametrize("nics, message", [
    ([{"name": "a"}, {"name": "a"}], "a NIC name appears twice"),
    ([{"pcie_root": "x"}], "name"),
])
def test_cluster_file_nic_errors(nics, message):
    from launcher.errors import UsageError

    data = cluster()
    data["nodes"][0]["dra"]["nics"] = nics
    with pytest.raises(UsageError, match=message):
        cluster_from_data(data)
