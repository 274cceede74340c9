"""The README's cluster commands, run as printed against `hvdk8s dev cluster` (the operator
shape: two 8-GPU nodes and the MPI Operator), end as the README says: each exits 0, the dry
runs print objects, and the job the hero command submits is found, followed, waited for
and deleted. Placeholders (`--cluster C`) and this machine's commands are left out."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubesim import devcluster
from launcher.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
SKIP = (" C ", "--backend local", "dev cluster", "export ", "simulate", "experiment",
        "calibrate", "top node     #")
# Commands for the trainer shape (Kubeflow Trainer, no MPI Operator): marked `# trainer`.
TRAINER = "# trainer"


def readme_cluster_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it", 1)[1].split("\nOptions follow", 1)[0]
    section = section.replace("\\\n", " ")
    commands = []
    for line in section.splitlines():
        if TRAINER in line:
            continue
        line = line.split("  #", 1)[0].strip()
        if not line.startswith("hvdk8s ") or any(s in f"{line} " for s in SKIP):
            continue
        commands += [c.strip() for c in line.split(";") if c.strip()]
    return commands


@pytest.fixture
def dev(tmp_path, monkeypatch):
    cluster = devcluster.start("operator", tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    cluster.server.script_pod(r"vgg16-launcher-.*", logs=["total images/sec: 1450.2"],
                              exit_code=0)
    yield cluster
    cluster.server.stop()


def test_the_readme_commands_run_as_printed(dev):
    commands = readme_cluster_commands()
    assert any(c.startswith("hvdk8s submit mpi --name vgg16") for c in commands), commands
    for command in commands:
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        assert "Traceback" not in result.output, (command, result.output)
        assert result.exit_code == 0, (command, result.output)
        if "--dry-run" in command:
            assert re.search(r"^kind: (Job|MPIJob)$", result.stdout, re.M), command
        if command.startswith("hvdk8s submit mpi --name vgg16"):  # it runs what it is named
            job = dev.server.get("jobs", "vgg16-launcher")
            spec = json.loads(job["metadata"]["annotations"]["hvdk8s.io/spec"])
            assert spec["benchmark"]["model"] == "vgg16"
    assert dev.server.objects("jobs", "default") == []  # the README deletes what it made


def test_the_readme_trainer_commands_run_as_printed(tmp_path, monkeypatch):
    """The `# trainer` lines against the trainer shape: the runtime shown, then installed (as
    its comment says, without --dry-run), then the TrainJob's dry run."""
    cluster = devcluster.start("trainer", tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    try:
        text = (ROOT / "README.md").read_text()
        lines = [line.split("  #", 1)[0].strip() for line in text.splitlines()
                 if TRAINER in line and line.strip().startswith("hvdk8s ")]
        assert len(lines) == 2, lines
        for command in lines:
            result = CliRunner().invoke(app, shlex.split(command)[1:])
            assert result.exit_code == 0, (command, result.output)
            if command.startswith("hvdk8s install runtime"):
                assert re.search(r"^kind: ClusterTrainingRuntime$", result.stdout, re.M), command
                installed = CliRunner().invoke(
                    app, [a for a in shlex.split(command)[1:] if a != "--dry-run"])
                assert installed.exit_code == 0, installed.output
            else:
                assert re.search(r"^kind: TrainJob$", result.stdout, re.M), command
    finally:
        cluster.server.stop()
