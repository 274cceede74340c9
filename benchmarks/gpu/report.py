"""What the GPU check runs and writes: its runs (most important first), the model's
predictions for them, their experiment records (what `hvdk8s calibrate` reads) and table.md."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

from launcher.experiments.results import ResultsStore
from mpijob.perf import perfdata
from mpijob.perf.perfmodel import allreduce_cost, predict_pods
from mpijob.scheduling.cluster import Node

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "gpu-check"
# Timed steps: about this many seconds of predicted work, within [MIN, MAX] steps.
TIMED_SECONDS = 8.0
MIN_STEPS, MAX_STEPS = 10, 60


@dataclass(frozen=True)
class Workload:
    framework: str  # "tensorflow" (the built-in benchmark) or "pytorch" (the stand-in)
    python: str | None  # the stand-in's interpreter
    version: str

    @property
    def label(self) -> str:
        return ("tensorflow built-in benchmark" if self.framework == "tensorflow"
                else "pytorch stand-in (torchvision)")


@dataclass(frozen=True)
class Point:
    model: str
    precision: str
    batch_size: int
    gpus: int


def plan_points(gpus: int) -> list[Point]:
    """The runs, most important first: the budget cuts from the end. Two batch sizes per
    (model, precision), as `hvdk8s calibrate` needs to fit a rate and a per-step cost."""
    single = [Point("resnet50", "fp32", 64, 1), Point("resnet50", "fp16", 64, 1),
              Point("resnet50", "fp16", 256, 1), Point("resnet50", "fp32", 128, 1)]
    multi = [Point("resnet50", "fp16", 256, gpus)] if gpus > 1 else []
    rest = [Point("vgg16", "fp16", 64, 1), Point("vgg16", "fp16", 128, 1),
            Point("vgg16", "fp32", 32, 1), Point("vgg16", "fp32", 64, 1),
            Point("inception3", "fp16", 64, 1), Point("inception3", "fp16", 128, 1)]
    if gpus > 2:
        multi.append(Point("resnet50", "fp16", 256, 2))
    return single + multi + rest


def timed_steps(predicted_ips: float, batch_size: int) -> int:
    steps = round(TIMED_SECONDS * predicted_ips / batch_size)
    return max(MIN_STEPS, min(MAX_STEPS, steps))


# ------------------------------------------------------------------------- predictions
def local_node(gpu_name: str, topology, count: int) -> Node:
    return Node(name=socket.gethostname(), gpus=count, topology=topology, gpu_model=gpu_name)


def predict(node: Node, point: Point):
    return predict_pods(model=point.model, batch_size=point.batch_size, precision=point.precision,
                        pods=[(node, tuple(range(point.gpus)))])


def predicted_busbw_gbs(node: Node, ranks: int, nbytes: int) -> float:
    cost = allreduce_cost([(node, tuple(range(ranks)))], nbytes)
    seconds = cost.seconds(nbytes, max(1.0, nbytes / perfdata.HOROVOD_FUSION_BYTES))
    return nbytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def record(point: Point, workload: Workload, prediction, *, status: str,
           images_per_sec: float | None, run_id: str, reason: str | None = None,
           wall_seconds: float | None = None, extra: dict | None = None) -> dict:
    """One run as an `experiment run` record (launcher.experiments.results.ResultRow): what
    `hvdk8s calibrate` reads. The device is the prediction's canonical GPU name."""
    return {
        "run_id": run_id, "experiment": EXPERIMENT, "model": point.model, "workers": 1,
        "gpus": point.gpus, "placement": "topology", "batch_size": point.batch_size,
        "precision": point.precision, "image_size": 299 if point.model == "inception3" else 224,
        "repetition": 0, "backend": "local", "status": status, "reason": reason,
        "images_per_sec": images_per_sec,
        "predicted_images_per_sec": prediction.images_per_sec if prediction else None,
        "nodes": 1, "wall_seconds": wall_seconds,
        "settings": {"framework": workload.framework, "workload": workload.label,
                     "framework_version": workload.version, **(extra or {})},
        "prediction": prediction.to_json() if prediction else None,
    }


# ------------------------------------------------------------------------------ tables
def table_rows(records: list[dict]) -> list[dict]:
    rows = []
    for r in records:
        settings = r.get("settings") or {}
        measured, predicted = r.get("images_per_sec"), r.get("predicted_images_per_sec")
        ratio = f"{predicted / measured:.2f}" if measured and predicted else "-"
        rows.append({
            "workload": settings.get("workload", "?"), "model": r["model"],
            "precision": r["precision"], "batch": r["batch_size"], "gpus": r["gpus"],
            "measured img/s": f"{measured:,.0f}" if measured else r.get("status") or "-",
            "predicted img/s": f"{predicted:,.0f}" if predicted else "-",
            "predicted / measured": ratio,
        })
    return rows


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no runs)"
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def nccl_markdown(rows: list[dict]) -> str:
    lines = ["| GPUs | bytes | measured busbw GB/s | predicted busbw GB/s | predicted / measured |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['ranks']} | {r['bytes']:,} | {r['busbw_gbs']:.1f} | "
              f"{r['predicted_busbw_gbs']:.1f} | {r['predicted_busbw_gbs'] / r['busbw_gbs']:.2f} |"
              for r in rows]
    return "\n".join(lines)


def render(out: Path) -> str:
    """table.md from the directory's records (results.jsonl) and NCCL rows (nccl.json)."""
    records = list(ResultsStore(out).latest().values())
    machine = (out / "machine.md").read_text() if (out / "machine.md").exists() else ""
    text = [f"# GPU check: {out.name}", "", machine.strip(), "",
            "## Training throughput, measured vs predicted", "", markdown(table_rows(records))]
    nccl = out / "nccl.json"
    if nccl.exists():
        text += ["", "## NCCL all-reduce bus bandwidth", "",
                 nccl_markdown(json.loads(nccl.read_text()))]
    where = out.resolve()
    shown = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    text += ["", f"Calibrate the model on this machine: `hvdk8s calibrate {shown}`", ""]
    return "\n".join(text)


