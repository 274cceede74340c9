"""The mpirun line as a typed value (mpijob.k8s.command.MpirunLine), rendered last for the
mpirun that reads it, and how the local backend finds that mpirun and asks whose it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.backends.local.mpi import check_mpi
from launcher.errors import UserError
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.command import LocalRun, MpiDialect, mpirun_argv, mpirun_line


def _spec(**kw) -> JobSpec:
    return JobSpec(name="l", workers=2, command=("t",), **kw)


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_a_pods_line_is_valid_for_open_mpi_4_and_5():
    argv = mpirun_argv(_spec(), "/h")
    # Open MPI 5's prterun reads `-bind-to none` as a program named none.
    assert argv[:9] == ["mpirun", "-np", "2", "--hostfile", "/h", "--bind-to", "none",
                        "--map-by", "slot"]
    assert "-bind-to" not in argv and "-map-by" not in argv
    assert "--allow-run-as-root" not in argv and "--oversubscribe" not in argv
    assert _pairs(argv, "-mca") == ["pml", "btl", "btl_vader_single_copy_mechanism"]
    assert argv[-1] == "t"


def test_open_mpi_5_gets_its_own_names_where_4s_differ():
    line = mpirun_line(_spec(), "/h")
    four, five = line.argv(MpiDialect("OpenMPI", 4)), line.argv(MpiDialect("OpenMPI", 5))
    assert four == line.argv()  # a pod's line is 4's
    # 5 moved single-copy (CMA) into its smsc framework and ignores 4's name for it.
    assert five[five.index("smsc") + 1] == "^cma" and "btl_vader_single_copy_mechanism" not in five
    i, j = four.index("btl_vader_single_copy_mechanism"), five.index("smsc")
    assert four[:i - 1] + four[i + 2:] == five[:j - 1] + five[j + 2:]  # nothing else differs


def test_what_a_local_run_adds_is_fields_rendered_for_each_mpi():
    local = LocalRun(allow_run_as_root=True, oversubscribe=True, cores_per_rank=2)
    line = mpirun_line(_spec(), "/h", mpirun="/usr/bin/mpirun", local=local)
    assert (line.cores_per_rank, line.allow_run_as_root, line.oversubscribe) == (2, True, True)
    ompi = line.argv(MpiDialect("OpenMPI", 4))
    assert ompi[0] == "/usr/bin/mpirun"
    assert ompi[ompi.index("--map-by") + 1] == "slot:PE=2" and ompi[ompi.index("--bind-to") + 1] == "core"
    assert "--allow-run-as-root" in ompi and "--oversubscribe" in ompi
    hydra = mpirun_line(_spec(mpi_implementation="MPICH"), "/h", local=local).argv(MpiDialect("MPICH"))
    # Hydra runs as root and oversubscribes without being told; it binds N cores as core:N.
    assert hydra[hydra.index("-bind-to") + 1] == "core:2"
    assert "--allow-run-as-root" not in hydra and "--oversubscribe" not in hydra
    assert "-mca" not in hydra


def test_hydra_lines_for_mpich_and_intel():
    spec = _spec(mpi_implementation="MPICH", env={"LR": "1"}, host_network=True,
                 network_interface="ib0")
    argv = mpirun_argv(spec, "/h")
    assert argv[:5] == ["mpirun", "-n", "2", "-f", "/h"]
    assert _pairs(argv, "-envlist")[0].split(",")[-1] == "LR"
    assert _pairs(argv, "-iface") == ["ib0"] and argv[argv.index("-genv") + 1:][:2] == [
        "NCCL_SOCKET_IFNAME", "ib0"]
    intel = mpirun_argv(_spec(mpi_implementation="Intel"), "/h")
    assert intel[3:5] == ["-hostfile", "/h"] and "-bind-to" not in intel


def test_only_the_variables_set_where_mpirun_runs_are_exported():
    line = mpirun_line(_spec(env={"MINE": "1"}), "/h", set_env={"PATH", "MINE"})
    assert line.exported_env == ("PATH", "MINE")
    assert _pairs(line.argv(), "-x") == ["PATH", "MINE"]
    assert "-envlist" not in mpirun_line(_spec(mpi_implementation="MPICH"), "/h",
                                         set_env=set()).argv()


# ------------------------------------------------------------------ finding the local MPI
def _fake(bin_dir: Path, name: str, version: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\necho '{version}'\n")
    (bin_dir / name).chmod(0o755)


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_the_mpi_asked_for_is_found_and_asked_its_version(fake_path):
    _fake(fake_path, "mpirun", "mpirun (Open MPI) 5.0.7")
    _fake(fake_path, "mpiexec.hydra", "HYDRA build details:\n    Version: 4.0.2")
    found = check_mpi(JobSpec(name="a", command=("t",)))
    assert (found.mpirun, found.dialect) == (str(fake_path / "mpirun"), MpiDialect("OpenMPI", 5))
    mpich = check_mpi(JobSpec(name="a", command=("t",), mpi_implementation="MPICH"))
    assert (mpich.mpirun, mpich.dialect) == (str(fake_path / "mpiexec.hydra"), MpiDialect("MPICH"))


def test_another_mpis_mpirun_is_not_run_in_its_place(fake_path):
    _fake(fake_path, "mpirun", "HYDRA build details:\n    Version: 4.0.2")
    with pytest.raises(UserError) as err:
        check_mpi(JobSpec(name="a", command=("t",)))
    message = str(err.value)
    assert "is MPICH's mpirun and this job asks for OpenMPI" in message
    assert "give --mpi mpich to use it" in message and "\n" not in message
    assert check_mpi(JobSpec(name="a", command=("t",), mpi_implementation="MPICH")).dialect == \
        MpiDialect("MPICH")


def test_a_missing_mpi_is_refused_in_one_line_saying_how_to_install_it(fake_path):
    with pytest.raises(UserError, match=r"^no MPICH mpirun on PATH \(--mpi mpich\): install MPICH \(apt-get"):
        check_mpi(JobSpec(name="a", command=("t",), mpi_implementation="MPICH"))
    with pytest.raises(UserError, match=r"^no Intel mpirun on PATH \(--mpi intel\): install Intel MPI \(pip install impi-rt"):
        check_mpi(JobSpec(name="a", command=("t",), mpi_implementation="Intel"))
    # The user's own mpirun line is theirs: nothing to find.
    assert check_mpi(JobSpec(name="a", command=("mpirun -np 2 t",), shell=True)) is None
