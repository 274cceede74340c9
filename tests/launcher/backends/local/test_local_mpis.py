"""The local backend end to end under each MPI a user may have (tests/local_mpis.py): Open MPI
4.1, Open MPI 5, MPICH's Hydra and Intel MPI. The same jobs, the same answers: success and every
rank's log, a failing rank, a killed rank, delete while running, a user's own `python3`,
and the line of a GPU job starting under that mpirun."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid

import pytest

from launcher.backends.base import FAILED, RUNNING, SUCCEEDED
from launcher.backends.local import gpus as local_gpus
from launcher.backends.local import procs as local_procs
from launcher.backends.local.state import job_paths, read_json
from mpijob.k8s.command import hostfile_text, mpirun_argv
from tests import local_mpis
from tests.launcher.backends.contract_calls import describe_local, start_local
from tests.launcher.backends.local.test_local_backend import _cmdline_pids, _wait_until
from tests.local_mpis import RANK, LocalMpiCase

local_mpi = local_mpis.local_mpi  # the fixture, by its name here


def _python(program: str) -> tuple[str, ...]:
    return ("python", "-c", f"import os, sys, time; r = {RANK}; {program}")


def test_four_ranks_succeed_and_each_has_its_log(backend, local_mpi: LocalMpiCase):
    spec = local_mpi.spec(name="ok", workers=4, command=_python("print('hello from', r)"))
    start_local(backend, spec, None, mode="pods")
    status = backend.wait("ok", timeout=120)
    assert status.phase == SUCCEEDED, status.log_tail
    assert [r.phase for r in status.replicas] == [SUCCEEDED] * 4
    assert list(backend.logs("ok", all_replicas=True)) == [
        f"[ok-rank-{r}] hello from {r}" for r in range(4)]
    assert list(backend.logs("ok", rank=2)) == ["hello from 2"]
    # All four pass through mpirun's output too (pieces of lines may interleave there).
    assert "".join(backend.logs("ok")).count("hello from") == 4


ALLREDUCE_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"""


def test_an_mpi_program_talks_across_four_ranks(backend, local_mpi: LocalMpiCase, tmp_path):
    """Real MPI traffic under the generated line (its transports and binding), more ranks
    than this machine may have cores."""
    mpicc = local_mpi.mpicc()
    if mpicc is None:
        pytest.skip(f"{local_mpi.name}: no mpicc (its development package is not installed)")
    (tmp_path / "allreduce.c").write_text(ALLREDUCE_C)
    built = subprocess.run([mpicc, "-o", str(tmp_path / "allreduce"), str(tmp_path / "allreduce.c")],
                           capture_output=True, text=True, timeout=120)
    if built.returncode != 0:
        pytest.skip(f"{local_mpi.name}: mpicc cannot build here: {built.stderr.strip()[-200:]}")
    start_local(backend, local_mpi.spec(name="mpi", workers=4, command=(str(tmp_path / "allreduce"),)),
                  None, mode="pods")
    status = backend.wait("mpi", timeout=120)
    assert status.phase == SUCCEEDED, status.log_tail
    assert list(backend.logs("mpi", all_replicas=True)) == [
        f"[mpi-rank-{r}] rank {r} of 4: sum 6" for r in range(4)]


def test_a_failing_rank_is_named_with_its_exit_code(backend, local_mpi: LocalMpiCase):
    program = "print('rank', r, flush=True); time.sleep(0.5) if r == 1 else None; sys.exit(3 if r == 1 else 0)"
    start_local(backend, local_mpi.spec(name="bad", workers=3, command=_python(program)), None, mode="pods")
    status = backend.wait("bad", timeout=120)
    assert status.phase == FAILED
    assert (status.reason, status.message) == ("rank failed", "rank 1 exited with code 3")
    assert status.log_tail == ["rank 1"]  # that rank's own log
    failed = status.replicas[1]
    assert (failed.phase, failed.exit_code, failed.message) == (FAILED, 3, "rank 1 exited with code 3")
    # The others exited 0 before it, on their own: they succeeded; only rank 1 failed.
    assert [(r.phase, r.exit_code) for r in status.replicas[::2]] == [(SUCCEEDED, 0)] * 2
    assert status.images_per_sec is None and status.result is None
    assert read_json(job_paths("bad", "default").status)["exit_code"] == 3
    assert list(backend.logs("bad", all_replicas=True)) == [
        "[bad-rank-0] rank 0", "[bad-rank-1] rank 1", "[bad-rank-2] rank 2"]


def test_a_killed_rank_is_named_with_its_signal(backend, local_mpi: LocalMpiCase):
    program = ("time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL) if r == 1 else time.sleep(1)")
    command = ("python", "-c", f"import os, signal, sys, time; r = {RANK}; {program}")
    start_local(backend, local_mpi.spec(name="kill", workers=2, command=command), None, mode="pods")
    status = backend.wait("kill", timeout=120)
    assert status.phase == FAILED
    assert status.message == "rank 1 was killed by signal 9 (Killed)"
    assert status.replicas[1].phase == FAILED


def test_delete_of_a_running_job_leaves_no_process(backend, local_mpi: LocalMpiCase):
    token = uuid.uuid4().hex
    spec = local_mpi.spec(name="sleepy", workers=2, command=("sh", "-c", f"sleep 300; echo {token}"))
    start_local(backend, spec, None, mode="pods")
    raw = read_json(job_paths("sleepy", "default").status)
    _wait_until(lambda: len(_cmdline_pids(token)) >= 2)
    assert backend.get("sleepy").phase == RUNNING
    assert backend.delete("sleepy") is True
    assert _cmdline_pids(token) == []
    assert local_procs.job_pids(raw["uid"], raw["supervisor_pid"]) == []
    assert not job_paths("sleepy", "default").dir.exists()


@pytest.mark.parametrize("python", ["python3", "python"])
def test_a_bare_python_is_the_one_that_runs_hvdk8s(backend, local_mpi: LocalMpiCase, python):
    # Open MPI by absolute path puts its bin first on the ranks' PATH (/usr/bin: the
    # system's python3); PyPI's Open MPI 5 is a venv with its own python3, first on PATH.
    user_path = os.environ["PATH"]
    command = (python, "-c", "import os, sys; print(sys.executable); print(os.environ['PATH'])")
    start_local(backend, local_mpi.spec(name="py", workers=2, command=command), None, mode="pods")
    status = backend.wait("py", timeout=120)
    assert status.phase == SUCCEEDED, status.log_tail
    shims = job_paths("py", "default").shims
    for rank in (0, 1):
        executable, path = list(backend.logs("py", rank=rank))
        assert executable == sys.executable
        # The user's PATH, in its order, after the job's own commands.
        assert path == f"{shims}{os.pathsep}{user_path}"


def test_a_gpu_jobs_line_starts_under_this_mpirun(backend, local_mpi: LocalMpiCase, tmp_path,
                                                   monkeypatch):
    """The dry run of `--gpus 1` (its program `hostname`), run as printed; and the line a
    launcher pod runs, with a hostfile of this machine's slots."""
    from mpijob.scheduling.presets import preset

    monkeypatch.setattr(local_gpus, "_local_topology", lambda spec: preset("dgx1-v100"))
    monkeypatch.setattr(local_gpus, "busy_gpus", lambda count: set())
    spec = local_mpi.spec(name="gpu", workers=2, gpus_per_worker=1, command=("hostname",))
    described = describe_local(backend, spec)
    argv = shlex.split(described["command"])
    if local_mpi.implementation == "OpenMPI":  # GPU ranks are not bound
        assert argv[argv.index("--bind-to") + 1] == "none" and "-bind-to" not in argv
    job = job_paths("gpu", "default")
    job.dir.mkdir(parents=True)
    job.hostfile.write_text(described["hostfile"])
    ran = subprocess.run(argv, env={**os.environ, **described["env"]}, capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.split() == [os.uname().nodename] * 2

    pod_line = mpirun_argv(spec, str(tmp_path / "hostfile"))
    (tmp_path / "hostfile").write_text(hostfile_text(spec, [("localhost", 2)]))
    pod_line[0] = local_mpi.mpirun
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    ran = subprocess.run(pod_line, env={**os.environ, **root}, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.split() == [os.uname().nodename] * 2
