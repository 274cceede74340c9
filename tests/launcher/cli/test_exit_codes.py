"""`submit --help`: "2 bad input, or a request the cluster cannot serve as asked (nothing
created)". Each such refusal exits 2 with its one line, and leaves nothing behind."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.k8s_env import hvdk8s


def _refused(result, starts: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), lines


def _nothing_of(srv, job: str) -> bool:
    return not [o for kind in ("jobs", "pods", "configmaps", "secrets", "services")
                for o in srv.objects(kind) if o["metadata"]["name"].startswith(job)]


def test_an_unplaceable_job_exits_2(k8s):
    srv = k8s.server()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "big", "--workers", "3", "--gpus", "8",
                    "--image", k8s.image, "python", "t.py")
    _refused(result, "job big cannot be placed")
    assert _nothing_of(srv, "big")


def test_trainjob_mode_without_trainer_exits_2(k8s):
    srv = k8s.server()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "tj", "--mode", "trainjob", "--workers",
                    "2", "--gpus", "1", "--image", k8s.image, "python", "t.py")
    _refused(result, "--mode trainjob: Kubeflow Trainer is not installed")
    assert _nothing_of(srv, "tj")


def test_operator_mode_without_the_operator_exits_2_too(k8s):
    result = hvdk8s(k8s, "submit", "mpi", "--name", "op", "--mode", "operator", "--workers",
                    "2", "--gpus", "1", "--image", k8s.image, "python", "t.py")
    assert result.exit_code == 2, result.output


def test_a_name_in_use_exits_2_and_keeps_the_job(k8s):
    srv = k8s.server()
    k8s.script_launcher("same", ["x"], exit_code=None)
    args = ["submit", "mpi", "--name", "same", "--workers", "1", "--gpus", "1",
            "--image", k8s.image, "python", "t.py"]
    assert hvdk8s(k8s, *args).exit_code == 0
    before = sorted(j["metadata"]["uid"] for j in srv.objects("jobs"))
    _refused(hvdk8s(k8s, *args), "job same already exists")
    assert sorted(j["metadata"]["uid"] for j in srv.objects("jobs")) == before


def _no_gpus(monkeypatch) -> None:
    from launcher.hardware import nvml_topology

    def unavailable():
        raise RuntimeError("no NVML driver")

    monkeypatch.setattr(nvml_topology, "collect_topology", unavailable, raising=False)


@pytest.mark.parametrize("backend", [["--backend", "local"], []])
def test_gpus_this_machine_lacks_exit_2(backend, monkeypatch, tmp_path):
    """--backend local, or no cluster configured at all (the laptop fallback)."""
    _no_gpus(monkeypatch)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(app, ["submit", "mpi", *backend, "--name", "gp", "--workers",
                                      "1", "--gpus", "1", "python", "t.py"])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "home" / "jobs").exists() or not any(
        (tmp_path / "home" / "jobs").iterdir())
