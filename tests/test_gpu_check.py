"""benchmarks/gpu: the GPU check without a GPU, its records read by `hvdk8s calibrate`, and
its orchestration with the jobs stubbed (no GPU here to run them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.gpu import check
from launcher.cli.app import app
from launcher.experiments.results import ResultsStore
from tests import fake_pynvml

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "gpu" / "recorded" / "h100-sxm5-example"
runner = CliRunner()


def test_no_gpu_is_one_line_and_exit_0(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.dgx1_v100(
        init_error=fake_pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert check.main(["--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "gpu check: no NVIDIA GPU here (Driver Not Loaded; run on a GPU node with the NVIDIA "
        "driver, in a container started by the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES=all, "
        "NVIDIA_DRIVER_CAPABILITIES=utility)): nothing to measure"]
    assert not (tmp_path / "out").exists()


def test_the_recorded_h100_example_calibrates_the_model(tmp_path):
    records = list(ResultsStore(RECORDED).latest().values())
    assert {r["settings"]["framework"] for r in records} == {"pytorch"}
    cal_path = tmp_path / "cal.json"
    result = runner.invoke(app, ["calibrate", str(RECORDED), "-o", str(cal_path)])
    assert result.exit_code == 0, result.output
    assert "not fitted: H100 resnet50 fp32" in result.stdout  # one fp32 run only
    assert "pytorch stand-in" in result.stdout
    (rate,) = json.loads(cal_path.read_text())["compute"]
    assert (rate["device"], rate["model"], rate["precision"]) == ("H100", "resnet50", "fp16")
    # Two batch sizes: the fitted rate and per-step cost go through both measurements.
    for r in records:
        if r["precision"] == "fp16":
            step = r["batch_size"] / rate["images_per_sec"] + rate["step_overhead_s"]
            assert r["batch_size"] / step == pytest.approx(r["images_per_sec"], rel=1e-6)

    # plan then predicts the H100 from this machine's own rate, and says so.
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes:\n- name: h1\n  gpus: 8\n  gpu_model: NVIDIA-H100-80GB-HBM3\n")
    plan = runner.invoke(app, ["plan", "-w", "1", "-g", "1", "--cluster", str(cluster),
                               "--batch-size", "256", "--precision", "fp16",
                               "--calibration", str(cal_path), "-o", "json"])
    assert plan.exit_code == 0, plan.output
    prediction = json.loads(plan.stdout)["prediction"]
    assert prediction["compute_source"].startswith("calibrated")


def test_the_committed_table_is_the_records_rendered():
    assert check.render(RECORDED) == (RECORDED / "table.md").read_text()


def test_every_single_gpu_workload_is_run_at_two_batch_sizes():
    for gpus in (1, 2, 8):
        points = check.plan_points(gpus)
        singles: dict[tuple, set[int]] = {}
        for p in points:
            if p.gpus == 1:
                singles.setdefault((p.model, p.precision), set()).add(p.batch_size)
        assert all(len(b) == 2 for b in singles.values())
        assert all(p.gpus <= gpus for p in points)
        assert any(p.gpus > 1 for p in points) == (gpus > 1)


def test_the_check_on_a_stubbed_8_gpu_machine_writes_what_calibrate_reads(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.dgx1_v100())
    monkeypatch.setattr(check, "describe_machine", lambda out, hvdk8s, inventory: [])
    monkeypatch.setattr(check, "choose_workload", lambda python, torch_python: check.Workload(
        "pytorch", "/opt/torch/.venv/bin/python", "pytorch 2.11"))
    submitted = []

    def submit(self, name, gpus, command, timeout):
        submitted.append((name, gpus, command))
        if "--preflight" in command:  # hvdk8s's preflight: what `get -o json` keeps of it
            return {"phase": "Succeeded", "preflight": {
                "verdict": "pass", "seconds": 9.0, "notes": [],
                "gpus": [{"gpu": i, "pcie": "x16 gen3 of x16 gen3", "nvlinks_up": 6,
                          "problems": ["PCIe link x8 of x16"] if i == 5 else []}
                         for i in range(gpus)],
                "paths": [{"ranks": gpus, "backend": "horovod-nccl", "busbw_gbs": 120.0}]}}, ""
        if "nccl_allreduce.py" in command[1]:
            lines = [check.NCCL_PREFIX + json.dumps({"bytes": b, "ranks": gpus, "seconds": 0.01,
                                                     "busbw_gbs": b / 0.01 * 1.75 / 1e9})
                     for b in (1 << 20, 64 << 20)]
            return {"phase": "Succeeded"}, "\n".join(lines)
        batch = int(command[command.index("--batch-size") + 1])
        return {"phase": "Succeeded", "images_per_sec": gpus * batch / (batch / 400 + 0.02)}, ""

    monkeypatch.setattr(check.Runner, "submit", submit)
    out = tmp_path / "check"
    assert check.main(["--out", str(out)]) == 0
    assert submitted[0][2][:2] == ["--preflight", "warn"]  # the preflight on every GPU, first
    assert submitted[1][2][1].endswith("torch_bench.py")  # the stand-in, by name
    assert [s[1] for s in submitted].count(8) == 3  # preflight, NCCL and the 8-GPU job
    nccl = json.loads((out / "nccl.json").read_text())
    assert [r["ranks"] for r in nccl] == [8, 8] and all(r["predicted_busbw_gbs"] > 0 for r in nccl)
    records = list(ResultsStore(out).latest().values())
    assert len(records) == len(check.plan_points(8))
    assert all(r["prediction"]["gpu_model"] == "V100" for r in records)
    table = (out / "table.md").read_text()
    assert "pytorch stand-in (torchvision)" in table and "NCCL all-reduce bus bandwidth" in table
    # The preflight's NVML checks and its figure beside the model's for this DGX-1's NVLink.
    assert "| 5 | x16 gen3 of x16 gen3 | 6 | PCIe link x8 of x16 |" in table
    assert "busbw 120 GB/s" in table and "model: 140 GB/s (NVLink inside a pod" in table
    result = runner.invoke(app, ["calibrate", str(out), "-o", str(tmp_path / "cal.json")])
    assert result.exit_code == 0, result.output
    devices = {c["device"] for c in json.loads((tmp_path / "cal.json").read_text())["compute"]}
    assert devices == {"V100"}


def test_the_machine_part_runs_hvdk8s_itself(monkeypatch, tmp_path):
    """agent, doctor and top node as separate hvdk8s processes, NVML a fake one H100 with a
    process on it (a `pynvml` module on their path that is the fake)."""
    from benchmarks.gpu import machine
    from mpijob.scheduling.topology import parse_annotation

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "pynvml.py").write_text(
        "import sys\nfrom tests import fake_pynvml\n_fake = fake_pynvml.one_h100()\n"
        "_fake.gpus[0].processes.append((777, 'trainer'))\nsys.modules[__name__] = _fake\n")
    monkeypatch.setenv("PYTHONPATH", f"{shim}:{ROOT}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "hvdk8s"))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HVDK8S_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)  # no nvidia-smi here
    fake = fake_pynvml.one_h100()
    fake.gpus[0].processes.append((777, "trainer"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)

    inventory, why = check.find_gpus()
    assert why is None and inventory.gpu_model == "NVIDIA H100 80GB HBM3"
    out = tmp_path / "out"
    assert check.describe_machine(out, check.hvdk8s_command(), inventory) == []

    topology, taken, _ = parse_annotation((out / "machine" / "agent.json").read_text())
    assert topology.gpus == 1 and taken == frozenset()  # no kubelet: no pod allocations
    assert "no PodResources" in (out / "machine" / "agent.json.stderr").read_text()
    (row,) = json.loads((out / "machine" / "top-node.json").read_text())["nodes"]
    assert row["free"] == [] and row["taken_by"] == {"0": "in use by pid 777 (trainer)"}
    assert json.loads((out / "machine" / "doctor.json").read_text())["free_gpus"] == []
