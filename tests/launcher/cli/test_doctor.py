"""`hvdk8s doctor` against the test API server set up as a bare, a Volcano and a Kueue
cluster: the findings differ as the clusters do, and the exit code says whether a job can
be submitted."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.scheduling.doctor import Facts, assess, operator_gang_flag
from mpijob.scheduling.presets import preset
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, annotation_payload

runner = CliRunner()
V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.count": "8"}


def doctor(kubeconfig, *args):
    result = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json", *args])
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)


def by_check(report) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in report["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def statuses(report, check) -> list[str]:
    return [f["status"] for f in by_check(report).get(check, [])]


def agent_annotation(node: str, allocated=None) -> dict:
    text = annotation_payload(topology=preset("dgx1-v100"), node=node, gpu_model="V100",
                              allocated=allocated or {}, updated="2026-01-01T00:00:00Z")
    return {ANNOTATION_TOPOLOGY: text}


@pytest.fixture
def empty(kube_server):
    for node in ("gpu-node-0", "gpu-node-1"):  # the shared fixture's nodes
        kube_server.remove_node(node)
    return kube_server


@pytest.fixture
def bare(empty):
    kube_server = empty
    kube_server.add_node("gpu-0", gpus=8, labels=V100, annotations=agent_annotation("gpu-0"))
    kube_server.add_node("gpu-1", gpus=8)  # no GFD labels, no agent
    kube_server.add_node("cpu-0", gpus=0)
    return kube_server


def test_bare_cluster(bare, kubeconfig):
    code, report = doctor(kubeconfig)
    assert code == 0 and report["can_submit"] is True
    assert report["version"] == "v1.31.0"
    checks = by_check(report)
    assert checks["permissions"][0]["status"] == "ok"
    assert "2 of 3 nodes offer 16 nvidia.com/gpu" in checks["gpu nodes"][0]["finding"]
    assert checks["gpu models"][0]["finding"].startswith("Tesla-V100-SXM2-16GB")
    unlabeled = checks["gpu models"][1]
    assert unlabeled["status"] == "warn" and "gpu-1" in unlabeled["finding"]
    assert "GPU Feature Discovery" in unlabeled["fix"]
    agent = checks["topology agent"]
    assert [a["status"] for a in agent] == ["info"]
    assert "gpu-1" in agent[0]["finding"] and "gpu-0" not in agent[0]["finding"]
    assert "presets from GPU Feature Discovery labels" in agent[0]["effect"]
    assert checks["mpi operator"][0]["status"] == "info"
    assert "--mode operator is refused" in checks["mpi operator"][0]["effect"]
    assert checks["gang scheduler"][0]["status"] == "info"
    assert "own all-or-nothing check" in checks["gang scheduler"][0]["effect"]
    assert checks["dra"][0]["status"] == "info"
    for f in report["findings"]:
        if f["status"] in ("warn", "fail"):
            assert f["effect"] and f["fix"], f  # each problem says what it changes and the fix


def test_volcano_cluster_with_an_operator_that_does_not_gang_schedule(bare, kubeconfig):
    bare.install_group("volcano")
    bare.install_mpi_operator()  # no --gang-scheduling
    code, report = doctor(kubeconfig)
    assert code == 0
    checks = by_check(report)
    assert "gang scheduler" not in checks
    assert checks["volcano"][0]["status"] == "ok"
    assert "without --gang-scheduling" in checks["mpi operator"][0]["finding"]
    warn = checks["volcano"][1]
    assert warn["status"] == "warn" and "--gang-scheduling=volcano" in warn["fix"]
    bare.install_mpi_operator(gang_scheduling="volcano")
    _, report = doctor(kubeconfig)
    assert statuses(report, "volcano") == ["ok"]
    assert "with --gang-scheduling=volcano" in by_check(report)["mpi operator"][0]["finding"]


def test_kueue_cluster_integrations(bare, kubeconfig):
    bare.install_kueue()  # v0.14 defaults: MPIJob on, pod off
    code, report = doctor(kubeconfig)
    assert code == 0
    kueue = by_check(report)["kueue"]
    assert [k["status"] for k in kueue] == ["ok", "ok", "info"]
    assert "built-in mode with Kueue is refused" in kueue[0]["effect"]
    assert kueue[1]["finding"] == "MPIJob integration on (kubeflow.org/mpijob)"
    assert kueue[2]["finding"] == "pod integration off (the default before v0.16)"
    bare.install_kueue(frameworks=("batch/job", "pod"))
    _, report = doctor(kubeconfig)
    kueue = by_check(report)["kueue"]
    assert kueue[1]["status"] == "warn" and "kubeflow.org/mpijob" in kueue[1]["fix"]
    assert kueue[2]["finding"] == "pod integration on"
    bare.forbid("get", "configmaps", namespace="kueue-system")
    _, report = doctor(kubeconfig)
    assert by_check(report)["kueue"][1]["status"] == "warn"
    assert "cannot be read" in by_check(report)["kueue"][1]["finding"]


def test_missing_permission_fails_and_names_the_fix(bare, kubeconfig):
    bare.forbid("create", "pods", namespace="default")
    bare.forbid("list", "nodes")
    code, report = doctor(kubeconfig)
    assert code == 1 and report["can_submit"] is False
    perms = {f["finding"]: f for f in by_check(report)["permissions"]}
    fail = perms["you may not create pods in namespace default"]
    assert fail["status"] == "fail"
    assert "kubectl auth can-i create pods -n default" in fail["fix"]
    assert perms["you may not list nodes cluster-wide"]["status"] == "warn"
    assert statuses(report, "gpu nodes") == ["warn"]  # nodes cannot be listed


def test_stale_agent_annotation(empty, kubeconfig):
    kube_server = empty
    # The annotation says a pod holds GPU 0; no such pod exists any more.
    kube_server.add_node("gpu-0", gpus=8, labels=V100,
                         annotations=agent_annotation("gpu-0", {"default/gone": [0]}))
    _, report = doctor(kubeconfig)
    agent = by_check(report)["topology agent"]
    assert agent[0]["status"] == "warn" and agent[0]["finding"].startswith("stale")


def test_table_output_and_unreachable_server(bare, kubeconfig, tmp_path):
    result = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor"])
    assert result.exit_code == 0
    assert "a job can be submitted (namespace default)" in result.stdout
    assert "topology agent" in result.stdout
    bare.stop()
    result = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["findings"][0]["status"] == "fail"


def test_operator_gang_flag_forms():
    def dep(*args):
        return {"spec": {"template": {"spec": {"containers": [{"args": list(args)}]}}}}
    assert operator_gang_flag(dep("--gang-scheduling=volcano")) == "volcano"
    assert operator_gang_flag(dep("-gang-scheduling", "scheduler-plugins-scheduler")) == \
        "scheduler-plugins-scheduler"
    assert operator_gang_flag(dep("-alsologtostderr")) == ""
    assert operator_gang_flag(None) is None


def test_dra_findings():
    def dra(**kw):
        findings = assess(Facts(server="s", namespace="default", version="v1.34.0", **kw))
        return next(f for f in findings if f.check == "dra")
    assert dra().finding.startswith("no resource.k8s.io API")
    beta = dra(dra_versions=("v1beta1",))
    assert beta.status == "info" and "resource.k8s.io/v1, Kubernetes 1.34+" in beta.effect
    no_driver = dra(dra_versions=("v1",), dra_gpu_slices=0)
    assert "no gpu.nvidia.com ResourceSlices" in no_driver.finding and no_driver.fix
    ok = dra(dra_versions=("v1", "v1beta1"), dra_gpu_slices=2)
    assert ok.status == "ok" and "claims exactly the planned GPUs" in ok.effect
    assert ok.finding == "resource.k8s.io served: v1, v1beta1; 2 gpu.nvidia.com ResourceSlices"


def test_dra_cluster(bare, kubeconfig):
    from kubesim.dra import install_dra

    install_dra(bare, publish={"gpu-0": [f"GPU-{i:04d}" for i in range(8)]})
    _, report = doctor(kubeconfig)
    (dra,) = by_check(report)["dra"]
    assert dra["status"] == "ok" and dra["finding"].endswith("1 gpu.nvidia.com ResourceSlices")
