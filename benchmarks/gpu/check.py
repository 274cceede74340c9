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
   and hvdk8s's preflight on all the GPUs (`--preflight warn`: NVML health of each GPU, the
   node's all-reduce as busbw) beside the model's expectation for this node (preflight.json);
4. measured against predicted, as a table (table.md) and as experiment records
   (results.jsonl/.csv) that `hvdk8s calibrate DIR` fits, so the model's compute rate for this
   GPU comes from the machine itself.

With no NVIDIA GPU it says so in one line and exits 0 (nothing is written). Exit 1 when a
step of the check itself failed (the table says which); 2 for bad options.

    python benchmarks/gpu/check.py --table DIR   # re-render DIR/table.md from its records

This module runs the jobs; machine.py reads the machine, report.py plans the runs, predicts
them and writes the records and the table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: the checkout's hvdk8s
    sys.path.insert(0, str(ROOT))

from benchmarks.gpu.machine import (  # noqa: E402
    _run,
    choose_workload,
    describe_machine,
    find_gpus,
    hvdk8s_command,
    machine_markdown,
)
from benchmarks.gpu.report import (  # noqa: E402
    Point,
    Workload,
    local_node,
    plan_points,
    predict,
    predicted_busbw_gbs,
    record,
    render,
    timed_steps,
)
from launcher.experiments.results import ResultsStore  # noqa: E402
from mpijob.scheduling.cluster import Node  # noqa: E402

HERE = Path(__file__).resolve().parent
NCCL_PREFIX = "HVDK8S_NCCL "
RUN_TIMEOUT_S = 240


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

    def preflight(self, node: Node, gpus: int) -> dict:
        """hvdk8s's preflight on `gpus` GPUs, before a program that does nothing: its verdict,
        NVML checks and figures (get -o json), and the model's expectation for this node."""
        from mpijob.perf.preflight import expected

        name = f"gc-preflight-g{gpus}-{uuid.uuid4().hex[:5]}"
        job, _ = self.submit(name, gpus, ["--preflight", "warn", "--",
                                          str(self.workload.python), "-c", "pass"],
                             min(RUN_TIMEOUT_S, max(60.0, self.left())))
        model = expected([(node, tuple(range(gpus)))]) if gpus > 1 else None
        return {"gpus": gpus, "phase": job.get("phase"), "preflight": job.get("preflight"),
                "expected": model.to_json() if model is not None else None}

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


def preflight_markdown(out: Path) -> str:
    """The preflight's section of the table: each GPU's NVML checks, the node's busbw
    against the model's expectation ("" where the check ran no preflight)."""
    try:
        checked = json.loads((out / "preflight.json").read_text())
    except (OSError, ValueError):
        return ""
    pre = checked.get("preflight") or {}
    lines = ["", "## Preflight (`--preflight warn`)", "",
             f"verdict: {pre.get('verdict', 'none: ' + str(checked.get('phase')))}"
             + (f", {pre['seconds']:.1f} s" if pre.get("seconds") is not None else ""), ""]
    gpus = pre.get("gpus") or []
    if gpus:
        lines += ["| GPU | PCIe | NVLinks up | problems |", "|---|---|---|---|"]
        lines += [f"| {g.get('gpu')} | {g.get('pcie', '-')} | {g.get('nvlinks_up', '-')} | "
                  f"{'; '.join(g.get('problems') or []) or 'none'} |" for g in gpus]
        lines.append("")
    exp = checked.get("expected") or {}
    for p in pre.get("paths") or []:
        measured = p.get("busbw_gbs")
        lines.append(f"all-reduce of {p.get('ranks')} ranks ({p.get('backend')}): busbw "
                     f"{measured:.3g} GB/s" if measured is not None else "busbw -")
        if exp:
            ratio = f", {measured / exp['gbs']:.2f} of it" if measured else ""
            lines.append(f"model: {exp['gbs']:.3g} GB/s ({exp['link']}){ratio}")
    lines += [f"note: {n}" for n in pre.get("notes") or []]
    return "\n".join(lines) + "\n"


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
        checked = runner.preflight(node, inventory.gpus)
        (out / "preflight.json").write_text(json.dumps(checked, indent=1))
        print("  " + preflight_markdown(out).strip().replace("\n", "\n  "), flush=True)
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
    table = render(out) + preflight_markdown(out)
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
        table = render(args.table) + preflight_markdown(args.table)
        (args.table / "table.md").write_text(table)
        print(table)
        return 0
    return run_check(args)


if __name__ == "__main__":
    sys.exit(main())
