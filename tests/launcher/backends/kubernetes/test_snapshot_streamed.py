"""The plan from the streamed, slimmed, cache-served snapshot is the plan from a full read."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launcher.backends.kubernetes import client as kclient
from launcher.backends.kubernetes.liststream import parse_list
from launcher.backends.kubernetes.projections import PlacementNode, PlacementPod
from launcher.backends.kubernetes.snapshot import (
    LIVE_PODS,
    PodReader,
    build_snapshot,
    gpu_nodes,
    slim_node,
    take_snapshot,
)
from mpijob.jobspec import names
from mpijob.scheduling.placement import PlacementRequest, Toleration, place

PRODUCTS = ("Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-80GB", None)
POLICIES = ("topology", "binpack", "spread")


@st.composite
def clusters(draw):
    """(nodes, pods) as the API returns them, padded with fields placement never reads."""
    nodes, pods = [], []
    for i in range(draw(st.integers(1, 8))):
        gpus = draw(st.sampled_from((0, 0, 4, 8)))
        labels = {"rack": f"r{draw(st.integers(0, 2))}", "pool": draw(st.sampled_from("ab"))}
        product = draw(st.sampled_from(PRODUCTS))
        if gpus and product:
            labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)})
        alloc = {"cpu": str(draw(st.integers(8, 96))), "memory": f"{draw(st.integers(32, 512))}Gi",
                 "pods": "110"}
        if gpus:
            alloc["nvidia.com/gpu"] = str(gpus - draw(st.sampled_from((0, 0, 1))))
        spec = {"podCIDR": "10.0.0.0/24"}
        if draw(st.booleans()) and i:
            spec["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        if draw(st.integers(0, 9)) == 0:
            spec["unschedulable"] = True
        ready = "True" if draw(st.integers(0, 9)) else "False"
        nodes.append({
            "metadata": {"name": f"node-{i}", "uid": f"u{i}", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": spec,
            "status": {"allocatable": alloc, "capacity": alloc,
                       "conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": ready}],
                       "images": [{"names": [f"registry/img-{k}"], "sizeBytes": 1} for k in range(3)]}})
        for j in range(draw(st.integers(0, 4))):
            want = draw(st.integers(0, gpus)) if gpus else 0
            resources = {"requests": {"cpu": f"{draw(st.integers(1, 8)) * 250}m",
                                      "memory": f"{draw(st.integers(1, 16))}Gi"}}
            if want:
                resources["limits"] = {"nvidia.com/gpu": str(want)}
            annotations = {"kubectl.kubernetes.io/last-applied-configuration": "{}" * 50}
            if want and draw(st.booleans()):
                annotations[names.ANNOTATION_GPUS] = ",".join(map(str, range(want)))
            containers = [{"name": "main", "image": "x", "resources": resources,
                           "env": [{"name": "A", "value": "b" * 200}]}]
            if draw(st.integers(0, 4)) == 0:
                containers[0]["ports"] = [{"containerPort": 22, "hostPort": 2222}]
            pod_spec = {"nodeName": f"node-{i}", "containers": containers,
                        "volumes": [{"name": "v", "emptyDir": {}}]}
            if draw(st.integers(0, 4)) == 0:
                pod_spec["initContainers"] = [{"name": "init", "resources": {
                    "requests": {"cpu": "16"}}}]
            pods.append({
                "metadata": {"name": f"p-{i}-{j}", "namespace": draw(st.sampled_from(("a", "b"))),
                             "labels": {names.LABEL_JOB: f"j{j}", "app": "x"},
                             "annotations": annotations},
                "spec": pod_spec,
                "status": {"phase": draw(st.sampled_from(("Running", "Pending"))),
                           "podIP": "10.0.0.1"}})
    return nodes, pods


requests = st.builds(
    PlacementRequest, workers=st.integers(1, 4), gpus_per_worker=st.integers(1, 8),
    node_selector=st.sampled_from(({}, {"pool": "a"})),
    tolerations=st.sampled_from(((), (Toleration(key="dedicated", value="x",
                                                 effect="NoSchedule"),))),
    cpu_per_worker=st.sampled_from((None, 4.0, 40.0)),
    memory_per_worker=st.sampled_from((None, 2.0**34)))


# How a list is read: every field, or only what projections.py declares, from compact JSON
# as the API server writes it (the msgspec blocks) or from spaced JSON (no item boundary
# found: the generic parser reads it all).
READS = st.sampled_from([(False, (",", ":")), (True, (",", ":")), (True, (", ", ": "))])


def streamed(objects: list[dict], keep, chunk: int, item_type=None,
             separators=(",", ":")) -> list:
    """The objects as a list answer, cut in `chunk`-byte pieces and parsed as they come."""
    data = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                       "items": objects}, separators=separators).encode()
    _, kept = parse_list((data[i:i + chunk] for i in range(0, len(data), chunk)), keep,
                         item_type)
    return kept


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), requests, st.sampled_from(POLICIES), st.integers(7, 5000), READS)
def test_plan_from_the_streamed_snapshot_equals_the_plan_from_a_full_read(cluster, request,
                                                                          policy, chunk, read):
    nodes, pods = cluster
    projected, separators = read
    node_type, pod_type = (PlacementNode, PlacementPod) if projected else (None, None)
    full = build_snapshot(nodes, pods)
    slim_nodes = streamed(nodes, slim_node, chunk, node_type, separators)
    wanted = gpu_nodes(slim_nodes)
    reader = PodReader(wanted)
    lean = build_snapshot(slim_nodes, reader.pods(streamed(pods, reader.keep, chunk, pod_type,
                                                           separators)))
    a, b = place(full.cluster, request, policy), place(lean.cluster, request, policy)
    assert (a.feasible, a.reason, a.assignments) == (b.feasible, b.reason, b.assignments)
    gpu_view = [n for n in full.cluster.nodes if n.name in wanted]
    assert gpu_view == [n for n in lean.cluster.nodes if n.name in wanted]
    # Every node's pods: those that hold nothing but requests summed per node, the same snapshot.
    every = PodReader()
    assert build_snapshot(slim_nodes, every.pods(streamed(pods, every.keep, chunk, pod_type,
                                                          separators))) == full


def test_the_cache_served_paged_snapshot_equals_a_full_read(k8s, monkeypatch):
    srv = k8s.server()
    for i in range(3):
        srv.add_node(f"cpu-node-{i}", gpus=0)
    for i in range(7):
        srv.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"hog-{i}", "namespace": "default"},
                    "spec": {"nodeName": f"gpu-node-{i % 2}" if i < 4 else f"cpu-node-{i % 3}",
                             "containers": [{"name": "c", "image": "x", "resources": {
                                 "limits": {"nvidia.com/gpu": "1"} if i < 4 else {},
                                 "requests": {"cpu": "1"}}}]}})
    client = k8s.backend().client
    before = srv.store.rv
    full = take_snapshot(client, "default")
    after = srv.store.rv
    monkeypatch.setattr(kclient, "PAGE_SIZE", 2)
    srv.clear_requests()
    lean = take_snapshot(client, "default", cached=True, gpu_nodes_only=True)
    lists = [r for r in srv.request_log if r.path in ("/api/v1/nodes", "/api/v1/pods")]
    # The watch cache answers in one, unpaged (a limit would send it to etcd), no older
    # than what this client read before (the full snapshot's resourceVersion).
    assert [(r.query.get("resourceVersionMatch"), r.query.get("limit")) for r in lists] == [
        ("NotOlderThan", None)] * 2
    assert all(before <= int(r.query["resourceVersion"]) <= after for r in lists)
    assert lists[1].query["fieldSelector"] == LIVE_PODS
    req = PlacementRequest(workers=2, gpus_per_worker=4)
    assert place(full.cluster, req).assignments == place(lean.cluster, req).assignments
    assert [n for n in full.cluster.nodes if n.gpus] == [n for n in lean.cluster.nodes if n.gpus]
