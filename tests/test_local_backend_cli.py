"""The local backend through the CLI a user types: how each rank of a failed job is shown,
the Kubernetes-only options it reports as ignored, and the ranks it refuses to start."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")

LOCAL = ["--backend", "local"]
FAIL_RANK_1 = ("import os,sys; r=int(os.environ['OMPI_COMM_WORLD_RANK']); print('rank', r); "
               "sys.exit(3 if r==1 else 0)")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    from launcher.backends.local import LocalBackend

    backend = LocalBackend(stop_grace_seconds=2.0)
    for status in backend.list(all_namespaces=True):
        backend.delete(status.name, status.namespace)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _rank_rows(table: str, job: str) -> dict[str, list[str]]:
    """POD/RANK -> the other cells of `get`'s replica table."""
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0].startswith(f"{job}-rank-"):
            rows[cells[0]] = cells[1:]
    return rows


def test_get_shows_only_the_failing_rank_as_failed():
    result = invoke("submit", "mpi", *LOCAL, "--name", "bad", "--workers", "2", "--wait",
                    "python", "-c", FAIL_RANK_1)
    assert result.exit_code == 1
    got = invoke("get", "bad", *LOCAL)
    assert got.exit_code == 0
    rows = _rank_rows(got.stdout, "bad")
    # ROLE, PHASE, NODE, GPUS, RESTARTS, DETAIL: rank 0 exited 0 and has nothing to explain.
    assert rows["bad-rank-0"][1] == "Succeeded" and rows["bad-rank-0"][-1] == ""
    assert rows["bad-rank-1"][1] == "Failed" and rows["bad-rank-1"][-1] == "exit 3 rank 1 exited with code 3"


def test_kubernetes_only_options_are_reported_as_ignored():
    result = invoke("submit", "mpi", *LOCAL, "--name", "k8s-only", "--image", "my/image:1",
                    "--selector", "pool=a", "--wait", "true")
    assert result.exit_code == 0, result.output
    assert "job k8s-only started: 1 rank on " in result.stderr
    assert "local backend: ignoring --image, --selector (they apply to Kubernetes)" in result.stderr
    plain = invoke("submit", "mpi", *LOCAL, "--name", "plain", "--wait", "true")
    assert plain.exit_code == 0 and "ignoring" not in plain.output


def test_more_ranks_than_the_machine_can_run_is_one_line(home, monkeypatch):
    from launcher.backends import local

    monkeypatch.setattr(local, "usable_cores", lambda: 2)  # whatever this machine has
    result = invoke("submit", "mpi", *LOCAL, "--name", "many", "--workers", "4096", "true")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: --workers 4096 is 4096 ranks, and the local backend runs each rank")
    assert not (home / "jobs" / "default" / "many").exists()
