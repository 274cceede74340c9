"""A user who may not read the whole cluster (issue 10 #11): submit without --cluster falls
back to what RBAC lets them read, says in one line what it skipped, never a 403 traceback.
Through the CLI against the test API server's authorizer (kubesim/auth.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.jobspec import names
from tests.k8s_env import hvdk8s

runner = CliRunner()


def submit(k8s, name: str, *extra: str):
    return hvdk8s(k8s, "submit", "mpi", "--name", name, "--workers", "2", "--gpus", "1",
                  "--image", "img:1", *extra, "python", "train.py")


def worker_pods(srv, job):
    return [p for p in srv.objects("pods", "default")
            if p["metadata"]["labels"].get(names.LABEL_JOB) == job]


def test_no_cluster_wide_pod_list_falls_back_to_the_namespace(k8s):
    srv = k8s.server()
    srv.forbid("list", "pods", "")  # cluster scope only: the namespace's pods stay readable
    result = submit(k8s, "nsonly")
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.output.splitlines() if "all namespaces" in line]
    assert len(skipped) == 1, result.output
    assert "namespace default only" in skipped[0] and "RBAC" in skipped[0]
    assert worker_pods(srv, "nsonly"), "the job was created"


def test_no_node_list_lets_the_scheduler_place(k8s):
    srv = k8s.server()
    srv.forbid("list", "nodes")
    srv.forbid("list", "pods", "")
    result = submit(k8s, "nonodes")
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.output.splitlines() if "list nodes" in line]
    assert len(skipped) == 1, result.output
    assert "the scheduler places the workers" in result.output
    assert worker_pods(srv, "nonodes")
    # No planned nodes: no node affinity to nodes it could not see.
    for pod in worker_pods(srv, "nonodes"):
        assert pod["spec"].get("affinity") is None


def test_plan_without_cluster_says_what_it_could_not_read(k8s):
    srv = k8s.server()
    srv.forbid("list", "pods", "")
    result = runner.invoke(app, ["plan", "--workers", "2", "--gpus", "1",
                                 *(["--context", k8s.context] if k8s.context else [])])
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == 0, result.output
    assert sum("all namespaces" in line for line in result.output.splitlines()) == 1
    srv.forbid("list", "nodes")
    refused = runner.invoke(app, ["plan", "--workers", "2", "--gpus", "1",
                                  *(["--context", k8s.context] if k8s.context else [])])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "RBAC does not let you list nodes" in refused.output
    assert "--cluster FILE" in refused.output
