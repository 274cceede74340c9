"""An elastic job in the pod rehearsal (tests/rehearsal: real sshd, dnsmasq as CoreDNS,
horovodrun elastic over Gloo, Horovod CPU ranks): 3 workers with --min-workers 2 survive
the kill of one worker pod, go on with 2, take the replacement back, and end with exit 0
and a `total images/sec`.

The rehearsal runs pods, not controllers: this test does what the worker Job's controller
would (mpijob/k8s/render_elastic.py), making each worker pod from the Job's template with
the hostname `<job>-worker-<index>` and a replacement pod (a new address) for the killed
one; the ready-only `<job>-ready` Service is answered by the rehearsal's DNS as CoreDNS
would (Ready pods only)."""

from __future__ import annotations

import secrets
import time

import pytest

from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import BENCHMARK, TINY_BENCHMARK

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.horovod]


def _worker_pod(job: dict, index: int) -> dict:
    """What the Job controller makes of an Indexed Job's template for one index."""
    template = job["spec"]["template"]
    meta = {**template["metadata"], "namespace": job["metadata"]["namespace"],
            "name": f"{job['metadata']['name']}-{index}-{secrets.token_hex(3)[:5]}"}
    meta["labels"] = {**meta["labels"], "batch.kubernetes.io/job-completion-index": str(index)}
    spec = {**template["spec"], "hostname": f"{job['metadata']['name']}-{index}"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _wait(pod, text: str, count: int = 1, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pod.log().count(text) >= count:
            return
        if pod.exit_code() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{pod.name} never logged {text!r} {count}x:\n{pod.log()}")


def test_three_workers_lose_one_go_on_with_two_and_take_the_replacement_back(cluster):  # noqa: F811
    from launcher.backends.kubernetes.rendering import render
    from launcher.preparing.sshkeys import generate_ssh_keys
    from mpijob.jobspec.spec import build_spec
    from mpijob.k8s.start_gate import is_gate

    spec = build_spec(name="demo", workers=3, min_workers=2, max_workers=3, gpus_per_worker=0,
                      image="rehearsal", start_timeout=0,
                      benchmark={**TINY_BENCHMARK, "num_batches": 30})
    objects = render(spec, ssh=generate_ssh_keys(), benchmark_source=BENCHMARK.read_text(),
                     elastic_source=BENCHMARK.with_name("elastic.py").read_text())
    worker_job = next(o for o in objects if o["kind"] == "Job"
                      and o["metadata"]["name"] == "demo-worker")
    assert not any(is_gate(o) for o in objects)  # --start-timeout 0
    pods = [_worker_pod(worker_job, i) for i in range(3)]
    job = PodsJob(cluster, [o for o in objects if o is not worker_job] + pods)
    launcher = job.launcher
    _wait(launcher, "elastic: training on 3 workers (3 ranks)")
    time.sleep(30)  # some steps and commits on three workers

    lost = job.workers[2]
    lost.kill(grace=0, reason="Killed")  # the pod is gone, its rank with it
    _wait(launcher, "now 2 workers (2 ranks)")
    # The worker Job replaces the pod: same index and hostname, a new pod and address.
    job.workers.append(cluster.add_pod(_worker_pod(worker_job, 2), configmaps=job.configmaps,
                                       secrets_=job.secrets, extra_env={}))
    _wait(launcher, "elastic: training on 3 workers (3 ranks)", count=2)

    out = job.finish(timeout=900)
    log = out.launcher_log
    assert out.launcher_exit == 0, log
    assert "elastic: training on 2 workers (2 ranks)" in log, log
    phases = [line for line in log.splitlines() if "elastic: phase" in line]
    print("\n".join(line for line in log.splitlines() if "elastic:" in line
                    or "total images/sec" in line))  # the figures, with -s
    assert any("2 workers (2 ranks)" in p for p in phases), log
    assert any("3 workers (3 ranks)" in p for p in phases), log
    assert "total images/sec: " in log, log
