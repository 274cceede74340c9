"""Render jobs exactly as `hvdk8s submit` does, with a fresh SSH key pair and the real benchmark."""

from __future__ import annotations

from pathlib import Path

from launcher.backends.kubernetes.rendering import render
from launcher.preparing.sshkeys import generate_ssh_keys
from mpijob.jobspec.spec import build_spec

BENCHMARK = Path(__file__).resolve().parents[2] / "images" / "benchmark" / "hvd_cnn_bench.py"
# Seconds per run on a 2-core machine: tiny images, few batches.
TINY_BENCHMARK = {"model": "resnet50", "batch_size": 2, "num_batches": 2,
                  "num_warmup_batches": 1, "image_size": 32}


def render_job(mode: str = "pods", placement=None, **spec_fields) -> list[dict]:
    fields = {"name": "demo", "gpus_per_worker": 0, "image": "rehearsal", **spec_fields}
    if not fields.get("command"):
        fields.setdefault("benchmark", TINY_BENCHMARK)
    spec = build_spec(**fields)
    return render(spec, mode=mode, placement=placement,
                  ssh=generate_ssh_keys() if mode == "pods" else None,
                  benchmark_source=BENCHMARK.read_text())
