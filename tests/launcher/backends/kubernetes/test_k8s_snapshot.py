"""The cluster snapshot read from nodes and live pods."""

from __future__ import annotations

import re

from launcher.backends.kubernetes.snapshot import build_snapshot, pod_requests
from mpijob.jobspec import names
from mpijob.scheduling.presets import preset
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, annotation_payload


def node(name, gpus=8, *, labels=None, annotations=None, taints=None, ready=True,
         unschedulable=False, cpu="64", memory="256Gi"):
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    alloc = {"cpu": cpu, "memory": memory}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec,
            "status": {"allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, node_name, gpus=0, *, ns="default", cpu=None, memory=None, annotations=None,
        labels=None, phase="Running", init_cpu=None):
    limits, requests = {}, {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    spec = {"nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": limits, "requests": requests}}]}
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    return {"metadata": {"name": name, "namespace": ns, "annotations": annotations or {},
                         "labels": labels or {}},
            "spec": spec, "status": {"phase": phase}}


V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.count": "8"}


def test_preset_topology_and_counted_gpus_lowest_first_with_a_note():
    snap = build_snapshot([node("n0", labels=V100)], [pod("p", "n0", 3)])
    n = snap.cluster.node("n0")
    assert n.topology.links == preset("dgx1-v100").links
    assert n.allocated == frozenset({0, 1, 2})
    assert n.gpu_model == "Tesla-V100-SXM2-16GB"
    assert snap.measured == {"n0": False}
    assert len(snap.notes) == 1 and re.search(r"n0: 3 GPU\(s\) .* counted as GPUs 0,1,2",
                                               snap.notes[0])


def test_hvdk8s_pods_say_which_gpus_they_hold():
    ours = pod("vgg16-worker-0", "n0", 2, annotations={names.ANNOTATION_GPUS: "4,5"},
               labels={names.LABEL_JOB: "vgg16", names.LABEL_ROLE: "worker"})
    snap = build_snapshot([node("n0", labels=V100)], [ours, pod("other", "n0", 1)])
    assert snap.cluster.node("n0").allocated == frozenset({4, 5, 0})
    usage = {u.name: u for u in snap.pods}
    assert usage["vgg16-worker-0"].indices == (4, 5) and usage["vgg16-worker-0"].job == "vgg16"
    assert usage["other"].indices == (0,)


def test_the_topology_agent_annotation_is_authoritative():
    topo = preset("dgx1-v100")
    text = annotation_payload(node="n0", topology=topo, gpu_model="Tesla-V100-SXM2-16GB",
                              pcie_gen=4, allocated={"default/p": [6, 7], "default/gone": [0]})
    snap = build_snapshot([node("n0", annotations={ANNOTATION_TOPOLOGY: text})],
                          [pod("p", "n0", 2)])
    n = snap.cluster.node("n0")
    # The agent's entry for a pod that no longer runs is stale and frees its GPU.
    assert n.allocated == frozenset({6, 7})
    assert (n.pcie_gen, snap.measured["n0"], snap.notes) == (4, True, ())


def test_terminated_pods_and_unbound_pods_hold_nothing():
    snap = build_snapshot([node("n0", labels=V100)],
                          [pod("done", "n0", 8, phase="Succeeded"), pod("pending", None, 8)])
    assert snap.cluster.node("n0").allocated == frozenset()


def test_cordon_readiness_taints_network_and_free_cpu_memory():
    nodes = [node("n0", labels={**V100, "hvdk8s.io/network-gbps": "100"}, unschedulable=True,
                  taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
             node("n1", labels=V100, ready=False)]
    pods = [pod("a", "n0", cpu="2", memory="1Gi", init_cpu="4"), pod("b", "n0", cpu="500m")]
    snap = build_snapshot(nodes, pods)
    n0, n1 = snap.cluster.node("n0"), snap.cluster.node("n1")
    assert {(t.key, t.effect) for t in n0.taints} == {
        ("gpu", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}
    assert n0.network_gbps == 100.0 and n1.network_gbps == 10.0
    assert (n0.ready, n1.ready) == (True, False)
    # a: max(2 containers, 4 init) = 4 cores; b: 0.5
    assert n0.free_cpu == 64 - 4.5
    assert n0.free_memory == 256 * 2**30 - 2**30


def test_unhealthy_gpus_missing_from_allocatable_are_unavailable():
    snap = build_snapshot([node("n0", gpus=7, labels=V100)], [])
    n = snap.cluster.node("n0")
    assert (n.gpus, n.allocated) == (8, frozenset({7}))
    assert "only 7 of 8 GPUs are allocatable" in snap.notes[0]


def test_cpu_only_nodes_have_no_gpus():
    snap = build_snapshot([node("cpu0", gpus=0)], [pod("x", "cpu0", cpu="1")])
    assert snap.cluster.node("cpu0").gpus == 0


def test_extended_resource_request_defaults_to_its_limit():
    assert pod_requests(pod("p", "n0", 4))["nvidia.com/gpu"] == 4


def test_live_snapshot_is_two_list_calls_and_one_discovery(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "hog", "namespace": "default"},
                "spec": {"nodeName": "gpu-node-1", "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
    srv.clear_requests()
    snap = k8s.backend().snapshot()
    # /apis tells whether optional add-ons (Volcano HyperNodes, DRA slices) are there to
    # list; they are read before the pods, which are filtered by the nodes they tell of.
    assert [r.path for r in srv.request_log] == ["/api/v1/nodes", "/apis", "/api/v1/pods"]
    assert srv.request_log[2].query["fieldSelector"] == ("status.phase!=Succeeded,"
                                                         "status.phase!=Failed")
    assert snap.cluster.node("gpu-node-1").free_gpus == ()
    assert len(snap.cluster.node("gpu-node-0").free_gpus) == 8


def test_the_agent_wins_over_a_planned_gpu_annotation_it_contradicts():
    """Issue 10 #8: the planned indices are a prediction. `b` was planned 0,1 and the device
    plugin gave it 2,3 (the agent says so); `a`, newer than the agent's last look, was
    planned 2,3 and so really holds other GPUs. Its plan must not take b's 2,3."""
    topo = preset("dgx1-v100")
    text = annotation_payload(node="n0", topology=topo, gpu_model="Tesla-V100-SXM2-16GB",
                              pcie_gen=3, allocated={"default/b-worker-0": [2, 3]})
    late = pod("a-worker-0", "n0", 2, annotations={names.ANNOTATION_GPUS: "2,3"})
    moved = pod("b-worker-0", "n0", 2, annotations={names.ANNOTATION_GPUS: "0,1"})
    snap = build_snapshot([node("n0", annotations={ANNOTATION_TOPOLOGY: text})], [late, moved])
    usage = {u.name: u.indices for u in snap.pods}
    assert usage["b-worker-0"] == (2, 3)  # the agent's, not its plan of 0,1
    assert not set(usage["a-worker-0"]) & {2, 3}
    assert snap.cluster.node("n0").allocated == frozenset({2, 3, *usage["a-worker-0"]})
    assert [u.name for u in snap.pods] == ["a-worker-0", "b-worker-0"]
    assert any("a-worker-0" in note for note in snap.notes)
