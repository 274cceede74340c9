"""The GPU check: what hvdk8s sees and predicts on this NVIDIA machine, against what it measures.

    bash benchmarks/gpu/run.sh [--out DIR] [--budget SECONDS]

In about ten minutes (--budget, default 540 s of runs), on any machine with NVIDIA GPUs:
1. the machine: `nvidia-smi` (GPUs, driver), `nvidia-smi topo -m` and hvdk8s's parse of it,
   the topology agent's report from NVML (`hvdk8s agent --once --dry-run`), `hvdk8s doctor`
   and `hvdk8s top node`;
2. training jobs through `hvdk8s submit --backend local`, one GPU and all of them: the
   built-in TensorFlow benchmark where TensorFlow and Horovod see the GPUs, else the PyTorch
   STAND-IN (benchmarks/gpu/torch_bench.py: torchvision's models, synthetic data), named as
   such in every row; ResNet-50 first (fp32/TF32 at batch 64 and 128, fp16 at 64 and 256),
   then VGG16 and Inception V3 while the budget lasts;
3. with two or more GPUs, NCCL all-reduce bus bandwidth (benchmarks/gpu/nccl_allreduce.py);
4. measured against predicted, as a table (table.md) and as experiment records
   (results.jsonl/.csv) that `hvdk8s calibrate DIR` fits, so the model's compute rate for this
   GPU comes from the machine itself.

With no NVIDIA GPU it says so in one line and exits 0 (nothing is written). Exit 1 when a
step of the check itself failed (the table says which); 2 for bad options.

    python benchmarks/gpu/check.py --table DIR   # re-render DIR/table.md from its records
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: the checkout's hvdk8s
    sys.path.insert(0, str(ROOT))

from launcher.experiments.results import ResultsStore  # noqa: E402
from mpijob.perf import perfdata  # noqa: E402
from mpijob.perf.perfmodel import allreduce_cost, predict_pods  # noqa: E402
from mpijob.scheduling.cluster import Node  # noqa: E402

HERE = Path(__file__).resolve().parent
TORCH_PYTHONS = ("/opt/torch/.venv/bin/python",)
EXPERIMENT = "gpu-check"
NCCL_PREFIX = "HVDK8S_NCCL "
RUN_TIMEOUT_S = 240
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


# ----------------------------------------------------------------------- the machine
def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 127, "", f"{type(exc).__name__}: {exc}")


def hvdk8s_command() -> list[str]:
    beside = Path(sys.executable).parent / "hvdk8s"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-c", "import sys; from launcher.cli.app import main; "
            "sys.argv[0] = 'hvdk8s'; sys.exit(main())"]


def find_gpus():
    """(NVML inventory) or a one-line reason why there is no NVIDIA GPU to check."""
    from launcher.agent import nvml_topology

    try:
        inventory = nvml_topology.collect(nvml_topology.load_nvml())
    except Exception as exc:  # noqa: BLE001 - NvmlUnavailable, or NVML failing mid-way
        return None, str(exc).removeprefix("NVML is unavailable: ")
    if inventory.gpus == 0:
        return None, "NVML sees no GPU"
    return inventory, None


def choose_workload(hvdk8s_python: str, torch_python: str | None) -> Workload | None:
    probe = ("import tensorflow as tf, horovod; "
             "print(tf.__version__ if tf.config.list_physical_devices('GPU') else '')")
    tf = _run([hvdk8s_python, "-c", probe], timeout=120)
    if tf.returncode == 0 and tf.stdout.strip():
        return Workload("tensorflow", None, f"tensorflow {tf.stdout.strip()}")
    for python in ([torch_python] if torch_python else [hvdk8s_python, *TORCH_PYTHONS]):
        if not python or not (python == hvdk8s_python or Path(python).exists()):
            continue
        got = _run([python, "-c", "import torch, torchvision; "
                    "print(torch.__version__ if torch.cuda.is_available() else '')"], timeout=120)
        if got.returncode == 0 and got.stdout.strip():
            return Workload("pytorch", python, f"pytorch {got.stdout.strip()}")
    return None


def describe_machine(out: Path, hvdk8s: list[str], inventory) -> list[str]:
    """Write what hvdk8s and the driver see into out/machine/; problems found, as lines."""
    folder = out / "machine"
    folder.mkdir(parents=True, exist_ok=True)
    problems = []
    smi = shutil.which("nvidia-smi")
    if smi:
        q = _run([smi, "--query-gpu=index,name,driver_version,memory.total,power.limit,"
                       "clocks.max.sm,pci.bus_id", "--format=csv"])
        (folder / "nvidia-smi.csv").write_text(q.stdout + q.stderr)
        topo = _run([smi, "topo", "-m"])
        (folder / "topo.txt").write_text(topo.stdout + topo.stderr)
        parsed = _run([*hvdk8s, "topology", "parse", str(folder / "topo.txt"), "-o", "json"])
        (folder / "topology-parse.json").write_text(parsed.stdout + parsed.stderr)
        if parsed.returncode == 0:
            links = json.loads(parsed.stdout).get("links")
            if links is not None and [list(r) for r in links] != [list(r) for r in inventory.links]:
                problems.append("nvidia-smi topo -m and NVML disagree on the GPU links "
                                "(machine/topo.txt vs machine/agent.json)")
        else:
            problems.append(f"hvdk8s topology parse failed: {parsed.stderr.strip()[:200]}")
    for name, argv in (("agent.json", ["agent", "--once", "--dry-run"]),
                       ("doctor.json", ["doctor", "-o", "json"]),
                       ("top-node.json", ["top", "node", "-o", "json"])):
        got = _run([*hvdk8s, *argv], timeout=120)
        (folder / name).write_text(got.stdout)
        if got.stderr.strip():
            (folder / (name + ".stderr")).write_text(got.stderr)
        if got.returncode not in (0, 1) or not got.stdout.strip():
            problems.append(f"hvdk8s {' '.join(argv)}: exit {got.returncode}: "
                            f"{got.stderr.strip()[:200]}")
    return problems


def machine_markdown(inventory, workload: Workload | None, problems: list[str]) -> str:
    smi = shutil.which("nvidia-smi")
    driver = ""
    if smi:
        q = _run([smi, "--query-gpu=driver_version", "--format=csv,noheader"])
        driver = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else ""
    lines = [f"- machine: {socket.gethostname()}, {platform.platform()}",
             f"- GPUs: {inventory.gpus} x {inventory.gpu_model}"
             + (f", driver {driver}" if driver else ""),
             f"- GPU links (NVML): {json.dumps([list(r) for r in inventory.links])}",
             f"- workload: {workload.label} ({workload.version})" if workload
             else "- workload: none (neither TensorFlow+Horovod nor PyTorch sees a GPU)"]
    lines += [f"- problem: {p}" for p in problems]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- runs
class Runner:
    def __init__(self, hvdk8s: list[str], workload: Workload, out: Path, deadline: float):
        self.hvdk8s, self.workload, self.out, self.deadline = hvdk8s, workload, out, deadline
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def submit(self, name: str, gpus: int, command: list[str], timeout: float) -> tuple[dict, str]:
        """(the job as `get -o json` shows it, its log); the job deleted afterwards."""
        argv = [*self.hvdk8s, "submit", "mpi", "--backend", "local", "--name", name,
                "--workers", "1", "--gpus", str(gpus), "--wait", *command]
        started = _run(argv, timeout=timeout)
        got = _run([*self.hvdk8s, "get", name, "-o", "json"])
        logs = _run([*self.hvdk8s, "logs", name])
        _run([*self.hvdk8s, "delete", name])
        text = logs.stdout + logs.stderr
        (self.logs / f"{name}.log").write_text(started.stdout + started.stderr + "\n" + text)
        try:
            job = json.loads(got.stdout)
        except ValueError:
            job = {"phase": "Failed", "reason": (started.stderr or got.stderr).strip()[-300:]}
        return job, text

    def train(self, point: Point, node: Node) -> dict:
        prediction = predict(node, point)
        steps = timed_steps(prediction.images_per_sec / point.gpus, point.batch_size)
        name = f"gc-{point.model}-{point.precision}-b{point.batch_size}-g{point.gpus}-" \
               f"{uuid.uuid4().hex[:5]}"
        if self.workload.framework == "tensorflow":
            command = ["--model", point.model, "--batch-size", str(point.batch_size),
                       "--num-batches", str(steps)] + (["--use-fp16"] if point.precision == "fp16"
                                                       else [])
        else:
            command = [str(self.workload.python), str(HERE / "torch_bench.py"), "--model",
                       point.model, "--batch-size", str(point.batch_size), "--precision",
                       point.precision, "--num-batches", str(steps), "--port", str(_free_port())]
        start = time.monotonic()
        job, _ = self.submit(name, point.gpus, command, min(RUN_TIMEOUT_S, max(30.0, self.left())))
        ips = job.get("images_per_sec")
        status = "Succeeded" if job.get("phase") == "Succeeded" and ips else \
            ("NoResult" if job.get("phase") == "Succeeded" else "Failed")
        return record(point, self.workload, prediction, status=status, images_per_sec=ips,
                      run_id=name, reason=None if status == "Succeeded" else
                      (job.get("reason") or job.get("message") or "see logs/" + name + ".log"),
                      wall_seconds=round(time.monotonic() - start, 1),
                      extra={"timed_steps": steps})

    def nccl(self, node: Node, ranks: int) -> list[dict]:
        name = f"gc-nccl-g{ranks}-{uuid.uuid4().hex[:5]}"
        command = [str(self.workload.python), str(HERE / "nccl_allreduce.py"), "--port",
                   str(_free_port())]
        _, text = self.submit(name, ranks, command, min(RUN_TIMEOUT_S, max(30.0, self.left())))
        rows = []
        for line in text.splitlines():
            at = line.find(NCCL_PREFIX)
            if at < 0:
                continue
            row = json.loads(line[at + len(NCCL_PREFIX):])
            row["predicted_busbw_gbs"] = predicted_busbw_gbs(node, ranks, row["bytes"])
            rows.append(row)
        return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_check(args) -> int:
    inventory, why = find_gpus()
    if inventory is None:
        print(f"gpu check: no NVIDIA GPU here ({why}): nothing to measure")
        return 0
    out: Path = args.out or ROOT / "results" / (
        f"gpu-check-{socket.gethostname()}-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "results.jsonl").exists():
        print(f"error: --out {out}: holds an earlier check; give another directory",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    hvdk8s = hvdk8s_command()
    deadline = time.monotonic() + args.budget
    print(f"gpu check: {inventory.gpus} x {inventory.gpu_model}; results in {out}")
    problems = describe_machine(out, hvdk8s, inventory)
    workload = choose_workload(sys.executable, args.torch_python)
    (out / "machine.md").write_text(machine_markdown(inventory, workload, problems) + "\n")
    node = local_node(inventory.gpu_model, inventory.topology(), inventory.gpus)
    store = ResultsStore(out)
    if workload is not None:
        runner = Runner(hvdk8s, workload, out, deadline)
        nccl_done = inventory.gpus < 2 or workload.framework != "pytorch"
        for point in plan_points(inventory.gpus):
            if not nccl_done and point.gpus > 1:
                rows = runner.nccl(node, inventory.gpus)
                (out / "nccl.json").write_text(json.dumps(rows, indent=1))
                nccl_done = True
            if runner.left() <= 0:
                print(f"  budget spent: {point.model} {point.precision} b{point.batch_size} "
                      f"x{point.gpus} not run")
                continue
            rec = store.append(runner.train(point, node))
            print(f"  {point.model} {point.precision} b{point.batch_size} x{point.gpus}: "
                  f"measured {rec['images_per_sec'] or rec['status']}, predicted "
                  f"{rec['predicted_images_per_sec']:,.0f}", flush=True)
    table = render(out)
    (out / "table.md").write_text(table)
    print(table)
    failed = [r for r in store.latest().values() if r.get("status") != "Succeeded"]
    return 1 if problems or failed or workload is None else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="results directory (default: results/gpu-check-HOST-TIME)")
    ap.add_argument("--budget", type=float, default=540.0,
                    help="seconds of training runs before the rest are skipped")
    ap.add_argument("--torch-python", default=os.environ.get("HVDK8S_TORCH_PYTHON"),
                    help="the Python with PyTorch for the stand-in (default: this one, "
                    "else /opt/torch/.venv/bin/python)")
    ap.add_argument("--table", type=Path, metavar="DIR",
                    help="only re-render DIR/table.md from its records")
    args = ap.parse_args(argv)
    if args.table is not None:
        if not ResultsStore(args.table).exists():
            print(f"error: --table {args.table}: no results.jsonl there", file=sys.stderr)
            return 2
        (args.table / "table.md").write_text(render(args.table))
        print(render(args.table))
        return 0
    return run_check(args)


if __name__ == "__main__":
    sys.exit(main())
