#!/usr/bin/env bash
# How long the test suite takes, recorded each time it changes shape (benchmarks/suite/README.md):
#   bash benchmarks/suite/measure.sh fast    the fast set (scripts/test-fast.sh)
#   bash benchmarks/suite/measure.sh full    the whole suite (scripts/test.sh, what CI runs)
#   bash benchmarks/suite/measure.sh ci      .ci/run's steps on a fresh clone of HEAD (no .venv;
#                                            images as this machine has them), each timed
# Each appends a row to benchmarks/suite/results.md (wall time, tests, load average before and
# after, cores, commit) and writes the split by module from pytest's JUnit XML to
# benchmarks/suite/split-<what>.md. Extra arguments go to pytest (fast, full).
# Python for `fast`: $HVDK8S_PYTHON, else .venv's.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE="$PWD/benchmarks/suite"
what="${1:-}"; shift || true
case "$what" in fast|full|ci) ;; *) echo "usage: measure.sh fast|full|ci [pytest args]" >&2; exit 2 ;; esac

load() { cut -d' ' -f1 /proc/loadavg; }
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benchmarks/suite' || echo +)"
xml="$(mktemp --suffix=.xml)"
trap 'rm -f "$xml"' EXIT
record() {  # what, seconds, load before, after, tests summary
  [ -f "$HERE/results.md" ] || printf '%s\n%s\n' \
    "| date (UTC) | what | wall | tests | load before/after | cores | commit |" \
    "|---|---|---|---|---|---|---|" > "$HERE/results.md"
  printf '| %s | %s | %dm%02ds | %s | %s / %s | %s | %s |\n' "$(date -u +'%Y-%m-%d %H:%M')" \
    "$1" $(($2 / 60)) $(($2 % 60)) "$5" "$3" "$4" "$(nproc)" "$commit" >> "$HERE/results.md"
  echo "measure.sh: $1 took $2 s (load $3 -> $4): $5" >&2
}
timed() {  # label, command...: runs it, records it; returns its status
  local label="$1" start before rc=0; shift
  : > "$xml"
  before="$(load)"; start=$(date +%s)
  "$@" || rc=$?
  local secs=$(( $(date +%s) - start )) summary
  summary="$(python3 "$HERE/split.py" --summary "$xml" 2>/dev/null || echo "exit $rc")"
  [ "$rc" -eq 0 ] || summary="$summary, exit $rc"
  record "$label" "$secs" "$before" "$(load)" "$summary"
  return "$rc"
}

case "$what" in
  fast)
    rc=0; timed "fast set (scripts/test-fast.sh)" bash scripts/test-fast.sh -p no:cacheprovider \
      --junitxml="$xml" "$@" || rc=$?
    python3 "$HERE/split.py" "$xml" > "$HERE/split-fast.md"
    exit "$rc" ;;
  full)
    rc=0; timed "whole suite (scripts/test.sh)" bash scripts/test.sh -p no:cacheprovider \
      --junitxml="$xml" "$@" || rc=$?
    python3 "$HERE/split.py" "$xml" > "$HERE/split-full.md"
    exit "$rc" ;;
  ci)
    # A fresh clone: no .venv, no .venv-min; the images are the machine's (build.sh builds
    # what is missing). Each step of .ci/run, in its order, timed on its own.
    clone="$(mktemp -d)/hvdk8s"
    git clone -q . "$clone"
    here="$PWD"; rc=0
    total_start=$(date +%s); total_before="$(load)"
    ( cd "$clone" && timed "ci: images (scripts/build-images.sh)" bash scripts/build-images.sh ) || rc=$?
    ( cd "$clone" && timed "ci: suite (scripts/test.sh)" bash scripts/test.sh -p no:cacheprovider \
        --junitxml="$xml" ) || rc=$?
    python3 "$HERE/split.py" "$xml" > "$HERE/split-ci.md" || true
    ( cd "$clone" && timed "ci: lower bounds (scripts/test-min-versions.sh)" \
        bash scripts/test-min-versions.sh -p no:cacheprovider --junitxml="$xml" ) || rc=$?
    record "ci: .ci/run in all (fresh clone)" $(( $(date +%s) - total_start )) "$total_before" \
      "$(load)" "exit $rc"
    cd "$here" && rm -rf "$(dirname "$clone")"
    exit "$rc" ;;
esac
