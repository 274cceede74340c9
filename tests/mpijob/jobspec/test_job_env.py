"""TensorFlow's C++ log level: warnings by default in every job hvdk8s starts, the user's wins."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.rendering import render
from launcher.backends.local.launching import build_launch
from launcher.backends.local.mpi import LocalMpi
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.command import MpiDialect
from mpijob.k8s.start_gate import is_gate
from tests.render_cases import FIXED_KEYS, STUB_BENCHMARK

LEVEL = "TF_CPP_MIN_LOG_LEVEL"


def _containers(objects: list[dict]) -> list[dict]:
    out = []
    for obj in objects:
        if is_gate(obj):  # it only waits for the workers' sshd: no TensorFlow runs there
            continue
        spec = obj.get("spec", {})
        pods = [spec] if obj["kind"] == "Pod" else []
        if obj["kind"] == "Job":
            pods.append(spec["template"]["spec"])
        if obj["kind"] == "MPIJob":
            pods += [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()]
        out += [c for pod in pods for c in pod.get("containers", [])]
    return out


def _rendered_levels(mode: str, env: dict[str, str]) -> tuple[list[str | None], list[str]]:
    spec = build_spec(name="tf", workers=2, gpus_per_worker=1, env=env)
    objects = render(spec, mode=mode, ssh=FIXED_KEYS if mode == "pods" else None,
                     benchmark_source=STUB_BENCHMARK)
    containers = _containers(objects)
    assert containers
    levels = [{e["name"]: e.get("value") for e in c.get("env", [])}.get(LEVEL) for c in containers]
    launcher_cmd = next(c["command"] for c in containers if "mpirun" in c.get("command", []))
    return levels, launcher_cmd


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_every_pod_keeps_tensorflow_at_warnings_and_mpirun_forwards_it(mode):
    levels, launcher_cmd = _rendered_levels(mode, {})
    assert set(levels) == {"1"}
    exported = [launcher_cmd[i + 1] for i, w in enumerate(launcher_cmd) if w == "-x"]
    assert LEVEL in exported  # ranks on other pods get it through mpirun


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_the_users_level_wins_in_the_pods(mode):
    levels, _ = _rendered_levels(mode, {LEVEL: "0"})
    assert set(levels) == {"0"}


def _local_env(tmp_path, env, environ):
    spec = build_spec(name="tf", workers=2, env=env)
    launch = build_launch(spec, mpi=LocalMpi("/usr/bin/mpirun", MpiDialect("OpenMPI", 4)),
                          hostfile=tmp_path / "h", job_dir=None, gpus=[], python="/venv/bin/python",
                          script=tmp_path / "b.py", cores=4, is_root=False, environ=environ)
    exported = [launch.argv[i + 1] for i, w in enumerate(launch.argv) if w == "-x"]
    return launch.env, exported


def test_local_ranks_keep_tensorflow_at_warnings(tmp_path):
    env, exported = _local_env(tmp_path, {}, {"PATH": "/bin"})
    assert env[LEVEL] == "1" and LEVEL in exported


def test_local_the_users_level_wins_from_e_and_from_the_shell(tmp_path):
    env, _ = _local_env(tmp_path, {LEVEL: "3"}, {"PATH": "/bin", LEVEL: "0"})
    assert env[LEVEL] == "3"  # -e beats the shell
    env, exported = _local_env(tmp_path, {}, {"PATH": "/bin", LEVEL: "0"})
    assert LEVEL not in env and LEVEL in exported  # the shell's 0 is inherited and forwarded
