"""The Kueue model (kubesim/kueue.py) on hvdk8s's own manifests: why built-in mode is
refused with Kueue, and what its MPIJob integration makes of operator mode."""

from __future__ import annotations

from kubesim.kueue import (
    DEFAULT_FRAMEWORKS_V0_14,
    MAX_POD_SETS,
    pod_sets,
    workload_name,
)
from launcher.backends.kubernetes.rendering import render
from launcher.formats.clusterfile import cluster_from_data
from launcher.preparing.sshkeys import generate_ssh_keys
from mpijob.jobspec.spec import build_spec
from mpijob.scheduling.placement import PlacementRequest, place


def nine_node_job(mode: str, gang: str = "kueue"):
    cluster = cluster_from_data({"defaults": {"gpus": 8, "topology": "dgx1-v100"},
                                 "nodes": [{"name": f"n{i}"} for i in range(9)]})
    spec = build_spec(name="wide", workers=72, gpus_per_worker=1, image="img:1", gang=gang,
                      queue="team-a", command=("python", "train.py"))
    placement = place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
    assert placement.feasible and len(placement.assignments) == 9
    return render(spec, mode=mode, placement=placement, ssh=generate_ssh_keys()
                  if mode == "pods" else None)


def test_built_in_pods_would_be_more_pod_sets_than_a_workload_holds():
    objects = nine_node_job("pods")
    workers = [o for o in objects if o["kind"] == "Pod"]
    assert len(workers) == 9
    # One planned node per pod: each pod's affinity differs, so each is its own PodSet.
    assert len(pod_sets(workers)) == 9 > MAX_POD_SETS


def test_pod_integration_is_off_in_the_v0_14_default_configuration():
    assert "pod" not in DEFAULT_FRAMEWORKS_V0_14
    assert "kubeflow.org/mpijob" in DEFAULT_FRAMEWORKS_V0_14


def test_operator_mode_is_one_workload_of_two_pod_sets(kube_server):
    objects = nine_node_job("operator")
    mpijob = objects[0]
    assert mpijob["kind"] == "MPIJob"
    assert mpijob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    kube_server.install_kueue()
    kube_server.install_mpi_operator()
    kube_server.kueue_queue("team-a", {"nvidia.com/gpu": 72, "cpu": 1000, "memory": "4Ti"})
    created = kube_server.create(mpijob)
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook
    name = workload_name(created)
    assert name.startswith("mpijob-wide-") and len(name) == len("mpijob-wide-") + 5
    kube_server.wait_for(lambda: kube_server.get("workloads", name))
    wl = kube_server.get("workloads", name)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("launcher", 1),
                                                                         ("worker", 9)]
    kube_server.wait_for(lambda: not kube_server.get("mpijobs", "wide")["spec"]["runPolicy"][
        "suspend"])
