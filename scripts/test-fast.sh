#!/usr/bin/env bash
# The fast set: every test that starts no mpirun, TensorFlow, shell script, image or pod
# rehearsal (tests/slow_set.py puts those in the slow set, through the fixtures and helpers
# they use). Minutes, not the whole suite's tens of minutes: the loop to run while changing
# code. `bash scripts/test.sh` (what CI runs) runs everything. Arguments go to pytest.
# Python: $HVDK8S_PYTHON, else .venv's (bash scripts/setup.sh makes it; the fast set needs
# only `pip install -e '.[agent,bench,dev]'`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${HVDK8S_PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
  echo "test-fast.sh: no $PY: run bash scripts/setup.sh, or set HVDK8S_PYTHON to a Python with" \
       "hvdk8s installed (pip install -e '.[agent,bench,dev]')" >&2
  exit 2
fi
# Two workers (pytest-xdist, of the dev extra): most of the fast set waits on sockets and on
# the model cluster's loops, so two share two cores well (benchmarks/suite/). `-n N` overrides.
if ! "$PY" -c 'import xdist' 2>/dev/null; then
  echo "test-fast.sh: $PY has no pytest-xdist (the fast set runs on two workers):" \
       "pip install -e '.[agent,bench,dev]'" >&2
  exit 2
fi
exec "$PY" -m pytest -q -m "not slow" -n 2 "$@"
