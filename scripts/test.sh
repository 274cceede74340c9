#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, real MPI/Horovod runs included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Open MPI 5 and Intel MPI (PyPI's wheels) for the local backend's MPI matrix; Open MPI 4.1
# and MPICH come with the machine. A failed install is not fatal here: those tests then skip,
# saying why.
bash scripts/ompi5.sh || echo "test.sh: Open MPI 5 could not be installed; its tests skip" >&2
bash scripts/impi.sh || echo "test.sh: Intel MPI could not be installed; its tests skip" >&2
# The seams are typed (the backends, the submit pipeline, the pure core): checked first, in
# seconds, with the files and settings of pyproject.toml's [tool.mypy].
.venv/bin/python -m mypy
# Two workers (pytest-xdist): the slow set runs on one of them, one test at a time as before,
# (tests/slow_set.py: one xdist group), while the other runs the fast set beside it.
exec .venv/bin/python -m pytest -q -n 2 --dist loadgroup "$@"
