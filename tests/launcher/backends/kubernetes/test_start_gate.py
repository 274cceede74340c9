"""The start gate (mpijob/k8s/start_gate.py): with no agent and no hvdk8s process running, a
built-in job whose pods never start gives its GPUs back by what Kubernetes enforces itself
(the Job controller's activeDeadlineSeconds, the garbage collector's ownerReference
cascade), and a job that started is never cut short by it."""

from __future__ import annotations

import time

import pytest

from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.start_gate import is_gate
from tests.k8s_env import hvdk8s
from tests.launcher.backends.kubernetes.test_production_cluster import MISSING, gpu_holders
from tests.render_cases import FIXED_KEYS as KEYS


def _gate(srv, job: str) -> dict | None:
    return srv.get("jobs", names.start_gate(job))


def _condition(job: dict, kind: str) -> dict | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or []
                 if c["type"] == kind and c["status"] == "True"), None)


# 20 s of real time: `get` reads the start timeout against the CLI's own clock, so the
# server's clock cannot be advanced past it.
@pytest.mark.slow
def test_unpullable_job_holds_no_gpu_90s_after_submit_with_nobody_watching(k8s):
    srv = k8s.server()
    srv.unpullable_image(MISSING)
    began = time.monotonic()
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "unp", "--workers", "2", "--gpus", "1",
                       "--image", MISSING, "--start-timeout", "20", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    # No agent, no `get`/`wait`: from here on only the server's controllers act.
    assert gpu_holders(srv, "unp"), "the workers were scheduled and hold their GPUs"
    workers = [p for p in srv.objects("pods") if names.LABEL_ROLE in p["metadata"]["labels"]
               and p["metadata"]["labels"][names.LABEL_ROLE] == names.ROLE_WORKER]
    gate_pods = [p for p in srv.objects("pods")
                 if p["metadata"]["labels"].get(names.LABEL_START_GATE) == "unp"]
    assert len(gate_pods) == 1
    assert all(w["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": gate_pods[0]["metadata"]["name"],
        "uid": gate_pods[0]["metadata"]["uid"], "controller": False,
        "blockOwnerDeletion": False}] for w in workers)
    deadline = _gate(srv, "unp")["spec"]["activeDeadlineSeconds"]
    assert 20 <= deadline <= 20 + (time.monotonic() - began) + 1
    srv.wait_for(lambda: gpu_holders(srv, "unp") == [], timeout=90 - (time.monotonic() - began))
    srv.wait_for(lambda: _condition(_gate(srv, "unp"), "Failed"))  # recorded after the deletes
    assert _condition(_gate(srv, "unp"), "Failed")["reason"] == "DeadlineExceeded"
    # The launcher Job (no GPU) stays, with the reason at the next `get`, until `tidy`
    # fails it.
    got = hvdk8s(k8s, "get", "unp")
    assert "StartTimeout" in got.output and "`hvdk8s tidy unp -n default`" in got.output, \
        got.output
    assert hvdk8s(k8s, "tidy", "unp").stdout.startswith("job unp: failed (StartTimeout: ")
    assert srv.get("jobs", "unp-launcher")["spec"]["suspend"] is True


def test_a_started_job_outlives_the_gate_deadline(k8s):
    srv = k8s.server()
    # The gate's probe: every worker's sshd answered (as gate.sh exits once they do).
    srv.script_pod(r"ok-start-gate-.*", logs=["hvdk8s: every worker started"], exit_code=0)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "ok", "--workers", "2", "--gpus", "1",
                       "--image", k8s.image, "--start-timeout", "1", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: _condition(_gate(srv, "ok") or {}, "Complete"))
    armed = _gate(srv, "ok")["spec"]["activeDeadlineSeconds"]
    holders = gpu_holders(srv, "ok")
    assert holders
    srv.clock.advance(armed + 1.5)  # past the deadline: nothing may happen now
    srv.step(3)  # every controller has looked at the job since
    gate = _gate(srv, "ok")
    assert _condition(gate, "Complete") and not _condition(gate, "Failed")
    assert gpu_holders(srv, "ok") == holders
    got = hvdk8s(k8s, "get", "ok")
    assert "Running" in got.output
    # `get` only says so; `tidy` hands the workers to the launcher Job: the pod garbage
    # collector may delete a succeeded gate pod on a busy cluster, and must not take them
    # with it.
    assert "note: job ok has started, but its workers are still owned by its start gate's " \
           "pod" in got.output and "`hvdk8s tidy ok -n default` hands them to its launcher " \
           "Job" in got.output
    assert all(srv.get("pods", name)["metadata"]["ownerReferences"][0]["kind"] == "Pod"
               for name in holders)
    tidied = hvdk8s(k8s, "tidy", "ok")
    assert tidied.exit_code == 0, tidied.output
    assert tidied.stdout == (f"job ok: handed {', '.join(sorted(holders))} from its start "
                             "gate's pod to Job ok-launcher\n")
    assert "note:" not in hvdk8s(k8s, "get", "ok").output
    launcher_uid = srv.get("jobs", "ok-launcher")["metadata"]["uid"]
    for name in holders:
        (ref,) = srv.get("pods", name)["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"]) == ("Job", launcher_uid)
    srv.delete("pods", next(p["metadata"]["name"] for p in srv.objects("pods")
                            if p["metadata"]["labels"].get(names.LABEL_START_GATE) == "ok"))
    assert gpu_holders(srv, "ok") == holders


def test_delete_removes_the_gate_and_a_resubmit_finds_the_name_free(k8s):
    srv = k8s.server()
    args = ("submit", "mpi", "--name", "again", "--workers", "1", "--gpus", "1", "--image",
            k8s.image, "python", "t.py")
    assert hvdk8s(k8s, *args).exit_code == 0
    assert _gate(srv, "again") is not None
    assert hvdk8s(k8s, "delete", "again").exit_code == 0
    assert _gate(srv, "again") is None
    assert not [p for p in srv.objects("pods")
                if p["metadata"]["labels"].get(names.LABEL_START_GATE) == "again"]
    assert hvdk8s(k8s, "submit", *args[1:]).exit_code == 0


def _rendered(**fields) -> list[dict]:
    spec = build_spec(**{"name": "g", "workers": 2, "gpus_per_worker": 1, "image": "img",
                         "command": ["python", "t.py"], **fields})
    return render(spec, ssh=KEYS)


def test_the_gate_comes_before_the_workers_and_only_in_built_in_mode():
    objects = _rendered()
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds.index(("Job", "g-start-gate")) < kinds.index(("Pod", "g-worker-0"))
    gate = next(o for o in objects if is_gate(o))
    assert names.LABEL_JOB not in gate["metadata"]["labels"]  # never a job's root or pod
    assert "activeDeadlineSeconds" not in gate["spec"]  # set once the workers are scheduled
    assert gate["spec"]["template"]["spec"]["containers"][0]["image"] == "img"
    assert not any(is_gate(o) for o in _rendered(start_timeout=0))
    assert not any(is_gate(o) for o in render(build_spec(
        name="g", workers=2, gpus_per_worker=1, image="img", command=["python", "t.py"]),
        mode="operator"))


def test_an_elastic_job_that_never_starts_loses_its_worker_job_and_gpus(k8s):
    srv = k8s.server()
    srv.unpullable_image(MISSING)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "eun", "--workers", "2",
                       "--min-workers", "1", "--gpus", "1", "--image", MISSING,
                       "--start-timeout", "3", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    (ref,) = srv.get("jobs", "eun-worker")["metadata"]["ownerReferences"]
    assert ref["kind"] == "Pod"  # the gate's pod owns the worker Job
    srv.wait_for(lambda: gpu_holders(srv, "eun") != [])
    srv.wait_for(lambda: gpu_holders(srv, "eun") == [] and srv.get("jobs", "eun-worker") is None,
                 timeout=60)


def test_an_elastic_job_that_started_is_handed_to_its_launcher(k8s):
    srv = k8s.server()
    srv.script_pod(r"est-start-gate-.*", logs=["hvdk8s: every worker started"], exit_code=0)
    k8s.script_launcher("est", ["horovodrun"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "est", "--workers", "2", "--min-workers",
                  "1", "--gpus", "1", "--image", k8s.image, "--start-timeout", "1",
                  "python", "t.py").exit_code == 0
    gate = srv.get("jobs", names.start_gate("est"))
    env = {e["name"]: e.get("value") for e in
           gate["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HVDK8S_GATE_HOSTS"] == "est-worker-0.est-worker"  # the minimum
    srv.wait_for(lambda: _condition(_gate(srv, "est") or {}, "Complete"))
    srv.wait_for(lambda: "Running" in hvdk8s(k8s, "get", "est").output)
    assert "est-worker" in hvdk8s(k8s, "tidy", "est").stdout
    (ref,) = srv.get("jobs", "est-worker")["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"]) == ("Job", "est-launcher")


def test_an_elastic_job_on_its_minimum_is_not_failed_for_a_worker_that_cannot_start():
    from datetime import datetime, timedelta, timezone

    from launcher.backends.kubernetes import start_guard

    def pod(name, phase, role="worker"):
        return {"metadata": {"name": name, "labels": {names.LABEL_ROLE: role}},
                "spec": {"nodeName": "n"},
                "status": {"phase": phase, "conditions": [{
                    "type": "PodScheduled", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}

    later = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(hours=1)
    pods = [pod("e-worker-0-a", "Running"), pod("e-worker-1-b", "Pending")]

    def root(**spec):
        import json
        return {"metadata": {"annotations": {names.ANNOTATION_SPEC: json.dumps(
            {"start_timeout": 60, "workers": 2, **spec})}}}

    assert start_guard.overdue(root(min_workers=1), pods, later) is None
    assert start_guard.overdue(root(min_workers=2), pods, later)[0] is pods[1]
    assert start_guard.overdue(root(), pods, later)[0] is pods[1]  # not elastic: as before
