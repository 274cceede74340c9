#!/usr/bin/env bash
# Compare images/hvd_cnn_bench.py with the real tf_cnn_benchmarks on this machine's CPU.
#
# Usage: benchmarks/workload/compare_tf_cnn_benchmarks.sh TF_BENCHMARKS_CHECKOUT [OUT_DIR]
#   TF_BENCHMARKS_CHECKOUT: a checkout of https://github.com/tensorflow/benchmarks (its
#   root or scripts/tf_cnn_benchmarks); master at 8fb7907 runs under TF 2.15 through
#   tf.compat.v1. Keep it outside this repository: its code is not ours to commit.
# Knobs (environment): MODEL (resnet50), BATCH_SIZES ("8"), RANKS ("1 2"),
#   NUM_BATCHES (20), NUM_WARMUP_BATCHES (5), REPEATS (3), FIRST_REP (1: number of the
#   first repeat, to add repeats to an OUT_DIR), PYTHON (.venv/bin/python),
#   QUIET_TIMEOUT (600 s to wait for an idle machine before each run),
#   THEIRS_YIELD (1: for more than one rank, also run tf_cnn_benchmarks with
#   OMPI_MCA_mpi_yield_when_idle=1, the OpenMPI setting hvd_cnn_bench.py makes for
#   itself on CPU, to show how much of the difference that setting is).
#
# Both programs get identical flags (--variable_update=horovod --device=cpu
# --data_format=NHWC, the model's native 224x224 images, since tf_cnn_benchmarks cannot
# change the ImageNet image size) and the same launch: a plain process for 1 rank,
# `mpirun --bind-to core` for more, so each rank owns its cores in both. Runs alternate
# between the programs and wait for an idle machine, because a shared CPU is the largest
# source of error; the summary takes the median over REPEATS.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
[ $# -ge 1 ] || { sed -n 2,14p "$0" >&2; exit 2; }
TFCNN="$1"
[ -f "$TFCNN/tf_cnn_benchmarks.py" ] || TFCNN="$TFCNN/scripts/tf_cnn_benchmarks"
[ -f "$TFCNN/tf_cnn_benchmarks.py" ] || { echo "no tf_cnn_benchmarks.py under $1" >&2; exit 2; }
TFCNN="$(cd "$TFCNN" && pwd)"
OUT="${2:-$HERE/results}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
MODEL="${MODEL:-resnet50}"
BATCH_SIZES="${BATCH_SIZES:-8}"
RANKS="${RANKS:-1 2}"
NUM_BATCHES="${NUM_BATCHES:-20}"
NUM_WARMUP_BATCHES="${NUM_WARMUP_BATCHES:-5}"
REPEATS="${REPEATS:-3}"
FIRST_REP="${FIRST_REP:-1}"
QUIET_TIMEOUT="${QUIET_TIMEOUT:-600}"
THEIRS_YIELD="${THEIRS_YIELD:-1}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

mkdir -p "$OUT/logs"
commit="$(git -C "$TFCNN" rev-parse HEAD 2>/dev/null || echo "${TFCNN_COMMIT:-unknown}")"

run_one() {  # prog np bs log
  local prog=$1 np=$2 bs=$3 log=$4 script workdir env=()
  case "$prog" in
    ours) script="$REPO/images/benchmark/hvd_cnn_bench.py"; workdir="$REPO" ;;
    theirs) script="$TFCNN/tf_cnn_benchmarks.py"; workdir="$TFCNN" ;;
    theirs-yield) script="$TFCNN/tf_cnn_benchmarks.py"; workdir="$TFCNN"
      env=(-x OMPI_MCA_mpi_yield_when_idle=1) ;;
  esac
  local args=(--model="$MODEL" --batch_size="$bs" --num_batches="$NUM_BATCHES"
    --num_warmup_batches="$NUM_WARMUP_BATCHES" --display_every=10
    --variable_update=horovod --device=cpu --data_format=NHWC)
  "$PY" "$HERE/wait_quiet.py" --timeout "$QUIET_TIMEOUT" || true
  if [ "$np" -eq 1 ]; then
    (cd "$workdir" && "$PY" "$script" "${args[@]}") >"$log" 2>&1
  else
    # --tag-output marks each line with its rank: tf_cnn_benchmarks prints from all.
    (cd "$workdir" && mpirun -np "$np" --allow-run-as-root --oversubscribe \
      --bind-to core --map-by core --tag-output -x TF_CPP_MIN_LOG_LEVEL -x PATH \
      ${env[@]+"${env[@]}"} "$PY" "$script" "${args[@]}") >"$log" 2>&1
  fi
  grep -h "total images/sec" "$log" | head -n 1 | sed "s|^|$prog np=$np bs=$bs: |" >&2
}

for rep in $(seq "$FIRST_REP" $((FIRST_REP + REPEATS - 1))); do
  # Alternate which program goes first so drift over time hits both equally.
  if [ $((rep % 2)) -eq 1 ]; then order="ours theirs"; else order="theirs ours"; fi
  for bs in $BATCH_SIZES; do
    for np in $RANKS; do
      progs="$order"
      if [ "$np" -gt 1 ] && [ "$THEIRS_YIELD" = 1 ]; then progs="$progs theirs-yield"; fi
      for prog in $progs; do
        run_one "$prog" "$np" "$bs" "$OUT/logs/${prog}_${MODEL}_bs${bs}_np${np}_rep${rep}.log"
      done
    done
  done
done

"$PY" "$HERE/summarize.py" "$OUT/logs" --tfcnn-commit "$commit" --csv "$OUT/comparison.csv"
