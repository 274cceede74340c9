"""Elastic jobs with the local backend (launcher/backends/local/elastic.py): horovodrun
elastic over Gloo with each worker a local "host"; one rank's process killed leaves the
job running on the other to a Succeeded end; what this machine cannot give is refused."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launcher.backends.local import elastic as local_elastic
from launcher.cli.app import app
from mpijob.jobspec.spec import build_spec
from tests.horovod_gloo import needs_gloo

runner = CliRunner()
LOCAL = ["--backend", "local"]


pytestmark = pytest.mark.usefixtures("home")  # conftest's: own HVDK8S_HOME, no job left


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def _program_of_rank(job_dir: Path, rank: int) -> int | None:
    """The pid of the benchmark process horovodrun started as `rank` of this job (the
    child of the rank wrapper)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (f"HOROVOD_RANK={rank}".encode() in env and str(job_dir).encode() in b"".join(env)
                and any(a.endswith(b"hvd_cnn_bench.py") for a in argv)
                and not any(a.endswith(b"rank.py") for a in argv)):
            return int(pid)
    return None


@pytest.mark.slow
@pytest.mark.horovod
def test_killing_one_ranks_process_leaves_the_job_running_on_the_other(home):
    if local_elastic.horovodrun(sys.executable) is None or find_spec("tensorflow") is None:
        pytest.skip("needs horovodrun and TensorFlow")
    needs_gloo()
    submitted = invoke("submit", "mpi", *LOCAL, "--name", "el", "--workers", "2",
                       "--min-workers", "1", "--max-workers", "2", "--gpus", "0",
                       "--batch-size", "2", "--image-size", "32", "--num-batches", "40",
                       "--num-warmup-batches", "1")
    assert submitted.exit_code == 0, submitted.output
    job_dir = home / "jobs" / "default" / "el"
    rank0 = job_dir / "ranks" / "rank.0.log"
    deadline = time.monotonic() + 300
    while "elastic: training on 2 workers" not in (rank0.read_text() if rank0.exists() else ""):
        assert time.monotonic() < deadline, invoke("logs", "el", *LOCAL).output
        time.sleep(0.5)
    victim = _program_of_rank(job_dir, 1)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)

    waited = invoke("wait", "el", *LOCAL, "--timeout", "600")
    logs = invoke("logs", "el", *LOCAL).stdout
    assert waited.exit_code == 0, waited.output + logs
    assert "now 1 workers (1 ranks)" in logs, logs
    assert "elastic: phase" in logs and "1 workers (1 ranks)" in logs, logs
    assert "total images/sec: " in logs, logs
    status = json.loads(invoke("get", "el", *LOCAL, "-o", "json").stdout)
    assert status["phase"] == "Succeeded", status


def test_what_this_machine_cannot_give_is_refused_in_one_line():
    hosts = local_elastic.hosts()
    too_many = invoke("submit", "mpi", *LOCAL, "--name", "big", "--workers", "1",
                      "--min-workers", "1", "--max-workers", str(len(hosts) + 1),
                      "--gpus", "0", "--dry-run")
    assert too_many.exit_code == 2
    assert too_many.output.strip().splitlines()[-1] == (
        f"error: --max-workers {len(hosts) + 1}: this machine gives horovodrun {len(hosts)} "
        f"local hosts ({', '.join(hosts)}), one per worker; give --max-workers "
        f"{len(hosts)} or less")
    gpus = invoke("submit", "mpi", *LOCAL, "--name", "g", "--workers", "1",
                  "--max-workers", "2", "--gpus", "1", "--dry-run")
    assert gpus.exit_code == 2
    assert "CPU workers only (--gpus 0)" in gpus.output.strip().splitlines()[-1]


def test_the_dry_run_shows_horovodrun_elastic_over_the_local_hosts(home):
    if local_elastic.horovodrun(sys.executable) is None:
        pytest.skip("needs horovodrun")
    shown = invoke("submit", "mpi", *LOCAL, "--name", "d", "--workers", "1",
                   "--min-workers", "1", "--max-workers", "2", "--gpus", "0", "--dry-run",
                   "-o", "json")
    assert shown.exit_code == 0, shown.output
    (described,) = json.loads(shown.stdout)["items"]
    argv = described["command"].split()
    assert argv[1:8] == ["--gloo", "-np", "1", "--min-np", "1", "--max-np", "2"]
    assert argv[argv.index("--network-interface") + 1] == "lo"
    assert argv[-1] == "--elastic"
    assert described["hosts"] == [f"{h}:1" for h in local_elastic.hosts()[:2]]
    assert not (home / "jobs").exists()  # a dry run creates nothing


def test_scale_changes_the_hosts_horovodrun_discovers_within_the_bounds(local_jobs, home):
    if local_elastic.horovodrun(sys.executable) is None:
        pytest.skip("needs horovodrun")
    submitted = invoke("submit", "mpi", *LOCAL, "--name", "s", "--workers", "1",
                       "--min-workers", "1", "--max-workers", "2", "--gpus", "0",
                       "python", "-c", "import time; time.sleep(120)")
    assert submitted.exit_code == 0, submitted.output
    discovery = home / "jobs" / "default" / "s" / local_elastic.DISCOVERY

    def discovered() -> list[str]:
        import subprocess

        return subprocess.run([str(discovery)], capture_output=True, text=True,
                              check=True).stdout.split()

    hosts = local_elastic.host_slots(build_spec(name="s", workers=1, max_workers=2,
                                                gpus_per_worker=0))
    assert discovered() == hosts[:1]
    job_dir = home / "jobs" / "default" / "s"
    deadline = time.monotonic() + 120
    while local_elastic.running_ranks(job_dir) != 1:
        assert time.monotonic() < deadline, invoke("logs", "s", *LOCAL).output
        time.sleep(0.2)
    # scale says "scaled" only once the job runs the new size: horovodrun's new rank.
    grown = invoke("scale", "s", *LOCAL, "--workers", "2", "--timeout", "60")
    assert grown.exit_code == 0, grown.output
    assert grown.stdout.strip() == "job s: scaled to 2 workers (elastic 1..2)"
    assert local_elastic.running_ranks(job_dir) == 2
    assert discovered() == hosts
    got = invoke("get", "s", *LOCAL).output
    assert "workers: 2 running (elastic 1..2, started with 1)" in got, got
    assert "scaled to 2 workers (hvdk8s scale)" in got
    assert json.loads(invoke("get", "s", *LOCAL, "-o", "json").stdout)["workers"] == 2
    # Shrinking: this program has no hvd.elastic loop whose commit would let horovodrun
    # stop a rank; scale says what it waits for rather than "scaled".
    shrunk = invoke("scale", "s", *LOCAL, "--workers", "1", "--timeout", "1")
    if shrunk.exit_code == 0:
        assert local_elastic.running_ranks(job_dir) == 1
    else:
        assert shrunk.exit_code == 124, shrunk.output
        assert "scaled to" not in shrunk.output
        assert "job s: asked for 1 workers; 2 ranks running after 1s, waiting for " \
            "horovodrun to stop ranks" in shrunk.output
    assert discovered() == hosts[:1]  # the change stands
    too_many = invoke("scale", "s", *LOCAL, "--workers", "3")
    assert too_many.exit_code == 2
    assert too_many.output.strip() == ("error: --workers: job s runs 1..2 workers "
                                       "(--min-workers/--max-workers), not 3")
    assert discovered() == hosts[:1]
