#!/usr/bin/env bash
# The unit tests against the oldest dependency versions pyproject.toml allows (its lower
# bounds, pinned exactly by scripts/min_constraints.py), in a separate venv. Real
# MPI/Horovod runs are left to the main suite: they need the TensorFlow build of setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HVDK8S_MIN_VENV:-.venv-min}"
log() { printf '[min-versions] %s\n' "$*" >&2; }

[ -x "$VENV/bin/python" ] || { log "creating $VENV"; python3 -m venv "$VENV"; }
PY="$VENV/bin/python"
constraints="$VENV/constraints.txt"
"$PY" scripts/min_constraints.py agent bench > "$constraints.new"
stamp="$VENV/.installed-$(sha1sum "$constraints.new" | cut -c1-12)"
mv "$constraints.new" "$constraints"
if [ ! -f "$stamp" ]; then
  log "installing the lower bounds: $(tr '\n' ' ' < "$constraints")"
  "$PY" -m pip install -q --upgrade pip >/dev/null
  "$PY" -m pip install -q -c "$constraints" -e '.[agent,bench,dev]' "numpy<2"
  touch "$stamp"
fi
"$PY" -m pip list 2>/dev/null | grep -iE "^($(cut -d= -f1 "$constraints" | paste -sd'|')) " >&2
exec "$PY" -m pytest -q -m "not slow and not horovod" -n 2 "$@"  # as scripts/test-fast.sh
