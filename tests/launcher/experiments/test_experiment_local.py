"""The local-cpu experiment run for real (1 and 2 Horovod ranks on this CPU, twice), then
the report read back from the files it wrote.

The run is the session's (tests/real_runs.py): the one `hvdk8s experiment run
benchmarks/experiments/local-cpu.yaml` its help example and the README print, made once for
every test that reads its results."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.paths import ROOT
from tests.real_runs import LOCAL_CPU

EXAMPLE = ROOT / "benchmarks" / "experiments" / "local-cpu.yaml"


@pytest.mark.slow
@pytest.mark.horovod
def test_local_cpu_experiment_end_to_end(real_runs, tmp_path, monkeypatch):
    if importlib.util.find_spec("horovod") is None:  # found, not imported: TensorFlow is slow
        pytest.skip("needs Horovod")
    if shutil.which("mpirun") is None:
        pytest.skip("needs mpirun (OpenMPI)")
    code, output, work = real_runs.run(LOCAL_CPU)
    assert code == 0, f"$ {LOCAL_CPU}\nexit {code}\n{output}"
    # A copy: the run again below reads and writes the folder; others read the session's.
    out = tmp_path / "results"
    shutil.copytree(work / "results" / "local-cpu", out)
    matrix = yaml.safe_load(EXAMPLE.read_text())
    expected = sorted(workers for workers in matrix["matrix"]["workers"]
                      for _ in range(matrix["repetitions"]))

    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((int(r["workers"]), r["gpus"], r["status"]) for r in rows) == [
        (w, "0", "Succeeded") for w in expected]
    assert all(float(r["images_per_sec"]) > 0 for r in rows)
    assert all(r["predicted_images_per_sec"] == "" for r in rows)  # no prediction on the CPU
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["result"]["world_size"] for r in records) == expected
    assert all(r["result"]["world_size"] == r["workers"] for r in records)
    for r in records:
        assert "total images/sec" in (out / r["log"]).read_text()
    # Each job was deleted once recorded.
    assert not list((work.parent / "home" / "jobs" / "default").glob("local-cpu-*"))

    # Run again: every run is done, nothing is submitted.
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    again = CliRunner().invoke(app, ["experiment", "run", str(EXAMPLE), "--out", str(out)])
    total = len(expected)
    assert again.exit_code == 0 and f"{total} of {total} runs already succeeded" in again.output
    assert len(list(csv.DictReader(open(out / "results.csv")))) == total
    assert not (tmp_path / "home" / "jobs").exists()

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
