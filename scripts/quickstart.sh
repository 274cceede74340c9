#!/usr/bin/env bash
# The main job on the embedded default (this machine): set up, then run 2 real Horovod
# ranks of ResNet50 on synthetic ImageNet on the CPU. Ends with `total images/sec: N`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# Re-running replaces the previous quickstart job, so the command stays idempotent.
hvdk8s delete quickstart --backend local >/dev/null
exec hvdk8s submit mpi --backend local --name quickstart --workers 2 --gpus 0 \
  --model resnet50 --batch-size 8 --image-size 64 --num-batches 20 --wait "$@"
