#!/usr/bin/env bash
# Intel MPI for the local backend's test matrix (tests/local_mpis.py): Intel's own runtime and
# compiler wrappers from PyPI (impi-rt, impi-devel) in their own venv, .venv-impi
# (HVDK8S_IMPI_VENV sets another). Idempotent: a minute the first time (about 330 MB), nothing
# after. Its mpirun is Hydra, as MPICH's, under Intel's name and defaults; it runs whichever
# mpiexec.hydra comes first on PATH (Debian's MPICH has one too), so its bin goes first.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HVDK8S_IMPI_VENV:-.venv-impi}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
export PATH="$VENV/bin:$PATH"
if "$VENV/bin/mpirun" --version 2>/dev/null | grep "Intel(R) MPI" >/dev/null; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "impi-rt>=2021,<2022" "impi-devel>=2021,<2022"
"$VENV/bin/mpirun" --version | head -n 1
