"""One answer about this machine's free GPUs: submit, plan, top node and doctor agree."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from launcher.backends.local import gpus as local_gpus
from launcher.backends.local import state
from launcher.cli.app import app
from mpijob.phases import JobPhase
from tests import fake_pynvml

runner = CliRunner()
HOLDER = "pid 4242 (python3)"


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """No cluster configured; one H100 that another program computes on."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HVDK8S_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "hvdk8s"))
    nvml = fake_pynvml.one_h100()
    nvml.gpus[0].processes.append((4242, "/usr/bin/python3"))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def test_a_gpu_another_program_holds_is_taken_for_all_four_commands(machine, tmp_path):
    submit = runner.invoke(app, ["submit", "mpi", "--backend", "local", "-w", "1", "-g", "1",
                                 "--name", "g1", "python", "-c", "pass"])
    assert submit.exit_code != 0
    assert "0 of them free" in submit.stderr and f"GPU0 in use by {HOLDER}" in submit.stderr
    assert not (tmp_path / "hvdk8s" / "jobs").exists() or \
        not any((tmp_path / "hvdk8s" / "jobs").rglob("g1"))

    plan = runner.invoke(app, ["plan", "-w", "1", "-g", "1", "-o", "json"])
    assert plan.exit_code == 1, plan.output
    assert json.loads(plan.stdout)["feasible"] is False
    assert f"taken: GPU0 in use by {HOLDER}" in plan.stderr

    (row,) = json.loads(runner.invoke(app, ["top", "node", "-o", "json"]).stdout)["nodes"]
    assert row["gpus"] == 1 and row["allocated"] == [0] and row["free"] == []
    assert row["taken_by"] == {"0": f"in use by {HOLDER}"}
    table = runner.invoke(app, ["top", "node"])
    assert f"taken: GPU0 in use by {HOLDER}" in table.stdout

    doctor = runner.invoke(app, ["doctor", "-o", "json"])
    report = json.loads(doctor.stdout)
    assert report["free_gpus"] == [] and report["can_submit_gpu_job"] is False
    (gpus,) = [f for f in report["findings"] if f["check"] == "gpus"]
    assert gpus["status"] == "warn" and HOLDER in gpus["finding"]
    said = runner.invoke(app, ["doctor"]).stdout
    assert "a job can be submitted with --gpus 0 only: 0 of 1 GPU free" in said \
        or "a job cannot be submitted" in said  # no mpirun


def test_the_same_gpu_once_free_is_free_for_all_four(machine):
    machine.gpus[0].processes.clear()
    plan = runner.invoke(app, ["plan", "-w", "1", "-g", "1", "-o", "json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["placement"][0]["gpus"] == [0]
    (row,) = json.loads(runner.invoke(app, ["top", "node", "-o", "json"]).stdout)["nodes"]
    assert row["free"] == [0] and row["allocated"] == []
    report = json.loads(runner.invoke(app, ["doctor", "-o", "json"]).stdout)
    assert report["free_gpus"] == [0]


def test_mig_mode_and_hvdk8s_jobs_take_gpus_too(machine):
    machine.gpus[0].processes.clear()
    machine.gpus[0].mig[0] = "MIG-aaaa"
    mig = local_gpus.gpu_state()
    assert mig.count == 1 and mig.free == () and "MIG" in mig.taken[0]

    machine.gpus[0].mig[0] = None
    # A job just submitted: its state says GPU 0 before any rank has touched CUDA.
    paths = state.job_paths("a", "default")
    paths.dir.mkdir(parents=True)
    state.write_status(paths.status, state.StatusRecord(uid="u1", phase=JobPhase.PENDING,
                                                        gpus=[0]))
    assert local_gpus.gpu_state().taken == {0: "held by hvdk8s job default/a"}
    doctor = json.loads(runner.invoke(app, ["doctor", "-o", "json"]).stdout)
    assert doctor["taken_gpus"] == {"0": "held by hvdk8s job default/a"}
    # Its supervisor gone (the machine's processes killed): it holds nothing any more.
    state.write_status(paths.status, state.StatusRecord(uid="u1", phase=JobPhase.RUNNING,
                                                        gpus=[0], supervisor_pid=2 ** 22 + 1))
    assert local_gpus.gpu_state().taken == {}
