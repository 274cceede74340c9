"""The preflight rehearsed in pods: the job's own mpirun line over real sshd and pod network
namespaces runs hvdk8s_preflight.py from the ConfigMap before the program; with one pod's
network slowed by `tc` (a token bucket on its eth0, inside its namespace) the preflight names
that pod, and under --preflight fail the program never starts and the workers are released."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from launcher.backends.kubernetes.rendering import render
from launcher.formats.preflight_reports import preflight_status
from launcher.preparing.sshkeys import generate_ssh_keys
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render_trainjob import horovod_runtime
from mpijob.perf.preflight import pair_keys, plain_plan
from tests.rehearsal.cluster import OperatorJob, PodsJob, TrainerJob

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (iproute2)")]

# Expected of every path across pods: 20 MB/s, far below what a veth does unshaped (2 MiB
# all-reduces: 0.07 to 1.6 GB/s measured on the loaded 2-core VM) and far above the 2 MB/s a
# pod slowed to 16 Mbit/s gives.
EXPECTED = {"gbs": 0.02, "link": "the rehearsal's pod network", "kind": "net"}


def _objects(policy: str, mode: str = "pods") -> list[dict]:
    spec = build_spec(name="demo", workers=3, gpus_per_worker=0, image="rehearsal",
                      command=("hostname",), preflight=policy)
    plan = {**plain_plan([1, 1, 1]), "bytes": 2 << 20, "iters": 3, "warmup": 1,
            "nodes": EXPECTED, "pairs": {f"{a}-{b}": EXPECTED for a, b in pair_keys(3)}}
    return render(spec, mode=mode, ssh=generate_ssh_keys() if mode == "pods" else None,
                  preflight_plan=plan)


def _slow_down(pod) -> None:
    subprocess.run(["ip", "netns", "exec", pod.netns, "tc", "qdisc", "add", "dev", "eth0", "root",
                    "tbf", "rate", "16mbit", "burst", "64kbit", "latency", "400ms"], check=True)


def test_the_preflight_runs_in_the_pods_before_the_program(cluster):
    job = PodsJob(cluster, _objects("warn"))
    out = job.finish(timeout=300)
    assert out.launcher_exit == 0, out.launcher_log
    pre = preflight_status(out.launcher_log.splitlines())
    assert pre["verdict"] == "pass", [(p["path"], p["nodes"], p["busbw_gbs"], p["seconds"]) for p in pre["paths"]]
    assert {p["path"] for p in pre["paths"]} == {"nodes", "pair"}
    assert all(p["verdict"] == "ok" and p["backend"] == "mpi" for p in pre["paths"]), pre
    # Then the program, on every worker.
    assert {"demo-worker-0", "demo-worker-1", "demo-worker-2"} <= set(out.launcher_log.splitlines())


def test_a_slowed_pod_is_named_and_under_fail_the_program_never_starts(cluster):
    job = PodsJob(cluster, _objects("fail"))
    slowed = next(w for w in job.pod_workers if w.name == "demo-worker-1")
    _slow_down(slowed)
    out = job.finish(timeout=300)
    assert out.launcher_exit == 86, out.launcher_log
    pre = preflight_status(out.launcher_log.splitlines())
    assert pre["verdict"] == "fail" and pre["policy"] == "fail"
    assert pre["findings"] == [
        "pod demo-worker-1: every all-reduce with it is slow (2 pairs)"], pre
    assert "the program does not start" in out.launcher_log
    assert "demo-worker-0" not in out.launcher_log.splitlines()  # hostname never ran
    assert out.phase == "Failed" and out.still_running == []  # the workers are released


@pytest.mark.parametrize("mode", ["operator", "trainjob"])
def test_the_operators_and_trainers_pods_run_the_preflight_too(cluster, mode):
    objects = _objects("warn", mode)
    if mode == "operator":
        job = OperatorJob(cluster, objects)
    else:
        job = TrainerJob(cluster, objects, horovod_runtime(build_spec(name="demo",
                                                                      image="rehearsal")))
    out = job.finish(timeout=300)
    assert out.launcher_exit == 0, out.launcher_log
    pre = preflight_status(out.launcher_log.splitlines())
    assert pre["verdict"] == "pass", pre
    assert {p["path"] for p in pre["paths"]} == {"nodes", "pair"} and len(pre["paths"]) == 4
    assert out.still_running == []
