"""Every example in the CLI's help runs as printed, on the machine it describes.

The examples are read from launcher.cli.helptext.EXAMPLES, so a new one is run here without
a change to this file. Each runs in bash, as a user pastes it, with `hvdk8s` on PATH (this
checkout's code): those for a cluster against the test API server (its kubeconfig is
$KUBECONFIG, with a second context `prod`), those for this machine on this machine. The jobs
and results an example names are made first; NAME is the name the example before it printed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from launcher.cli.helptext import EXAMPLES
from tests.paths import ROOT

# The repository folders examples name by relative path; results/ is written by them.
REPO_DIRS = ("tests", "benchmarks")
# Examples that cannot run here, and the machine they describe.
ELSEWHERE = {
    "nvidia-smi": ("needs an NVIDIA GPU and nvidia-smi", lambda: shutil.which("nvidia-smi")),
    "$NODE_NAME": ("runs in the agent's DaemonSet pod on a GPU node, until stopped",
                   lambda: False),
    "{fpath[": ("needs zsh, where $fpath is", lambda: shutil.which("zsh")),
    "hvdk8s agent --node-name gpu-node-1": ("runs on a GPU node (NVML)",
                                            lambda: shutil.which("nvidia-smi")),
    "hvdk8s dev cluster --shape": ("serves until stopped (tests/kubesim/test_dev_cluster.py runs it)",
                                   lambda: False),
}
# A real Horovod run on this CPU (seconds to minutes): the slow tests.
REAL_RUNS = ("--backend local --workers 2 --gpus 0 --wait", "local-cpu")
# The results folders examples name, and the example that writes each.
RESULTS = {"results/local-cpu": "hvdk8s experiment run benchmarks/experiments/local-cpu.yaml",
           # all of it: calibrate needs two one-rank runs of a model (--limit 2 makes one)
           "results/scaling": "hvdk8s experiment run benchmarks/experiments/scaling.yaml "
                              "--out results/scaling"}
LOCAL_JOB = "try"  # the local job the examples name
CLUSTER_JOBS = {"vgg16": ("default", "team-a"), "resnet50-x7k2p": ("team-a",)}
# Examples for a cluster with Kubeflow Trainer installed (the test server gets it for them).
TRAINER_EXAMPLES = ("hvdk8s install runtime",)
# What an example exits with when it succeeds, where that is not 0.
EXIT_CODES: dict[str, int] = {}


def _cases() -> list:
    return list(_each_case())


def _each_case():
    for path, examples in EXAMPLES.items():
        for i, (_comment, line) in enumerate(examples):
            marks = [pytest.mark.slow] if any(r in line for r in REAL_RUNS) else []
            yield pytest.param(path, i, id=f"{path or 'hvdk8s'}[{i}]", marks=marks)


@pytest.fixture
def machine(tmp_path, kube_server):
    """A folder to run examples in (the repository's tests/ and benchmarks/ linked in), an
    `hvdk8s` of this checkout on PATH, and the test server as the current context."""
    work = tmp_path / "work"
    work.mkdir()
    for d in REPO_DIRS:
        (work / d).symlink_to(ROOT / d)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "hvdk8s"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c '
                   f'"import sys; from launcher.cli.app import main; sys.exit(main())" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    kubeconfig = Path(kube_server.write_kubeconfig(tmp_path / "kubeconfig"))
    doc = yaml.safe_load(kubeconfig.read_text())
    doc["contexts"].append({"name": "prod", "context": dict(doc["contexts"][0]["context"])})
    kubeconfig.write_text(yaml.safe_dump(doc))
    kube_server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    (tmp_path / "config.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HVDK8S_", "KUBE"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               KUBECONFIG=str(kubeconfig), HVDK8S_HOME=str(tmp_path / "home"),
               HVDK8S_CONFIG=str(tmp_path / "config.yaml"), COLUMNS="80",
               FPATH=str(tmp_path / "zsh-functions"))
    (tmp_path / "zsh-functions").mkdir()
    # Every launcher pod the test server starts prints a result and succeeds.
    kube_server.script_pod(r".*-launcher-.*", logs=["total images/sec: 100.0"], exit_code=0)
    return work, env


# Examples that train for real take ~60 s on an idle 2-core machine and several times
# that while other test runs share it; a passing one returns as soon as it ends.
def run(machine, line: str, timeout: float = 600) -> subprocess.CompletedProcess:
    work, env = machine
    # A zsh example runs in zsh, with $fpath (from $FPATH) a folder of the test's.
    shell = "zsh" if "{fpath[" in line else "bash"
    return subprocess.run([shell, "-c", line], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def generated_name(output: str) -> str:
    found = re.search(r"job\s+(\S+)\s+(?:created|submitted)", output) or \
        re.search(r"name:\s*(\S+)", output)
    assert found, f"no job name in:\n{output}"
    return found.group(1)


def _prepare(machine, path: str, i: int, line: str) -> str:
    """Make what the example names exist; return the line with NAME filled in."""
    words = set(re.findall(r"[\w$.-]+", re.sub(r"--model \S+", "", line)))
    for results, writer in RESULTS.items():
        if results in line and writer not in line:
            made = run(machine, writer, timeout=900)
            assert made.returncode == 0, made.stdout + made.stderr
    if "NAME" in words:
        previous = EXAMPLES[path][i - 1][1]
        made = run(machine, previous)
        assert made.returncode == 0, made.stdout + made.stderr
        line = re.sub(r"\bNAME\b", generated_name(made.stdout + made.stderr), line)
    # `scale` scales a running elastic job
    elastic = " --min-workers 2 --max-workers 3" if line.startswith("hvdk8s scale") else ""
    for job, namespaces in CLUSTER_JOBS.items():
        if job in words and "--backend local" not in line:
            for ns in namespaces:
                made = run(machine, f"hvdk8s submit mpi --name {job} --workers 2 --gpus 2 "
                                    f"--placement spread{elastic} "
                                    f"--model vgg16 -n {ns}")
                assert made.returncode == 0, made.stdout + made.stderr
    if LOCAL_JOB in words:
        made = run(machine, f"hvdk8s submit mpi --backend local --name {LOCAL_JOB} "
                            "--workers 2 --gpus 0 --wait true")
        assert made.returncode == 0, made.stdout + made.stderr
    return line


@pytest.mark.parametrize("path,i", _cases())
def test_example_runs_as_printed(machine, kube_server, path, i):
    line = EXAMPLES[path][i][1]
    if line.startswith("hvdk8s scale"):  # a job that has ended has nothing to scale
        kube_server.script_pod(r".*-launcher-.*", logs=["training"], exit_code=None)
    for marker, (why, available) in ELSEWHERE.items():
        if marker in line and not available():
            pytest.skip(f"{why}: {line}")
    if line.startswith(TRAINER_EXAMPLES):  # it describes a cluster with Kubeflow Trainer
        kube_server.install_trainer()
    line = _prepare(machine, path, i, line)
    done = run(machine, line)
    assert done.returncode == EXIT_CODES.get(line, 0), \
        f"$ {line}\nexit {done.returncode}\n{done.stdout}{done.stderr}"
