"""The preflight's verdict in `get`, for a job in each mode on the test API server: the
launcher's log carries the lines the preflight program writes (scripted here: the test
server runs no image), and `get` shows the verdict, what failed and every figure."""

from __future__ import annotations

import contextlib
import io
import json
import types

import pytest

from tests.k8s_env import hvdk8s
from tests.podscripts import load_podscript

IMAGE = "img:1"


def preflight_lines(policy: str) -> list[str]:
    """What the program's rank 0 prints for two nodes whose network is 0.1 of expected."""
    program = load_podscript("hvdk8s_preflight.py", "hvdk8s_preflight_lines")
    net = {"gbs": 7.4, "link": "network: 100 Gb/s TCP NIC of node-a", "kind": "net"}
    plan = {"gpus": True, "pods": [{"slots": 1, "node": "node-a"}, {"slots": 1, "node": "node-b"}],
            "nodes": net}
    gathered = [{"rank": r, "host": f"pf-worker-{r}", "pod": r,
                 "gpus": [{"gpu": 0, "problems": [], "pcie": "x16 gen4 of x16 gen4"}],
                 "timings": [["nodes", 0, [0, 1], 0.09, 64 << 20]]} for r in range(2)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        program.summarize(plan, gathered, policy, 0.7, types.SimpleNamespace(name="horovod-nccl"), 0.0)
    return out.getvalue().splitlines()


def _script(srv, mode: str, policy: str) -> None:
    lines = preflight_lines(policy)
    if policy == "fail":
        lines, code = lines + ["hvdk8s: preflight failed (exit 86): the program does not start"], 86
    else:
        lines, code = lines + ["program ran"], 0
    launcher = {"pods": r"pf-launcher-.*", "operator": r"pf-launcher-\w{5}",
                "trainjob": r"pf-launcher-0-0-\w{5}"}[mode]
    workers = {"pods": r"pf-worker-\d+", "operator": r"pf-worker-\d+",
               "trainjob": r"pf-node-0-\d+-\w{5}"}[mode]
    srv.script_pod(workers, exit_code=None)
    srv.script_pod(launcher, logs=lines, exit_code=code)


@pytest.mark.parametrize("mode", ["pods", "operator", "trainjob"])
@pytest.mark.parametrize("policy", ["warn", "fail"])
def test_get_shows_the_preflight_and_names_the_slow_path(k8s, mode, policy):
    srv = k8s.server()
    if mode == "operator":
        srv.install_mpi_operator()
    if mode == "trainjob":
        from mpijob.jobspec.spec import build_spec
        from mpijob.k8s import render_trainjob as tj

        srv.install_trainer()
        srv.create(tj.horovod_runtime(build_spec(name="pf", workers=2, gpus_per_worker=1,
                                                 image=IMAGE, command=("python", "t.py"))))
    _script(srv, mode, policy)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "pf", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--mode", mode, "--preflight", policy, "python", "t.py")
    assert result.exit_code == 0, result.output
    waited = hvdk8s(k8s, "wait", "pf", "--timeout", "60")
    assert (waited.exit_code == 0) == (policy == "warn"), waited.output

    status = json.loads(hvdk8s(k8s, "get", "pf", "-o", "json").stdout)
    pre = status["preflight"]
    assert pre["verdict"] == "fail" and pre["policy"] == policy
    (path,) = pre["paths"]
    assert path["path"] == "nodes" and path["verdict"] == "slow"
    assert path["busbw_gbs"] == pytest.approx(64 * 2**20 / 0.09 / 1e9)
    assert pre["findings"] == [f"across nodes (one rank each): {path['busbw_gbs']:.3g} GB/s "
                               "busbw, expected 7.4 (network: 100 Gb/s TCP NIC of node-a)"]

    if policy == "fail":  # what ended the job, on get's first line and in wait's message
        assert status["reason"] == "PreflightFailed"
        assert status["message"] == f"the program did not start: {pre['findings'][0]}"
    else:
        assert status["phase"] == "Succeeded"

    table = hvdk8s(k8s, "get", "pf").stdout
    then = "the program did not start" if policy == "fail" else "the program went on"
    assert "preflight: FAILED" in table and then in table
    assert "failed: across nodes (one rank each)" in table
    assert "GPUs: 2 of 2 healthy" in table


def test_get_finds_the_preflight_at_the_head_of_a_long_log(k8s):
    srv = k8s.server()
    lines = preflight_lines("warn") + [f"step {i}" for i in range(800)]  # past the tail read
    srv.script_pod(r"pf-worker-\d+", exit_code=None)
    srv.script_pod(r"pf-launcher-.*", logs=lines, exit_code=0)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "pf", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--mode", "pods", "--preflight", "warn", "python", "t.py")
    assert result.exit_code == 0, result.output
    assert hvdk8s(k8s, "wait", "pf", "--timeout", "60").exit_code == 0
    pre = json.loads(hvdk8s(k8s, "get", "pf", "-o", "json").stdout)["preflight"]
    assert pre["verdict"] == "fail" and len(pre["paths"]) == 1  # read once, not twice
