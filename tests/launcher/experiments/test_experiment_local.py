"""The local-cpu experiment, reduced, run for real: 1 and 2 Horovod ranks on this CPU, then
the report read back from the files it wrote."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.paths import ROOT
from tests.slow_set import slow_fixture

EXAMPLE = ROOT / "benchmarks" / "experiments" / "local-cpu.yaml"



@slow_fixture
def reduced_local_cpu(tmp_path, monkeypatch) -> Path:
    if importlib.util.find_spec("horovod") is None:  # found, not imported: TensorFlow is slow
        pytest.skip("needs Horovod")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun (OpenMPI)")
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    data = yaml.safe_load(EXAMPLE.read_text())
    data["matrix"].update(workers=[1, 2], num_batches=5, num_warmup_batches=1, image_size=32)
    data["repetitions"] = 1
    path = tmp_path / "local-cpu.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
@pytest.mark.horovod
def test_local_cpu_experiment_end_to_end(reduced_local_cpu, tmp_path):
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["experiment", "run", str(reduced_local_cpu), "--out", str(out)])
    assert result.exit_code == 0, result.output

    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["workers"], r["gpus"], r["status"]) for r in rows] == [
        ("1", "0", "Succeeded"), ("2", "0", "Succeeded")]
    assert all(float(r["images_per_sec"]) > 0 for r in rows)
    assert all(r["predicted_images_per_sec"] == "" for r in rows)  # no prediction on the CPU
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["result"]["world_size"] for r in records] == [1, 2]
    for r in records:
        assert "total images/sec" in (out / r["log"]).read_text()
    # Each job was deleted once recorded.
    assert not list((tmp_path / "home" / "jobs" / "default").glob("local-cpu-*"))

    # Run again: both are done, nothing is submitted.
    again = CliRunner().invoke(app, ["experiment", "run", str(reduced_local_cpu), "--out", str(out)])
    assert again.exit_code == 0 and "2 of 2 runs already succeeded" in again.output
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 2

    report = CliRunner().invoke(app, ["experiment", "report", str(out), "-o", "json"])
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    assert [row["workers"] for row in data["rows"]] == [1, 2]
    plots = {p["name"]: p for p in data["plots"]}
    assert (out / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert plots["placement.png"]["path"] is None and plots["predicted.png"]["path"] is None


def test_real_local_run_that_cannot_start_is_recorded(tmp_path, monkeypatch):
    """Cheap and real: a GPU run on a machine without GPUs is refused by the local backend
    before anything starts, and the refusal is the run's recorded reason."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has GPUs: the run would start")
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({"name": "gpu-here", "backend": "local", "timeout": 60,
                                    "matrix": {"model": "resnet50", "workers": 1, "gpus": 1}}))
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["experiment", "run", str(path), "--out", str(out)])
    assert result.exit_code == 1
    with open(out / "results.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "Failed" and row["reason"].startswith("not submitted: ")
    assert row["images_per_sec"] == ""
