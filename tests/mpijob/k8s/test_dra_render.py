"""DRA: ResourceClaimTemplates that select exactly the planned GPUs, validated against the
resource.k8s.io/v1 schema (vendored in tests/data/k8s-schemas)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml
from typer.testing import CliRunner

from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from launcher.errors import UsageError
from launcher.formats.clusterfile import cluster_from_data
from launcher.preparing.planning import plan_job
from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.spec import RdmaRequest, build_spec
from mpijob.k8s.dra import uuid_selector
from mpijob.k8s.render import SSHKeys
from mpijob.scheduling.dra_devices import PCIE_ROOT
from tests.paths import DATA

SCHEMA = DATA / "k8s-schemas/resourceclaimtemplate-resource-v1.json"
SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 AAAA x")


def uuid(node, i):
    return f"GPU-{node:08d}-0000-0000-0000-{i:012d}"


def dra_cluster(allocated=((0,), ())):
    return {"defaults": {"gpus": 8, "topology": "dgx1-v100"},
            "nodes": [{"name": f"dgx-{n}", "allocated": list(allocated[n]),
                       "dra": {"uuids": [uuid(n, i) for i in range(8)]}} for n in range(2)]}


def validate_template(obj):
    import jsonschema

    jsonschema.validate(obj, json.loads(SCHEMA.read_text()))


def selected(template) -> list[str]:
    expr = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    return json.loads(expr.split(" in ", 1)[1])


def test_dry_run_prints_a_claim_template_selecting_the_four_planned_gpus(tmp_path):
    path = tmp_path / "dra.yaml"
    path.write_text(yaml.safe_dump(dra_cluster()))
    result = CliRunner().invoke(app, ["submit", "mpi", "--name", "d", "--workers", "4", "--gpus", "1",
                                      "--dry-run", "--cluster", str(path)])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    templates = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert len(templates) == 1 and len(pods) == 1
    planned = [int(i) for i in pods[0]["metadata"]["annotations"]["hvdk8s.io/gpus"].split(",")]
    node = int(pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
               ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0].split("-")[1])
    assert len(planned) == 4
    assert selected(templates[0]) == sorted(uuid(node, i) for i in planned)
    assert templates[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    worker = pods[0]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in json.dumps(worker.get("resources", {}))
    assert worker["resources"]["claims"] == [{"name": "gpus"}]
    assert pods[0]["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": templates[0]["metadata"]["name"]}]
    validate_template(templates[0])


def test_each_worker_pod_gets_its_own_nodes_planned_devices():
    spec = build_spec(name="j", workers=12, gpus_per_worker=1, gpu_request="dra")
    plan = plan_job(spec, cluster_from_data(dra_cluster(allocated=((0, 1, 2, 3), ()))))
    objects = render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
    templates = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaimTemplate"}
    for pod in (o for o in objects if o["kind"] == "Pod"):
        a = next(a for a in plan.placement.assignments
                 if pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                 ["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [a.node])
        n = int(a.node.split("-")[1])
        template = templates[pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]]
        assert selected(template) == sorted(uuid(n, i) for i in a.gpus)
        validate_template(template)
    assert {len(selected(t)) for t in templates.values()} == {4, 8}


def test_operator_mode_selects_every_planned_gpu_in_one_template():
    spec = build_spec(name="j", workers=16, gpus_per_worker=1, gpu_request="dra")
    plan = plan_job(spec, cluster_from_data(dra_cluster(allocated=((), ()))))
    objects = render(spec, mode="operator", placement=plan.placement, benchmark_source="x")
    assert objects[0]["kind"] == "MPIJob"
    (template,) = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    assert selected(template) == sorted(uuid(n, i) for n in range(2) for i in range(8))
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8
    worker = objects[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "j-worker-gpus"}]
    validate_template(template)


def test_without_device_data_the_claim_asks_for_one_pcie_root():
    spec = build_spec(name="j", workers=4, gpus_per_worker=1, gpu_request="dra")
    objects = render(spec, placement=None, ssh=SSH, benchmark_source="x")
    templates = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    assert len(templates) == 4  # no placement: one pod per worker
    devices = templates[0]["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 1
    spec4 = build_spec(name="j", workers=1, gpus_per_worker=4, gpu_request="dra")
    (t,) = [o for o in render(spec4, ssh=SSH, benchmark_source="x") if o["kind"] == "ResourceClaimTemplate"]
    assert t["spec"]["spec"]["devices"]["constraints"] == [{"requests": ["gpus"], "matchAttribute": PCIE_ROOT}]
    validate_template(t)


def test_device_plugin_mode_is_unchanged_and_auto_picks_it_without_dra_devices(tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "n", "gpus": 8, "topology": "dgx1-v100"}]}))
    out = CliRunner().invoke(app, ["submit", "mpi", "--name", "d", "--workers", "4", "--gpus", "1",
                                   "--dry-run", "--cluster", str(path)])
    assert out.exit_code == 0 and "ResourceClaimTemplate" not in out.stdout
    assert "nvidia.com/gpu: '4'" in out.stdout
    refused = CliRunner().invoke(app, ["submit", "mpi", "--name", "d", "--workers", "4", "--gpus", "1",
                                       "--dry-run", "--cluster", str(path), "--gpu-request", "dra"])
    assert refused.exit_code == 2 and "--gpu-request dra: no node" in refused.output
    bad = CliRunner().invoke(app, ["submit", "mpi", "--name", "d", "--workers", "4", "--gpus", "1",
                                   "--dry-run", "--cluster", str(path), "--gpu-request", "cdi"])
    assert bad.exit_code == 2 and "--gpu-request: expected auto, device-plugin, dra" in bad.output


@pytest.mark.parametrize("dra, message", [
    ({"uuids": "GPU-1"}, "dra: give uuids"),
    ({"devices": [{"index": 9, "uuid": "GPU-1"}]}, "index: expected a GPU index 0..7"),
    ({"devices": [{"index": 0, "uuid": 'GPU-"x'}]}, "uuid: expected the GPU's UUID"),
    ({"devices": [{"index": 0, "uuid": "a"}, {"index": 0, "uuid": "b"}]}, "index 0 appears twice"),
])
def test_cluster_file_dra_errors(dra, message):
    with pytest.raises(UsageError, match=message):
        cluster_from_data({"nodes": [{"name": "n", "gpus": 8, "dra": dra}]})


def test_selector_quotes_uuids_as_cel_strings():
    assert uuid_selector(["GPU-a", "GPU-b"]) == 'device.attributes["gpu.nvidia.com"].uuid in ["GPU-a", "GPU-b"]'


def test_rendered_template_also_validates_with_kubernetes_validate_1_34():
    kv = pytest.importorskip("kubernetes_validate")
    spec = build_spec(name="j", workers=8, gpus_per_worker=1, gpu_request="dra")
    plan = plan_job(spec, cluster_from_data(dra_cluster()))
    for obj in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x"):
        if obj["kind"] in ("ResourceClaimTemplate", "Pod"):
            kv.validate(obj, "1.34.0", strict=True)


def test_operator_podgroup_min_resources_count_what_the_workers_request():
    """The MPI Operator's PodGroup (Volcano) must ask for what the worker template requests:
    with GPUs through DRA no nvidia.com/gpu (the workers ask none), with an RDMA device
    that device. Fails on the build-then-patch renderer, which summed the requests before
    the DRA and RDMA passes rewrote them."""
    cluster = cluster_from_data(dra_cluster())
    spec = build_spec(name="g", workers=2, gpus_per_worker=2, gang="volcano",
                      gpu_request="dra")
    plan = plan_job(spec, cluster)
    mpijob = render(plan.spec, decisions=plan.decisions, mode="operator", placement=plan.placement,
                    benchmark_source="")[0]
    container = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    minimum = mpijob["spec"]["runPolicy"]["schedulingPolicy"]["minResources"]
    assert "nvidia.com/gpu" not in container["resources"].get("requests", {})
    assert "nvidia.com/gpu" not in minimum
    rdma = build_spec(name="r", workers=2, gpus_per_worker=1, gang="volcano")
    decided = dataclasses.replace(Decisions.undecided(rdma), rdma_request=RdmaRequest(
        resource="rdma/hca", per_gpu=False))
    mpijob = render(rdma, decisions=decided, mode="operator", benchmark_source="")[0]
    assert mpijob["spec"]["runPolicy"]["schedulingPolicy"]["minResources"]["rdma/hca"] == "2"


def test_an_elastic_worker_claims_any_free_gpus_each_paired_with_a_nic_where_asked():
    """An elastic worker may join later on whichever GPUs freed up: its claim names no
    planned UUID and no one PCIe root for all its GPUs; GPU-NIC pairs stay pairs."""
    spec = build_spec(name="j", workers=2, min_workers=1, max_workers=3, gpus_per_worker=4,
                      gpu_request="dra", command=("python", "t.py"))
    (t,) = [o for o in render(spec, ssh=SSH) if o["kind"] == "ResourceClaimTemplate"]
    assert t["spec"]["spec"]["devices"] == {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}}]}
    validate_template(t)
    paired = dataclasses.replace(Decisions.undecided(spec), rdma_request=RdmaRequest(
        resource="dranet", per_gpu=True, nic_driver="dra.net"))
    (t,) = [o for o in render(spec, decisions=paired, ssh=SSH)
            if o["kind"] == "ResourceClaimTemplate"]
    devices = t["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == [
        "gpu-0", "nic-0", "gpu-1", "nic-1", "gpu-2", "nic-2", "gpu-3", "nic-3"]
    assert not any("selectors" in r["exactly"] for r in devices["requests"]
                   if r["name"].startswith("gpu"))
    assert devices["constraints"][0] == {"requests": ["gpu-0", "nic-0"],
                                         "matchAttribute": PCIE_ROOT}
    validate_template(t)
