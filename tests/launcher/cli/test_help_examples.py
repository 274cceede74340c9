"""Every example in the CLI's help runs as printed, on the machine it describes.

The examples are read from launcher.cli.helptext.EXAMPLES, so a new one is run here without
a change to this file. An example that is one `hvdk8s` command runs in this process, as the
`hvdk8s` console script runs it (launcher.cli.app.main's app, with the example's environment and
folder); one that needs a shell (pipes, redirections, `;`, `source`, zsh) runs in bash or zsh as a
user pastes it, with `hvdk8s` on PATH (this checkout's code), and is in the slow set. Examples
for a cluster run against the test API server (its kubeconfig is $KUBECONFIG, with a second
context `prod`), those for this machine on this machine. The jobs and results an example names
are made first; NAME is the name the example before it printed. The `local-cpu` experiment (real
Horovod runs) and every other example that trains for real and needs nothing made first run
once per session, however many examples print the line; the examples that read the
experiment's results read that run's.
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
from tests.real_runs import LOCAL_CPU, REPO_DIRS, RealRuns, run_in_process
from tests.slow_set import slow_helper

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
RESULTS = {"results/local-cpu": LOCAL_CPU,
           # all of it: calibrate needs two one-rank runs of a model (--limit 2 makes one)
           "results/scaling": "hvdk8s experiment run benchmarks/experiments/scaling.yaml "
                              "--out results/scaling"}
# What only a shell reads: pipes, redirections, lists, substitutions, variables, subshells.
SHELL_SYNTAX = re.compile(r"[|;&<>$`(){}]")
LOCAL_JOB = "try"  # the local job the examples name
CLUSTER_JOBS = {"vgg16": ("default", "team-a"), "resnet50-x7k2p": ("team-a",)}
# Examples for a cluster with Kubeflow Trainer installed (the test server gets it for them).
TRAINER_EXAMPLES = ("hvdk8s install runtime",)
# What an example exits with when it succeeds, where that is not 0.
EXIT_CODES: dict[str, int] = {}


def _cases() -> list:
    return list(_each_case())


def _words(line: str) -> set[str]:
    return set(re.findall(r"[\w$.-]+", re.sub(r"--model \S+", "", line)))


def needs_a_shell(line: str) -> bool:
    return not line.startswith("hvdk8s ") or SHELL_SYNTAX.search(line) is not None


def runs_for_real(line: str) -> bool:
    """The example, or what it needs made first, trains or starts a local job."""
    return (any(r in line for r in REAL_RUNS) or LOCAL_JOB in _words(line)
            or any(results in line for results in RESULTS))


def _each_case():
    for path, examples in EXAMPLES.items():
        for i, (_comment, line) in enumerate(examples):
            before = examples[i - 1][1] if "NAME" in _words(line) else ""
            slow = runs_for_real(line) or needs_a_shell(line) or (before and needs_a_shell(before))
            yield pytest.param(path, i, id=f"{path or 'hvdk8s'}[{i}]",
                               marks=[pytest.mark.slow] if slow else [])


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


@slow_helper
def run_in_shell(machine, line: str, timeout: float = 600) -> tuple[int, str]:
    """The line in bash (zsh for a zsh example), as a user pastes it. Examples that train for
    real take ~60 s on an idle 2-core machine, several times that on a shared one."""
    work, env = machine
    # A zsh example runs in zsh, with $fpath (from $FPATH) a folder of the test's.
    shell = "zsh" if "{fpath[" in line else "bash"
    done = subprocess.run([shell, "-c", line], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


def run(machine, line: str) -> tuple[int, str]:
    return run_in_shell(machine, line) if needs_a_shell(line) else run_in_process(machine, line)


def generated_name(output: str) -> str:
    found = re.search(r"job\s+(\S+)\s+(?:created|submitted)", output) or \
        re.search(r"name:\s*(\S+)", output)
    assert found, f"no job name in:\n{output}"
    return found.group(1)


def _prepare(machine, path: str, i: int, line: str, real_runs: RealRuns | None) -> str:
    """Make what the example names exist; return the line with NAME filled in."""
    work, _env = machine
    words = _words(line)
    for results, writer in RESULTS.items():
        if results in line and writer not in line:
            if real_runs is not None and once_per_session(writer):  # this session's run
                code, output, where = real_runs.run(writer)
                assert code == 0, f"$ {writer}\nexit {code}\n{output}"
                shutil.copytree(where / results, work / results)
                continue
            code, output = run(machine, writer)
            assert code == 0, output
    if "NAME" in words:
        previous = EXAMPLES[path][i - 1][1]
        code, output = run(machine, previous)
        assert code == 0, output
        line = re.sub(r"\bNAME\b", generated_name(output), line)
    # `scale` scales a running elastic job
    elastic = " --min-workers 2 --max-workers 3" if line.startswith("hvdk8s scale") else ""
    for job, namespaces in CLUSTER_JOBS.items():
        if job in words and "--backend local" not in line:
            for ns in namespaces:
                code, output = run(machine, f"hvdk8s submit mpi --name {job} --workers 2 "
                                            f"--gpus 2 --placement spread{elastic} "
                                            f"--model vgg16 -n {ns}")
                assert code == 0, output
    if LOCAL_JOB in words:
        code, output = run(machine, f"hvdk8s submit mpi --backend local --name {LOCAL_JOB} "
                                    "--workers 2 --gpus 0 --wait true")
        assert code == 0, output
    return line


def once_per_session(line: str) -> bool:
    """An example that trains for real and needs nothing made first: its run is the same
    whichever example prints it, so it runs once per session."""
    reads_results = any(results in line for results in RESULTS)
    return (any(r in line for r in REAL_RUNS) and not reads_results and not needs_a_shell(line)
            and "NAME" not in _words(line) and LOCAL_JOB not in _words(line))


@pytest.mark.parametrize("path,i", _cases())
def test_example_runs_as_printed(machine, kube_server, request, path, i):
    line = EXAMPLES[path][i][1]
    if line.startswith("hvdk8s scale"):  # a job that has ended has nothing to scale
        kube_server.script_pod(r".*-launcher-.*", logs=["training"], exit_code=None)
    for marker, (why, available) in ELSEWHERE.items():
        if marker in line and not available():
            pytest.skip(f"{why}: {line}")
    if line.startswith(TRAINER_EXAMPLES):  # it describes a cluster with Kubeflow Trainer
        kube_server.install_trainer()
    runs = request.getfixturevalue("real_runs") if runs_for_real(line) else None
    if once_per_session(line):  # the same line as every other example that prints it
        code, output, _work = runs.run(line)
        assert code == EXIT_CODES.get(line, 0), f"$ {line}\nexit {code}\n{output}"
        return
    line = _prepare(machine, path, i, line, runs)
    code, output = run(machine, line)
    assert code == EXIT_CODES.get(line, 0), f"$ {line}\nexit {code}\n{output}"
