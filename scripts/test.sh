#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, real MPI/Horovod runs included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The seams are typed (the backends, the submit pipeline, the pure core): checked first, in
# seconds, with the files and settings of pyproject.toml's [tool.mypy].
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest -q "$@"
