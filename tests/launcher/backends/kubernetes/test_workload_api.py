"""Kubernetes' own gang scheduling (issue 26): where the cluster serves the Workload API
(KEP-4671, scheduling.k8s.io/v1alpha1) and no gang scheduler add-on is installed, `--gang`
creates a Workload with a gang policy and the worker pods refer to it; the test API server
gangs them as kube-scheduler's GangScheduling plugin does (kubesim/workloads.py)."""

from __future__ import annotations

from mpijob.scheduling.doctor import Facts, assess
from tests.launcher.backends.kubernetes.test_gang_e2e import (
    gpus_held,
    hog,
    hvdk8s,
    leftovers,
    submit,
)

WORKLOADS = "workloads.scheduling.k8s.io"


def workers(srv, job):
    return [p for p in srv.objects("pods", "default")
            if p["metadata"]["name"].startswith(f"{job}-worker-")]


def test_gang_creates_a_workload_and_the_pods_refer_to_it(k8s):
    srv = k8s.server()
    srv.serve_workload_api()
    srv.script_pod(r"\w+-launcher-\w{5}", logs=["total images/sec: 10"], exit_code=0,
                   duration=0.2)
    result = submit(k8s, "wl", "--workers", "2", "--gpus", "8", "--gang")
    assert result.exit_code == 0, result.output
    assert "gang: workload-api found in the cluster" in result.output
    wl = srv.get(WORKLOADS, "wl")
    assert wl["spec"]["podGroups"] == [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]
    assert wl["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job",
                                           "name": "wl-launcher"}
    pods = workers(srv, "wl")
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["workloadRef"] == {"name": "wl", "podGroup": "workers"}
        assert pod["spec"]["schedulerName"] == "default-scheduler"  # kube-scheduler gangs them
    assert hvdk8s(k8s, "wait", "wl", "--timeout", "30").exit_code == 0
    assert hvdk8s(k8s, "delete", "wl").exit_code == 0
    assert leftovers(srv, "wl") == [] and srv.objects(WORKLOADS, "default") == []


def test_workload_gang_on_a_busy_cluster_binds_nothing_and_is_queued(k8s):
    srv = k8s.server()
    srv.serve_workload_api()
    hog(srv, "gpu-node-0")
    srv.script_pod(r"\w+-launcher-\w{5}", exit_code=None)  # waits for its workers
    result = submit(k8s, "wb", "--workers", "2", "--gpus", "8", "--gang", "--schedule-timeout",
                    "1")
    assert result.exit_code == 0, result.output
    assert "queued by Kubernetes' Workload API" in result.output
    assert gpus_held(srv) == 8  # the hog's: one worker fits, but none is bound alone
    assert all(not p["spec"].get("nodeName") for p in workers(srv, "wb"))
    srv.delete("pods", "hog-gpu-node-0")
    srv.wait_for(lambda: all(p["spec"].get("nodeName") for p in workers(srv, "wb")))
    assert hvdk8s(k8s, "delete", "wb").exit_code == 0
    assert leftovers(srv, "wb") == []


def test_without_the_workload_api_gang_falls_back_to_the_own_check_and_says_so(k8s):
    result = submit(k8s, "own", "--workers", "2", "--gpus", "1", "--gang", "--dry-run=server")
    assert "hvdk8s's own all-or-nothing check applies" in result.output


def test_operator_mode_with_the_workload_api_is_refused(k8s):
    srv = k8s.server()
    srv.serve_workload_api()
    srv.install_mpi_operator()
    before = srv.count_requests("POST")
    result = submit(k8s, "op", "--workers", "2", "--gpus", "1", "--gang-scheduler",
                    "workload-api", "--mode", "operator")
    assert result.exit_code == 2
    assert "does not set spec.workloadRef on its pods" in result.output
    assert srv.count_requests("POST") == before


def test_doctor_says_which_gang_mechanism_applies():
    def gang_lines(**kw):
        findings = assess(Facts(server="s", namespace="default", version="v1.35.0", **kw))
        return {f.check: f.finding for f in findings
                if f.check in ("gang", "gang scheduler", "workload-api", "kai")}
    served = gang_lines(groups={"scheduling.k8s.io"},
                        served={"scheduling.k8s.io/v1alpha1/workloads"})
    assert served["workload-api"] == ("the Workload API served (scheduling.k8s.io/v1alpha1 "
                                      "workloads)")
    assert served["gang"] == "--gang uses Kubernetes' Workload API (gang policy)"
    (finding,) = [f for f in assess(Facts(server="s", namespace="default", version="v1.35.0",
                                          groups={"scheduling.k8s.io"},
                                          served={"scheduling.k8s.io/v1alpha1/workloads"}))
                  if f.check == "workload-api"]
    assert "makes a Workload with a gang policy" in finding.effect
    # PriorityClasses alone (scheduling.k8s.io/v1) are not the Workload API.
    absent = gang_lines(groups={"scheduling.k8s.io"})
    assert "gang scheduler" in absent and "workload-api" not in absent
    both = gang_lines(groups={"scheduling.k8s.io", "scheduling.run.ai"},
                      served={"scheduling.k8s.io/v1alpha1/workloads"})
    assert both["gang"] == "--gang uses KAI"
