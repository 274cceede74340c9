"""The start-timeout sweep run with exactly the rights its installed identity has: the test
API server's RBAC (kubesim/rbac.py) enforces the ClusterRole `hvdk8s install agent` binds to
the start guard's ServiceAccount, on a cluster with Kubeflow Trainer, where the sweep must
fail a stuck TrainJob and a stuck built-in job alike."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kubesim.rbac import RBACAuthorizer
from launcher.agent.start_guard_loop import StartGuard
from launcher.backends.kubernetes import start_guard
from launcher.backends.kubernetes.client import connect
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import agent_manifests as am
from mpijob.k8s import render_trainjob as tj
from tests.k8s_env import hvdk8s

GONE = "gone:1"
# The role the per-node agent held before the sweep moved to its own Deployment: no
# Trainer rules, no events.
OLD_AGENT_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["get", "patch"]}]


def _stuck_jobs(k8s):
    """A TrainJob and a built-in job, each with pods that cannot pull their image."""
    srv = k8s.server()
    srv.install_trainer()
    srv.unpullable_image(GONE)
    srv.create(tj.horovod_runtime(build_spec(name="t", workers=2, gpus_per_worker=1,
                                             image=GONE, command=("python", "t.py"))))
    for name, mode in (("tj", "trainjob"), ("bi", "pods")):
        done = hvdk8s(k8s, "submit", "mpi", "--name", name, "--workers", "2", "--gpus", "1",
                      "--image", GONE, "--mode", mode, "--start-timeout", "30",
                      "python", "t.py")
        assert done.exit_code == 0, done.output

    def pulling():
        pods = [p for p in srv.objects("pods", "default")
                if p["metadata"]["name"].startswith(("tj-node-", "bi-worker"))]
        return len(pods) >= 2 and all(
            (p["status"].get("containerStatuses") or [{}])[0].get("state", {})
            .get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")
            for p in pods)
    srv.wait_for(pulling)
    return srv


def _client_as(srv, tmp_path, service_account: str, rules: list[dict]):
    """A client whose token is the ServiceAccount's, bound to a ClusterRole of `rules`, on
    a server that now enforces RBAC for everyone but the admin."""
    srv.policy.rbac = RBACAuthorizer(srv.store)
    ns = "kube-system"
    srv.create(am.service_account(ns, service_account))
    role = am.cluster_role(am.GUARD_NAME)
    role["metadata"]["name"] = service_account
    role["rules"] = rules
    srv.create(role)
    srv.create(am.cluster_role_binding(ns, service_account))
    token = srv.service_account_token(ns, service_account)
    path = srv.write_kubeconfig(tmp_path / f"{service_account}.kubeconfig", token=token,
                                user=service_account)
    return connect(kubeconfig=path)


def test_the_installed_start_guard_fails_trainjobs_and_builtin_jobs(k8s, tmp_path):
    srv = _stuck_jobs(k8s)
    client = _client_as(srv, tmp_path, am.GUARD_NAME, am.GUARD_RULES)
    later = start_guard.utc_now() + timedelta(seconds=31)
    refused: list[str] = []
    failed = start_guard.sweep_node(client, None, later, errors=refused)
    assert refused == []
    assert sorted(failed) == ["default/bi", "default/tj"]
    assert srv.get("trainjobs.trainer.kubeflow.org", "tj")["spec"]["suspend"] is True
    assert srv.get("jobs", "bi-launcher")["spec"]["suspend"] is True


def test_the_old_agent_role_could_not_fail_a_trainjob(k8s, tmp_path):
    srv = _stuck_jobs(k8s)
    client = _client_as(srv, tmp_path, "old-agent", OLD_AGENT_RULES)
    later = start_guard.utc_now() + timedelta(seconds=31)
    with pytest.raises(Exception) as err:
        start_guard.sweep_node(client, None, later)
    assert getattr(err.value, "status", None) == 403
    assert "trainjobs" in str(err.value)
    assert srv.get("trainjobs.trainer.kubeflow.org", "tj")["spec"].get("suspend") is not True


def test_the_per_node_agents_identity_cannot_sweep(k8s, tmp_path):
    """The DaemonSet's token, on every GPU node, reads and patches nodes and nothing else."""
    srv = _stuck_jobs(k8s)
    client = _client_as(srv, tmp_path, am.AGENT_NAME, am.AGENT_RULES)
    with pytest.raises(Exception) as err:
        StartGuard(client).step()
    assert getattr(err.value, "status", None) == 403


def test_doctor_says_whether_the_start_guard_runs(kube_server, kubeconfig):
    import json

    from typer.testing import CliRunner

    from launcher.cli.app import app

    def unattended():
        result = CliRunner().invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json"])
        found = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
        return found["unattended cleanup"]

    assert (unattended()["status"], unattended()["finding"]) == (
        "warn", "the start guard is not installed")
    kube_server.create(am.guard_deployment(namespace="kube-system", image="x:1"))
    assert unattended()["finding"] == "the start guard is not available"

    def available(d):
        d["status"] = {"replicas": 1, "availableReplicas": 1}
    kube_server.store.mutate("apps/deployments", "kube-system", am.GUARD_NAME, available)
    assert unattended()["status"] == "ok"


def test_the_agents_role_is_enough_for_its_annotation(kube_server, tmp_path):
    """What the DaemonSet does with its token, through RBAC: read and patch its Node."""
    from launcher.agent.node_agent import NodeAnnotation

    client = _client_as(kube_server, tmp_path, am.AGENT_NAME, am.AGENT_RULES)
    annotation = NodeAnnotation(client)
    assert annotation.get("gpu-node-0") is None
    annotation.patch("gpu-node-0", '{"v":1}')
    assert annotation.get("gpu-node-0") == '{"v":1}'


def test_the_deployments_command_sweeps_once(k8s, monkeypatch):
    """`hvdk8s agent --sweep-only` (what hvdk8s-start-guard runs) needs no NVML and no node."""
    from typer.testing import CliRunner

    from launcher.cli.app import app

    srv = _stuck_jobs(k8s)
    later = start_guard.utc_now() + timedelta(seconds=31)
    monkeypatch.setattr(start_guard, "utc_now", lambda: later)
    monkeypatch.delenv("NODE_NAME", raising=False)
    result = CliRunner().invoke(app, ["agent", "--sweep-only", "--once"])
    assert result.exit_code == 0, result.output
    assert srv.get("jobs", "bi-launcher")["spec"]["suspend"] is True
    assert srv.get("trainjobs.trainer.kubeflow.org", "tj")["spec"]["suspend"] is True


def test_the_installed_start_guard_takes_what_tidy_takes(k8s, tmp_path):
    """With nobody's hvdk8s running, the sweep hands a started job's workers from the start
    gate's pod to its launcher Job, and records a finished job's rate (from its launcher's
    termination message: the guard reads no log) before removing the worker it left."""
    srv = k8s.server()
    srv.script_pod(r"run-start-gate-.*", logs=["hvdk8s: every worker started"], exit_code=0)
    srv.script_pod(r"run-launcher-.*", logs=["training"], exit_code=None)
    srv.script_pod(r"fin-launcher-.*", runs=[{"logs": ["total images/sec: 70.0"],
                                              "termination_message": "total images/sec: 70.0"}])
    for name in ("run", "fin"):
        done = hvdk8s(k8s, "submit", "mpi", "--name", name, "--workers", "1", "--gpus", "1",
                      "--image", k8s.image, "python", "t.py")
        assert done.exit_code == 0, done.output

    def ready(pod: str) -> bool:
        found = srv.get("pods", pod) or {}
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in (found.get("status") or {}).get("conditions") or [])

    srv.wait_for(lambda: ready("run-worker-0"))
    srv.wait_for(lambda: any(p["status"].get("phase") == "Succeeded"
                             for p in srv.objects("pods", "default")
                             if p["metadata"]["name"].startswith("fin-launcher-")))
    client = _client_as(srv, tmp_path, am.GUARD_NAME, am.GUARD_RULES)
    refused: list[str] = []
    tidied: list[str] = []
    assert start_guard.sweep_node(client, None, errors=refused, tidied=tidied) == []
    assert refused == []
    assert sorted(tidied) == [
        "default/fin: recorded its 70 images/sec on Job fin-launcher",
        "default/fin: removed fin-worker-0 (cleanPodPolicy Running)",
        "default/run: handed run-worker-0 from its start gate's pod to Job run-launcher"]
    (ref,) = srv.get("pods", "run-worker-0")["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"]) == ("Job", "run-launcher")
    tidied.clear()
    start_guard.sweep_node(client, None, errors=refused, tidied=tidied)
    assert tidied == [] and refused == []  # each step once
