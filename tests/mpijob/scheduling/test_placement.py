"""Placement scenarios: the DGX-1 quad, idle nodes kept whole, selectors, taints, reasons,
spread, binpack, CPU jobs and cpu/memory room."""

from __future__ import annotations

import pytest

from mpijob.errors import SpecError
from mpijob.jobspec.spec import build_spec
from mpijob.jobspec.toleration import parse_toleration
from mpijob.scheduling.cluster import Cluster, Node, Taint
from mpijob.scheduling.links import is_nvlink
from mpijob.scheduling.placement import Placement, PlacementRequest, place
from mpijob.scheduling.presets import PRESETS

DGX1 = PRESETS["dgx1-v100"]
QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})


def dgx1(name, allocated=(), **kw):
    return Node(name, 8, DGX1, allocated=frozenset(allocated), gpu_model="Tesla-V100-SXM2-16GB", **kw)


def all_nvlink(topo, gpus):
    return all(is_nvlink(topo.link(a, b)) for a in gpus for b in gpus if a != b)


def test_four_gpus_on_two_idle_dgx1_get_one_fully_nvlinked_quad():
    result = place(Cluster((dgx1("a"), dgx1("b"))), PlacementRequest(4, 1))
    assert result.feasible and result.nodes_used == 1
    (a,) = result.assignments
    assert set(a.gpus) in QUADS and a.workers == 4


def test_spread_puts_one_pod_per_worker_over_both_nodes():
    result = place(Cluster((dgx1("a"), dgx1("b"))), PlacementRequest(4, 1), "spread")
    assert len(result.assignments) == 4 and result.nodes_used == 2
    assert all(a.workers == 1 and len(a.gpus) == 1 for a in result.assignments)


def test_a_quad_is_taken_over_a_scattered_set_with_a_sys_link():
    # Node a has 5 free GPUs but no NVLink quad among them; b has its quad 4-7 free.
    a = dgx1("a", allocated=(0, 1, 2))  # free 3,4,5,6,7 -> quad 4-7 is free too
    b = dgx1("b", allocated=(0, 4, 6))  # free 1,2,3,5,7: every 4-subset has a SYS link
    result = place(Cluster((b, a)), PlacementRequest(4, 1))
    (assign,) = result.assignments
    assert assign.node == "a" and set(assign.gpus) == {4, 5, 6, 7}
    assert all_nvlink(DGX1, assign.gpus)


def test_a_used_node_with_a_free_quad_is_chosen_over_an_idle_node():
    used = dgx1("z-used", allocated=(0, 1, 2, 3))
    result = place(Cluster((dgx1("a-idle"), used)), PlacementRequest(4, 1))
    (assign,) = result.assignments
    assert assign.node == "z-used" and set(assign.gpus) == {4, 5, 6, 7}
    assert any("idle node" in line for line in result.explanation)


def test_an_idle_node_is_used_when_no_used_node_has_as_good_a_set():
    scattered = dgx1("a-used", allocated=(0, 5, 2, 7))  # free 1,3,4,6: best pairs only
    result = place(Cluster((scattered, dgx1("b-idle"))), PlacementRequest(4, 1))
    (assign,) = result.assignments
    assert assign.node == "b-idle" and set(assign.gpus) in QUADS


def test_multi_node_uses_the_fewest_nodes():
    nodes = tuple(dgx1(f"n{i}", allocated=range(i % 3)) for i in range(6))  # 8, 7, 6, 8, 7, 6 free
    result = place(Cluster(nodes), PlacementRequest(20, 1))
    assert result.feasible and result.nodes_used == 3  # 8 + 8 + 7 >= 20 > 8 + 8
    assert sum(a.workers for a in result.assignments) == 20


def test_indivisible_workers_need_whole_blocks():
    # 3 free GPUs on each node: a 2-GPU worker fits once per node.
    nodes = (dgx1("a", allocated=range(5)), dgx1("b", allocated=range(5)))
    assert place(Cluster(nodes), PlacementRequest(2, 2)).nodes_used == 2
    result = place(Cluster(nodes), PlacementRequest(3, 2))
    assert not result.feasible and result.assignments == ()
    assert "needs 6 GPUs (3 workers x 2 GPUs)" in result.reason
    assert "hold 2 workers" in result.reason and "largest free block is 3 GPUs" in result.reason


def test_selector_and_taint_reasons_name_counts():
    taint = Taint("nvidia.com/gpu", "present", "NoSchedule")
    nodes = (
        dgx1("gpu-node-1", allocated=range(5), labels={"pool": "train"}),
        dgx1("gpu-node-2", allocated=range(6), labels={"pool": "train"}),
        dgx1("gpu-node-3", labels={"pool": "train"}, taints=(taint,)),
        dgx1("gpu-node-4", labels={"pool": "infer"}),
    )
    req = PlacementRequest(6, 1, node_selector={"pool": "train"})
    result = place(Cluster(nodes), req)
    assert not result.feasible
    assert "needs 6 GPUs" in result.reason
    assert "3 of 4 nodes match the selector pool=train" in result.reason
    assert "1 node excluded by taint nvidia.com/gpu=present:NoSchedule" in result.reason
    assert "largest free block is 3 GPUs on gpu-node-1" in result.reason
    tolerated = PlacementRequest(6, 1, node_selector={"pool": "train"},
                                 tolerations=(parse_toleration("nvidia.com/gpu:NoSchedule"),))
    fits = place(Cluster(nodes), tolerated)
    assert fits.feasible and {a.node for a in fits.assignments} == {"gpu-node-3"}


def test_prefer_no_schedule_only_lowers_preference():
    soft = Taint("spot", None, "PreferNoSchedule")
    nodes = (dgx1("a", taints=(soft,)), dgx1("b"))
    assert place(Cluster(nodes), PlacementRequest(2, 1)).assignments[0].node == "b"
    only = place(Cluster((dgx1("a", taints=(soft,)),)), PlacementRequest(2, 1))
    assert only.feasible


def test_not_ready_nodes_are_skipped_and_counted():
    result = place(Cluster((dgx1("a", ready=False),)), PlacementRequest(1, 1))
    assert not result.feasible and "1 node not Ready" in result.reason


def test_binpack_fills_the_fullest_node_with_lowest_indices():
    nodes = (dgx1("a"), dgx1("b", allocated=(0, 5, 6)))
    result = place(Cluster(nodes), PlacementRequest(3, 1), "binpack")
    (assign,) = result.assignments
    assert assign.node == "b" and assign.gpus == (1, 2, 3)


def test_spread_prefers_the_least_allocated_node():
    nodes = (dgx1("a", allocated=range(4)), dgx1("b", allocated=range(2)))
    result = place(Cluster(nodes), PlacementRequest(3, 1), "spread")
    assert [a.node for a in result.assignments] == ["b", "b", "a"]
    assert [a.gpus for a in result.assignments] == [(2,), (3,), (4,)]


def test_cpu_jobs_go_by_cpu_and_prefer_cpu_nodes():
    cpu_node = Node("cpu-1", 0, _no_gpus(), free_cpu=16.0)
    nodes = (dgx1("a", free_cpu=64.0), cpu_node, Node("cpu-2", 0, _no_gpus(), free_cpu=8.0))
    result = place(Cluster(nodes), PlacementRequest(4, 0, cpu_per_worker=4.0))
    assert result.feasible and result.assignments == (result.assignments[0],)
    assert result.assignments[0].node == "cpu-1" and result.assignments[0].gpus == ()
    # 6 workers x 4 cpu: the fewest nodes first, so the GPU node with 64 cores...
    six = place(Cluster(nodes), PlacementRequest(6, 0, cpu_per_worker=4.0))
    assert {a.node: a.workers for a in six.assignments} == {"a": 6}
    # ...and without it, both CPU nodes (16 + 8 cores hold exactly 6).
    six = place(Cluster(nodes[1:]), PlacementRequest(6, 0, cpu_per_worker=4.0))
    assert {a.node: a.workers for a in six.assignments} == {"cpu-1": 4, "cpu-2": 2}
    too_many = place(Cluster(nodes[1:]), PlacementRequest(7, 0, cpu_per_worker=4.0))
    assert not too_many.feasible and "needs 7 CPU workers with 4 cpu each" in too_many.reason


def _no_gpus():
    from mpijob.scheduling.topology import Topology

    return Topology(links=())


def test_memory_limits_workers_per_node():
    nodes = (dgx1("a", free_memory=64 * 2**30), dgx1("b", free_memory=64 * 2**30))
    result = place(Cluster(nodes), PlacementRequest(4, 1, memory_per_worker=32 * 2**30))
    assert sorted(a.workers for a in result.assignments) == [2, 2]


def test_infeasible_placement_is_all_or_nothing_and_serializes():
    result = place(Cluster((dgx1("a"),)), PlacementRequest(9, 1))
    assert isinstance(result, Placement) and not result.feasible
    data = result.to_json()
    assert data == {"feasible": False, "policy": "topology", "placement": [], "nodes_used": 0,
                    "reason": result.reason, "explanation": list(result.explanation)}
    assert "largest free block is 8 GPUs on a" in data["reason"]


def test_empty_cluster_reason():
    result = place(Cluster(()), PlacementRequest(1, 1))
    assert not result.feasible and "no nodes" in result.reason


@pytest.mark.parametrize(
    ("request_", "policy", "field"),
    [
        (PlacementRequest(0, 1), "topology", "workers"),
        (PlacementRequest(1, -1), "topology", "gpus_per_worker"),
        (PlacementRequest(1, 1), "roundrobin", "placement"),
        (PlacementRequest(1, 1, cpu_per_worker=0), "topology", "cpu_per_worker"),
    ],
)
def test_bad_requests_raise_spec_errors(request_, policy, field):
    with pytest.raises(SpecError) as info:
        place(Cluster((dgx1("a"),)), request_, policy)
    assert info.value.field == field


def test_gputopology_is_an_alias():
    assert place(Cluster((dgx1("a"),)), PlacementRequest(1, 1), "gputopology").policy == "topology"


def test_request_from_spec():
    spec = build_spec(name="job", workers=3, gpus_per_worker=2, cpu="500m", memory="4Gi",
                      node_selector={"pool": "a"}, tolerations=(parse_toleration("all"),))
    req = PlacementRequest.from_spec(spec)
    assert (req.workers, req.gpus_per_worker, req.cpu_per_worker, req.memory_per_worker) == (3, 2, 0.5, 4 * 2**30)
    assert dict(req.node_selector) == {"pool": "a"} and req.tolerations[0].operator == "Exists"


def test_a_node_whose_topology_disagrees_with_its_gpu_count_still_places():
    # Snapshots can carry a preset for a different GPU count (e.g. a VM with 4 of 8 GPUs).
    small = Node("vm", 4, DGX1, gpu_model="Tesla-V100-SXM2-16GB")
    result = place(Cluster((small,)), PlacementRequest(4, 1))
    assert result.feasible and set(result.assignments[0].gpus) == {0, 1, 2, 3}
    big = Node("big", 8, PRESETS["pcie-4gpu-nvlink-pairs"], gpu_model="unknown")
    result = place(Cluster((big,)), PlacementRequest(8, 1))
    assert result.feasible and result.assignments[0].gpus == tuple(range(8))


def test_counts_of_one_read_as_one():
    one_node = Cluster((dgx1("a", allocated=(1, 2, 3, 4, 5, 6)),))  # GPUs 0 and 7 free
    fits = place(one_node, PlacementRequest(2, 1))
    text = "\n".join(fits.explanation)
    assert "over 1 pair;" in text and "1 pairs" not in text
    assert "1 of 1 node eligible" in text and "of its 2 free GPUs" in text
    too_big = place(one_node, PlacementRequest(1, 2, node_selector={"pool": "x"}))
    assert "needs 2 GPUs (1 worker x 2 GPUs)" in too_big.reason
    assert "0 of 1 node match the selector" in too_big.reason
    one_gpu = place(Cluster((dgx1("a", allocated=range(7)),)), PlacementRequest(2, 1))
    assert "1 eligible node holds 1 worker (1 free GPU); largest free block is 1 GPU on a" in one_gpu.reason
    assert "needs 2 GPUs (2 workers x 1 GPU)" in one_gpu.reason
