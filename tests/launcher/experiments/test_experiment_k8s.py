"""The topology-vs-regular experiment through the real submit pipeline and Kubernetes
backend, against the in-process API server whose launcher pods print scripted rates."""

from __future__ import annotations

import csv
import json

import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.experiments.spec import load_experiment

RATES = {"topology": 900.0, "spread": 310.0}


def test_topology_vs_spread_on_the_test_cluster(k8s, tmp_path, monkeypatch):
    srv = k8s.server()  # scripted launcher pods: the test server only
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    file = tmp_path / "tvr.yaml"
    file.write_text(yaml.safe_dump({
        "name": "tvr", "backend": "kubernetes", "image": k8s.image, "namespace": k8s.namespace,
        "timeout": 120, "matrix": {"model": "vgg16", "workers": 4, "gpus": 1,
                                   "placement": ["topology", "spread"], "num_batches": 10}}))
    runs = load_experiment(file).runs
    for run in runs:
        rate = RATES[run.placement]
        srv.script_pod(rf"{run.run_id}-launcher-.*", logs=[
            f"total images/sec: {rate:.2f}",
            'HVDK8S_RESULT ' + json.dumps({"total_images_per_sec": rate, "world_size": 4})])

    out = tmp_path / "out"
    args = ["experiment", "run", str(file), "--out", str(out)]
    result = CliRunner().invoke(app, args + (["--context", k8s.context] if k8s.context else []))
    assert result.exit_code == 0, result.output

    with open(out / "results.csv", newline="") as f:
        rows = {r["placement"]: r for r in csv.DictReader(f)}
    assert {p: float(r["images_per_sec"]) for p, r in rows.items()} == RATES
    assert {r["status"] for r in rows.values()} == {"Succeeded"}
    # The live snapshot (two V100 nodes) gives the plan a placement and a prediction, and
    # the topology-aware one predicts more than four single-GPU pods.
    predicted = {p: float(r["predicted_images_per_sec"]) for p, r in rows.items()}
    assert predicted["topology"] > predicted["spread"] > 0
    nodes = {p: {d["node"] for d in json.loads(r["placement_detail"])} for p, r in rows.items()}
    assert all(n and n <= {"gpu-node-0", "gpu-node-1"} for n in nodes.values())
    # Deleted after recording: nothing of the experiment is left on the cluster.
    assert not [p for p in srv.objects("pods", k8s.namespace)
                if p["metadata"]["name"].startswith("tvr-")]

    report = CliRunner().invoke(app, ["experiment", "report", str(out)])
    assert report.exit_code == 0, report.output
    for png in ("placement.png", "predicted.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert "TOPOLOGY/SPREAD" in report.output and f"{900 / 310:.2f}x" in report.output
