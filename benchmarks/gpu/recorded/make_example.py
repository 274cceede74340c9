"""Write recorded/h100-sxm5-example/: a RECORDED EXAMPLE in the GPU check's format, made from
the three figures a user measured on one H100 and reported (not produced by check.py):

    one NVIDIA H100 80GB HBM3 (SXM5), driver 580, CUDA 13, Ubuntu's Open MPI 4.1.6, PyTorch
    2.11, no TensorFlow; torchvision ResNet-50, synthetic 224 px, SGD, batch 64, one GPU,
    cudnn.benchmark: fp32 (TF32) 1,714 img/s; fp16 (AMP, channels_last) 2,429 img/s at batch
    64 and 4,761 img/s at batch 256.

It is what `hvdk8s calibrate` is tested on (tests/test_gpu_check.py) until a machine's own
check is committed beside it. The predictions are the model's when this script last ran.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gpu/recorded/make_example.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.gpu.report import Point, Workload, local_node, predict, record, render  # noqa: E402
from launcher.experiments.results import ResultsStore  # noqa: E402
from mpijob.scheduling.topology import Topology  # noqa: E402

OUT = Path(__file__).resolve().parent / "h100-sxm5-example"
GPU = "NVIDIA H100 80GB HBM3"
MEASURED = ((Point("resnet50", "fp32", 64, 1), 1714.0), (Point("resnet50", "fp16", 64, 1), 2429.0),
            (Point("resnet50", "fp16", 256, 1), 4761.0))
MACHINE = """- RECORDED EXAMPLE: the figures a user measured and reported, written in this check's
  format by benchmarks/gpu/recorded/make_example.py; check.py did not produce it
- machine: a cloud VM, Ubuntu, Open MPI 4.1.6 (Ubuntu's), driver 580, CUDA 13
- GPUs: 1 x NVIDIA H100 80GB HBM3 (SXM5)
- GPU links (NVML): [["X"]]
- workload: pytorch stand-in (torchvision) (pytorch 2.11)
"""


def main() -> int:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    node = local_node(GPU, Topology.from_links([["X"]]), 1)
    workload = Workload("pytorch", "/opt/torch/.venv/bin/python", "pytorch 2.11")
    store = ResultsStore(OUT)
    for i, (point, measured) in enumerate(MEASURED):
        store.append(record(point, workload, predict(node, point), status="Succeeded",
                            images_per_sec=measured, run_id=f"h100-example-{i}",
                            extra={"recorded": "reported by a user, not run by check.py"}))
    (OUT / "machine.md").write_text(MACHINE)
    (OUT / "table.md").write_text(render(OUT))
    print((OUT / "table.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
