"""The machine as the GPU check sees it: its GPUs (NVML), what workload can run, and what
nvidia-smi and hvdk8s (topology, agent, doctor, top node) say about it."""

from __future__ import annotations

import json
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from benchmarks.gpu.report import Workload

TORCH_PYTHONS = ("/opt/torch/.venv/bin/python",)


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
    from launcher.hardware import nvml_topology

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


