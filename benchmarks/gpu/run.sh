#!/usr/bin/env bash
# The GPU check in one command (benchmarks/gpu/README.md): bash benchmarks/gpu/run.sh [--out DIR]
# Uses $PYTHON, else the checkout's .venv, else python3: a Python where hvdk8s's dependencies
# are installed (pip install -e .); the checkout's own code runs either way.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" "$root/benchmarks/gpu/check.py" "$@"
