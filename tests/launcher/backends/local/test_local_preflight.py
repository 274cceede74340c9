"""A local job's preflight, through the CLI: the MPI all-reduce of this machine's ranks
before the program, reported in `get` and kept in `get -o json`; under fail, a preflight
that does not pass keeps the program from starting."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app

pytestmark = [pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun"),
              pytest.mark.usefixtures("home")]  # conftest's: own HVDK8S_HOME, no job left

runner = CliRunner()
LOCAL = ["--backend", "local"]


@pytest.mark.slow
def test_a_local_job_shows_its_preflight_in_get():
    pytest.importorskip("mpi4py")
    result = runner.invoke(app, ["submit", "mpi", *LOCAL, "--name", "pf", "--workers", "4",
                                 "--preflight", "warn", "--wait", "--",
                                 "python", "-c", "print('program ran')"])
    assert result.exit_code == 0, result.output

    got = runner.invoke(app, ["get", "pf", *LOCAL, "-o", "json"])
    status = json.loads(got.stdout)
    pre = status["preflight"]
    assert pre["verdict"] == "pass" and pre["policy"] == "warn"
    (path,) = pre["paths"]
    # The four ranks of this machine, measured (busbw > 0), not judged: no CPU model.
    assert path["path"] == "node" and path["ranks"] == 4 and path["busbw_gbs"] > 0
    assert path["verdict"] == "unjudged" and path["backend"] == "mpi"

    table = runner.invoke(app, ["get", "pf", *LOCAL])
    assert "preflight: passed" in table.stdout
    assert "4 ranks, busbw" in table.stdout

    logs = runner.invoke(app, ["logs", "pf", *LOCAL])
    assert "program ran" in logs.stdout


def test_a_local_cpu_job_runs_no_preflight_unless_asked():
    result = runner.invoke(app, ["submit", "mpi", *LOCAL, "--name", "pf", "--workers", "2",
                                 "--dry-run", "--", "python", "-c", "print(1)"])
    assert result.exit_code == 0, result.output
    assert "hvdk8s_preflight.py" not in result.stdout
    asked = runner.invoke(app, ["submit", "mpi", *LOCAL, "--name", "pf", "--workers", "2",
                                "--preflight", "fail", "--dry-run", "--", "python", "-c", "print(1)"])
    assert "hvdk8s_preflight.py --policy fail" in asked.stdout


@pytest.mark.slow
@pytest.mark.horovod
def test_an_elastic_local_job_runs_its_preflight_at_the_start():
    pytest.importorskip("horovod.tensorflow")
    result = runner.invoke(app, ["submit", "mpi", *LOCAL, "--name", "pfe", "--workers", "2",
                                 "--min-workers", "1", "--max-workers", "2", "--preflight",
                                 "warn", "--wait", "--", "python", "-c", "print('program ran')"])
    assert result.exit_code == 0, result.output
    pre = json.loads(runner.invoke(app, ["get", "pfe", *LOCAL, "-o", "json"]).stdout)["preflight"]
    assert pre["verdict"] == "pass"
    (path,) = pre["paths"]  # this machine: one pod of both ranks (--uniform-slots 2)
    assert path["path"] == "node" and path["ranks"] == 2 and path["backend"] == "horovod-cpu" and path["busbw_gbs"] > 0
