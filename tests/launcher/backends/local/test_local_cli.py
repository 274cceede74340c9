"""The job commands against the local backend, through the CLI a user types: submit, get,
logs, wait, delete, how each rank of a failed job is shown, and what the backend refuses."""

from __future__ import annotations

import re
import shutil

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app

pytestmark = [pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun"),
              pytest.mark.usefixtures("home")]  # conftest's: own HVDK8S_HOME, no job left

runner = CliRunner()
LOCAL = ["--backend", "local"]
FAIL_RANK_1 = ("import os,sys; r=int(os.environ['OMPI_COMM_WORLD_RANK']); print('rank', r); "
               "sys.exit(3 if r==1 else 0)")


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.slow
@pytest.mark.horovod
def test_submit_wait_get_logs_list_delete_a_benchmark_run():
    pytest.importorskip("horovod.tensorflow")
    result = invoke("submit", "mpi", *LOCAL, "--name", "try", "--workers", "2", "--gpus", "0",
                    "--model", "resnet50", "--batch-size", "8", "--image-size", "64",
                    "--num-batches", "10", "--wait")
    assert result.exit_code == 0, result.output
    assert "total images/sec:" in result.stdout

    got = invoke("get", "try", *LOCAL, "-o", "json")
    assert got.exit_code == 0, got.output
    import json

    status = json.loads(got.stdout)
    assert status["phase"] == "Succeeded" and status["backend"] == "local"
    assert status["images_per_sec"] > 0 and status["result"]["world_size"] == 2
    assert [r["name"] for r in status["replicas"]] == ["try-rank-0", "try-rank-1"]

    table = invoke("get", "try", *LOCAL)
    assert table.exit_code == 0 and "try-rank-1" in table.stdout

    logs = invoke("logs", "try", *LOCAL)
    assert logs.exit_code == 0 and "total images/sec:" in logs.stdout
    rank1 = invoke("logs", "try", *LOCAL, "--rank", "1")
    assert rank1.exit_code == 0 and "total images/sec:" not in rank1.stdout

    listed = invoke("list", *LOCAL, "-o", "json")
    assert listed.exit_code == 0 and [j["name"] for j in json.loads(listed.stdout)] == ["try"]

    deleted = invoke("delete", "try", *LOCAL)
    assert deleted.exit_code == 0 and "job try deleted" in deleted.stdout
    gone = invoke("get", "try", *LOCAL)
    assert gone.exit_code == 1 and gone.stderr.strip() == (
        "error: job try not found in namespace default (hvdk8s list shows the jobs)")


def test_a_failed_job_exits_1_and_get_names_the_rank(local_jobs):
    result = invoke("submit", "mpi", *LOCAL, "--name", "bad", "--workers", "2", "--wait",
                    "python", "-c", FAIL_RANK_1)
    assert result.exit_code == 1
    assert "rank 1 exited with code 3" in result.output
    got = invoke("get", "bad", *LOCAL)
    assert got.exit_code == 0
    assert "Failed" in got.stdout and "rank 1 exited with code 3" in got.stdout
    assert invoke("wait", "bad", *LOCAL).exit_code == 1


def test_a_taken_name_is_one_line_and_exit_2(local_jobs):
    assert invoke("submit", "mpi", *LOCAL, "--name", "dup", "--wait", "true").exit_code == 0
    again = invoke("submit", "mpi", *LOCAL, "--name", "dup", "true")
    assert again.exit_code == 2
    assert again.stderr.strip().splitlines()[-1] == (
        "error: job dup already exists in namespace default; delete it first: hvdk8s delete dup")


def test_wait_timeout_exits_124_and_delete_stops_the_job(local_jobs):
    assert invoke("submit", "mpi", *LOCAL, "--name", "nap", "--workers", "2",
                  "sleep", "300").exit_code == 0
    waited = invoke("wait", "nap", *LOCAL, "--timeout", "0.3")
    assert waited.exit_code == 124
    assert invoke("delete", "nap", *LOCAL).stdout.strip() == "job nap deleted"
    assert invoke("delete", "nap", *LOCAL).stdout.strip() == "job nap not found (nothing to delete)"


def test_submit_wait_streams_the_log_and_keeps_the_timeout(local_jobs):
    import sys

    done = invoke("submit", "mpi", *LOCAL, "--name", "echo", "--workers", "2", "--wait",
                  sys.executable, "-c", "print('hello from a rank', flush=True)")
    assert done.exit_code == 0, done.output
    assert done.stdout.count("hello from a rank") == 2

    slow = invoke("submit", "mpi", *LOCAL, "--name", "slow", "--workers", "1", "--wait",
                  "--timeout", "1", "sleep", "60")
    assert slow.exit_code == 124, slow.output


def test_server_dry_run_is_refused_on_the_local_backend(home):
    result = invoke("submit", "mpi", *LOCAL, "--name", "srv", "--dry-run=server", "true")
    assert result.exit_code == 2 and "--dry-run=server" in result.stderr
    assert invoke("list", *LOCAL, "-o", "json").stdout.strip() == "[]"


def test_a_named_context_never_falls_back_to_local_jobs(local_jobs, home, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-kubeconfig"))
    assert invoke("submit", "mpi", *LOCAL, "--name", "keep", "true").exit_code == 0
    result = invoke("delete", "keep", "--context", "typo")
    assert result.exit_code != 0 and "kubeconfig" in result.stderr
    assert invoke("get", "keep", *LOCAL).exit_code == 0  # still there


def _rank_rows(table: str, job: str) -> dict[str, list[str]]:
    """POD/RANK -> the other cells of `get`'s replica table (plain columns when piped, as
    here: cut at the header's column starts)."""
    assert not set("│┃━─") & set(table), table  # no box characters when not a terminal
    lines = table.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("POD/RANK"))
    starts = [m.start() for m in re.finditer(r"(?<!\S)\S+(?: \S+)*", header)]
    rows = {}
    for line in lines:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        if cells and cells[0].startswith(f"{job}-rank-"):
            rows[cells[0]] = cells[1:]
    return rows


def test_get_shows_only_the_failing_rank_as_failed(local_jobs):
    result = invoke("submit", "mpi", *LOCAL, "--name", "bad", "--workers", "2", "--wait",
                    "python", "-c", FAIL_RANK_1)
    assert result.exit_code == 1
    got = invoke("get", "bad", *LOCAL)
    assert got.exit_code == 0
    rows = _rank_rows(got.stdout, "bad")
    # ROLE, PHASE, NODE, GPUS, RESTARTS, DETAIL: rank 0 exited 0 and has nothing to explain.
    assert rows["bad-rank-0"][1] == "Succeeded" and rows["bad-rank-0"][-1] == ""
    assert rows["bad-rank-1"][1] == "Failed" and rows["bad-rank-1"][-1] == "exit 3 rank 1 exited with code 3"
    # -o wide: the exit code in its own column; `local`, not a pod mode.
    wide = invoke("get", "bad", *LOCAL, "-o", "wide")
    rows = _rank_rows(wide.stdout, "bad")
    assert rows["bad-rank-0"][5] == "0" and rows["bad-rank-1"][5] == "3"
    assert "backend local (processes on this machine)" in wide.stdout and "mode" not in wide.stdout


def test_kubernetes_only_options_are_reported_as_ignored(local_jobs):
    result = invoke("submit", "mpi", *LOCAL, "--name", "k8s-only", "--image", "my/image:1",
                    "--selector", "pool=a", "--wait", "true")
    assert result.exit_code == 0, result.output
    assert "job k8s-only started: 1 rank on " in result.stderr
    assert "local backend: ignoring --image, --selector (they apply to Kubernetes)" in result.stderr
    plain = invoke("submit", "mpi", *LOCAL, "--name", "plain", "--wait", "true")
    assert plain.exit_code == 0 and "ignoring" not in plain.output


def test_more_ranks_than_the_machine_can_run_is_one_line(home, monkeypatch):
    from launcher.backends.local import launching

    monkeypatch.setattr(launching, "usable_cores", lambda: 2)  # whatever this machine has
    result = invoke("submit", "mpi", *LOCAL, "--name", "many", "--workers", "4096", "true")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: --workers 4096 is 4096 ranks, and the local backend runs each rank")
    assert not (home / "jobs" / "default" / "many").exists()
