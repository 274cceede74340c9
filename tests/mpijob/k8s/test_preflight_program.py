"""The preflight program (mpijob/k8s/podscripts/hvdk8s_preflight.py) in parts: its NVML
checks on a fake NVML, how it names the slow hardware, its reports as `get` reads them; and,
marked slow, the program under mpirun and the launch line's wrapper under /bin/sh."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types

import pytest

from launcher.formats.preflight_reports import preflight_status
from launcher.formats.rank_reports import iter_reports
from mpijob.k8s.command import preflight_then
from tests.podscripts import PODSCRIPTS, load_podscript

PROGRAM = PODSCRIPTS / "hvdk8s_preflight.py"


def _program():
    return load_podscript(PROGRAM.name)


class _FakeNvml(types.ModuleType):
    """nvidia-ml-py's calls the program makes, on GPUs described by dicts; a call a GPU does
    not support raises, as NVML's NOT_SUPPORTED does."""

    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, gpus):
        super().__init__("pynvml")
        self.gpus = gpus

    def nvmlInit(self):  # noqa: N802 (NVML's names)
        pass

    def nvmlShutdown(self):  # noqa: N802
        pass

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return self.gpus[i]

    def _get(self, key):
        def call(handle, *args):
            if key not in handle:
                raise RuntimeError("Not Supported")
            return handle[key]
        return call

    def __getattr__(self, name):
        keys = {"nvmlDeviceGetUUID": "uuid", "nvmlDeviceGetTotalEccErrors": "ecc",
                "nvmlDeviceGetRetiredPagesPendingStatus": "pending",
                "nvmlDeviceGetRemappedRows": "remap",
                "nvmlDeviceGetCurrentClocksThrottleReasons": "throttle",
                "nvmlDeviceGetCurrPcieLinkWidth": "width", "nvmlDeviceGetMaxPcieLinkWidth": "max_width",
                "nvmlDeviceGetCurrPcieLinkGeneration": "gen",
                "nvmlDeviceGetMaxPcieLinkGeneration": "max_gen"}
        if name in keys:
            return self._get(keys[name])
        if name == "nvmlDeviceGetNvLinkState":
            def state(handle, link):
                if link >= 18:
                    raise RuntimeError("Invalid Argument")
                return 1 if link < handle["links_up"] else 0
            return state
        raise AttributeError(name)


HEALTHY = {"uuid": "GPU-0", "ecc": 0, "pending": 0, "remap": (0, 0, 0, 0), "throttle": 0x1,
           "width": 16, "max_width": 16, "gen": 5, "max_gen": 5, "links_up": 18}


def test_nvml_checks_name_each_fault_and_pass_a_healthy_gpu(monkeypatch):
    sick = {**HEALTHY, "uuid": "GPU-1", "ecc": 3, "pending": 1, "throttle": 0x40 | 0x1,
            "width": 8, "links_up": 12}
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml([HEALTHY, sick]))
    gpus, source = _program().gpu_checks(18, True)
    assert source == "nvml"
    assert gpus[0]["problems"] == [] and gpus[0]["nvlinks_up"] == 18
    problems = gpus[1]["problems"]
    assert "3 uncorrected ECC errors since boot" in problems
    assert "retired pages pending (reset the GPU)" in problems
    assert "clocks throttled: hardware thermal slowdown" in problems
    assert "PCIe link x8 of x16" in problems
    assert "12 of the 18 NVLinks the plan counted are up (down: 12, 13, 14, 15, 16, 17)" in problems


def test_nvml_calls_a_gpu_does_not_support_are_said_not_fatal(monkeypatch):
    old = {"uuid": "GPU-0", "width": 16, "max_width": 16, "links_up": 0}  # no ECC, no NVLink
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml([old]))
    (gpu,), _ = _program().gpu_checks(None, True)
    assert gpu["problems"] == []
    assert "ecc" in gpu["unreadable"]


def test_no_gpus_no_checks():
    assert _program().gpu_checks(None, False) == ([], "no GPUs in this job")


def _pair(a, b, verdict):
    return {"path": "pair", "pods": [a, b], "verdict": verdict, "busbw_gbs": 1.0,
            "expected_gbs": 10.0, "link": "net", "ranks": 2}


PLAN4 = {"pods": [{"slots": 1, "node": f"n{i}"} for i in range(4)]}
HOSTS4 = {i: f"pod-{i}" for i in range(4)}


def test_a_node_slow_in_both_its_pairs_is_named_alone():
    prog = _program()
    results = [_pair(0, 1, "ok"), _pair(2, 3, "slow"), _pair(1, 2, "slow"), _pair(3, 0, "ok"),
               {"path": "nodes", "pods": [0, 1, 2, 3], "verdict": "slow", "busbw_gbs": 1.0,
                "expected_gbs": 10.0, "ranks": 4}]
    assert prog.findings(PLAN4, results, [], HOSTS4) == [
        "node n2 (pod pod-2): every all-reduce with it is slow (2 pairs)"]


def test_one_slow_pair_names_its_two_nodes():
    prog = _program()
    results = [_pair(0, 1, "ok"), _pair(2, 3, "slow"), _pair(1, 2, "ok"), _pair(3, 0, "ok")]
    (finding,) = prog.findings(PLAN4, results, [], HOSTS4)
    assert finding.startswith("node n2 (pod pod-2) and node n3 (pod pod-3): all-reduce between")


def test_a_slow_node_path_and_a_sick_gpu_are_named_with_their_figures():
    prog = _program()
    results = [{"path": "node", "pods": [1], "verdict": "slow", "busbw_gbs": 40.0,
                "expected_gbs": 300.0, "link": "NVLink inside a pod", "ranks": 8}]
    gpus = [{"gpu": 3, "pod": 1, "problems": ["PCIe link x8 of x16"]}]
    assert prog.findings({"pods": [{"slots": 8}, {"slots": 8, "node": "b"}]}, results, gpus,
                         {0: "w-0", 1: "w-1"}) == [
        "GPU 3 of node b (pod w-1): PCIe link x8 of x16",
        "node b (pod w-1): all-reduce of its 8 ranks 40 GB/s busbw, expected 300 "
        "(NVLink inside a pod)"]


class _OneProcessComm:
    """Every rank's report already gathered (the program's rank 0 sees this)."""

    name = "horovod-nccl"


def test_summary_reports_are_what_get_reads(capsys):
    prog = _program()
    plan = {"gpus": True, "pods": [{"slots": 2, "node": "a",
                                    "node_path": {"gbs": 100.0, "link": "NVLink", "kind": "nvlink"}}]}
    gathered = [{"rank": 0, "host": "w-0", "pod": 0, "gpus": [dict(gpu=0, problems=[])],
                 "timings": [["node", 0, [0, 1], 0.010, 64 << 20]]},
                {"rank": 1, "host": "w-0", "pod": 0, "timings": [["node", 0, [0, 1], 0.020, 64 << 20]]}]
    verdict = prog.summarize(plan, gathered, "fail", 0.7, _OneProcessComm(), 0.0)
    out = capsys.readouterr().out
    reports = list(iter_reports(out, kind="preflight"))
    path = next(r for r in reports if r["check"] == "allreduce")
    # The slowest member's time: 64 MiB x 2(n-1)/n / 20 ms = 3.36 GB/s, far below 0.7 x 100.
    assert path["busbw_gbs"] == pytest.approx(64 * 2**20 / 0.020 / 1e9)
    assert verdict == "fail" and path["verdict"] == "slow"
    status = preflight_status(out.splitlines())
    assert status["verdict"] == "fail" and status["policy"] == "fail"
    assert status["findings"][0].startswith("node a (pod w-0): all-reduce of its 2 ranks")


def test_gpu_figures_measured_on_host_memory_are_not_judged(capsys):
    prog = _program()
    plan = {"gpus": True, "pods": [{"slots": 2, "node_path": {"gbs": 100.0}}]}
    gathered = [{"rank": r, "host": "w", "pod": 0, "timings": [["node", 0, [0, 1], 1.0, 8]]}
                for r in range(2)]
    mpi = types.SimpleNamespace(name="mpi")
    assert prog.summarize(plan, gathered, "fail", 0.7, mpi, 0.0) == "pass"
    summary = next(iter_reports(capsys.readouterr().out.splitlines()[-1:]))
    assert "not judged against the GPU links" in summary["notes"][0]


# ---------------------------------------------------------------------------- slow: real runs
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("policy,code", [("warn", 0), ("fail", 86)])
def test_under_mpirun_an_unreachable_expectation_fails_only_under_fail(policy, code):
    pytest.importorskip("mpi4py")
    plan = {"pods": [{"slots": 2, "node": "here",
                      "node_path": {"gbs": 1e6, "link": "a link no machine has", "kind": "net"}}],
            "bytes": 1 << 20, "iters": 2, "warmup": 1}
    run = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                          "-mca", "mpi_yield_when_idle", "1", sys.executable, str(PROGRAM),
                          "--policy", policy, "--plan-json", json.dumps(plan)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == code, run.stderr
    status = preflight_status(run.stdout.splitlines())
    assert status["verdict"] == "fail"
    assert status["findings"] and "a link no machine has" in status["findings"][0]


@pytest.mark.slow
@pytest.mark.parametrize("policy,program_runs,code", [("warn", True, 0), ("fail", False, 86)])
def test_the_wrapper_starts_the_program_only_as_the_policy_says(tmp_path, policy, program_runs,
                                                                 code):
    marker = tmp_path / "ran"
    argv = preflight_then(policy, ["sh", "-c", "exit 86"], ["touch", str(marker)])
    run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert run.returncode == code
    assert marker.exists() == program_runs
    assert ("the program does not start" in run.stderr) == (not program_runs)
