"""--metrics-port on Kubernetes: the launcher declares the port and, where the cluster has the
Prometheus Operator's PodMonitor CRD, submit creates a PodMonitor selecting the launcher pod,
owned by the job's root; where it has none, one line says so. Against the test API server."""

from __future__ import annotations

import pytest

from mpijob.jobspec import names
from tests.k8s_env import hvdk8s

SUBMIT = ("submit", "mpi", "--name", "met", "--workers", "1", "--image", "img:1",
          "--metrics-port", "9400", "python", "train.py")


@pytest.fixture
def job_pods(k8s):
    srv = k8s.server()
    srv.script_pod(r"met-launcher-\w{5}", exit_code=None)
    srv.script_pod(r"met-worker-\d+", exit_code=None)
    return srv


def test_a_pod_monitor_selects_the_launcher_where_the_crd_exists(k8s, job_pods):
    srv = job_pods
    srv.install_crd("prometheus-operator")
    result = hvdk8s(k8s, *SUBMIT)
    assert result.exit_code == 0, result.output
    assert "PodMonitor" not in result.output
    monitor = srv.get("podmonitors", names.metrics("met"))
    assert monitor["spec"] == {
        "selector": {"matchLabels": {names.LABEL_JOB: "met",
                                     names.LABEL_ROLE: names.ROLE_LAUNCHER}},
        "podMetricsEndpoints": [{"path": "/metrics", "interval": "30s", "port": "metrics"}]}
    root = srv.get("jobs", names.launcher("met"))
    assert [r["uid"] for r in monitor["metadata"]["ownerReferences"]] == [root["metadata"]["uid"]]
    launcher = srv.wait_for(lambda: next(
        (p for p in srv.objects("Pod", k8s.namespace)
         if p["metadata"]["name"].startswith("met-launcher-")), None), timeout=30)
    labels = launcher["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert launcher["spec"]["containers"][0]["ports"] == [
        {"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]  # defaulted by the server


def test_without_the_crd_one_line_says_no_pod_monitor(k8s, job_pods):
    result = hvdk8s(k8s, *SUBMIT)
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "PodMonitor" in line]
    assert said == ["note: no PodMonitor CRD (monitoring.coreos.com/v1) in the cluster: the "
                    "launcher serves /metrics on port 9400, and no PodMonitor is created"]
    assert not any("podmonitors" in r.path for r in job_pods.request_log)  # none sent
