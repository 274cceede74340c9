"""Properties of placement on random clusters, checked against brute force.

The oracles here are written independently of mpijob.scheduling.placement_sets: they enumerate every
subset with itertools and price links with mpijob.scheduling.links.bandwidth_gbs."""

from __future__ import annotations

import random
from itertools import combinations, product

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpijob.jobspec.toleration import Toleration
from mpijob.scheduling.cluster import Cluster, Node, Taint
from mpijob.scheduling.links import bandwidth_gbs
from mpijob.scheduling.placement import POLICIES, PlacementRequest, place, tolerates
from mpijob.scheduling.presets import PRESETS

SMALL_PRESETS = ("dgx1-v100", "dgx-a100", "pcie-8gpu-dual-socket", "pcie-4gpu-nvlink-pairs", "pcie-2")
TAINTS = (Taint("nvidia.com/gpu", "present", "NoSchedule"), Taint("spot", None, "PreferNoSchedule"),
          Taint("maint", "yes", "NoExecute"))
TOLERATIONS = (Toleration(key="nvidia.com/gpu", operator="Exists"), Toleration(operator="Exists"),
               Toleration(key="maint", operator="Equal", value="yes", effect="NoExecute"))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def topo_of(name):
    from mpijob.scheduling.presets import preset

    return preset(name)


# --- oracles ---------------------------------------------------------------------------------
def quality(topo, gpus, gpu_model=None, pcie_gen=3):
    """(weakest, total) in MB/s, as integers so that equal sets compare equal."""
    pairs = [round(bandwidth_gbs(topo.link(a, b), pcie_gen=pcie_gen, gpu_model=gpu_model) * 1000)
             for a, b in combinations(gpus, 2)]
    return (min(pairs), sum(pairs)) if pairs else (float("inf"), 0)


def best_quality(topo, free, size, gpu_model=None):
    return max(quality(topo, c, gpu_model) for c in combinations(sorted(free), size))


def eligible(node, req):
    if not node.ready or any(node.labels.get(k) != v for k, v in req.node_selector.items()):
        return 0
    for t in node.taints:
        if t.effect != "PreferNoSchedule" and not any(tolerates(x, t) for x in req.tolerations):
            return 0
    free = node.gpus - len(node.allocated)
    cap = free // req.gpus_per_worker if req.gpus_per_worker else 10**9
    if req.cpu_per_worker and node.free_cpu is not None:
        cap = min(cap, int(node.free_cpu // req.cpu_per_worker))
    return max(cap, 0)


def min_nodes_brute(caps, need):
    caps = [c for c in caps if c > 0]
    for m in range(1, len(caps) + 1):
        if any(sum(c) >= need for c in combinations(caps, m)):
            return m
    return None


# --- strategies ---------------------------------------------------------------------------
@st.composite
def clusters(draw, max_nodes=5):
    count = draw(st.integers(1, max_nodes))
    nodes = []
    for i in range(count):
        topo = topo_of(draw(st.sampled_from(SMALL_PRESETS)))
        allocated = draw(st.sets(st.integers(0, topo.gpus - 1), max_size=topo.gpus))
        nodes.append(Node(
            name=f"node-{i}",
            gpus=topo.gpus,
            topology=topo,
            allocated=frozenset(allocated),
            gpu_model=draw(st.sampled_from(["Tesla-V100-SXM2-16GB", "Tesla-P100-SXM2-16GB"])),
            labels={"zone": draw(st.sampled_from(["a", "b"]))},
            taints=tuple(draw(st.sets(st.sampled_from(TAINTS), max_size=2))),
            free_cpu=draw(st.one_of(st.none(), st.sampled_from([2.0, 8.0, 64.0]))),
            ready=draw(st.booleans()) or draw(st.booleans()),
        ))
    order = draw(st.permutations(nodes))
    return Cluster(tuple(order))


@st.composite
def requests(draw):
    return PlacementRequest(
        workers=draw(st.integers(1, 6)),
        gpus_per_worker=draw(st.sampled_from([0, 1, 1, 2, 4])),
        node_selector=draw(st.sampled_from([{}, {}, {"zone": "a"}])),
        tolerations=tuple(draw(st.sets(st.sampled_from(TOLERATIONS), max_size=2))),
        cpu_per_worker=draw(st.sampled_from([None, None, 1.0, 4.0])),
    )


# --- invariants -------------------------------------------------------------------------------
@SETTINGS
@given(clusters(), requests(), st.sampled_from(POLICIES))
def test_placements_are_valid_all_or_nothing_and_complete(cluster, req, policy):
    result = place(cluster, req, policy)
    by_name = {n.name: n for n in cluster.nodes}
    caps = {n.name: eligible(n, req) for n in cluster.nodes}
    assert result.feasible == (sum(caps.values()) >= req.workers)
    if not result.feasible:
        assert result.assignments == () and result.reason
        return
    assert result.reason is None
    assert sum(a.workers for a in result.assignments) == req.workers
    used: dict[str, set[int]] = {}
    workers_on: dict[str, int] = {}
    for a in result.assignments:
        node = by_name[a.node]
        assert caps[a.node] > 0  # ready, selector, taints
        assert len(a.gpus) == a.workers * req.gpus_per_worker
        assert not set(a.gpus) & node.allocated
        assert all(0 <= g < node.gpus for g in a.gpus)
        assert not set(a.gpus) & used.setdefault(a.node, set()), "GPU given twice"
        used[a.node] |= set(a.gpus)
        workers_on[a.node] = workers_on.get(a.node, 0) + a.workers
    for name, k in workers_on.items():
        assert k <= caps[name]  # GPUs and cpu room
    if policy == "spread":
        assert all(a.workers == 1 for a in result.assignments)
    else:
        assert len(workers_on) == len(result.assignments)  # one pod per node
        assert result.nodes_used == min_nodes_brute(list(caps.values()), req.workers)


@SETTINGS
@given(clusters(), requests(), st.sampled_from(POLICIES), st.randoms())
def test_same_input_same_output_whatever_the_node_order(cluster, req, policy, rnd):
    first = place(cluster, req, policy)
    assert place(cluster, req, policy) == first
    shuffled = list(cluster.nodes)
    rnd.shuffle(shuffled)
    assert place(Cluster(tuple(shuffled)), req, policy) == first


# --- exactness of the chosen GPU sets -------------------------------------------------------
def single_node_choice(topo, allocated, size, gpu_model="Tesla-V100-SXM2-16GB"):
    node = Node("n", topo.gpus, topo, allocated=frozenset(allocated), gpu_model=gpu_model)
    result = place(Cluster((node,)), PlacementRequest(size, 1))
    assert result.feasible
    (a,) = result.assignments
    return a.gpus


@pytest.mark.parametrize("name", ["dgx1-v100", "pcie-8gpu-dual-socket", "pcie-4gpu-nvlink-pairs", "dgx-a100"])
def test_every_allocation_state_of_a_preset_gets_an_optimal_set(name):
    """All 2^n allocation states and all sizes, against every subset."""
    topo = PRESETS[name]
    n = topo.gpus
    for taken_mask in range(1 << n):
        allocated = {i for i in range(n) if taken_mask >> i & 1}
        free = [i for i in range(n) if i not in allocated]
        for size in range(1, len(free) + 1):
            chosen = single_node_choice(topo, allocated, size)
            assert set(chosen) <= set(free) and len(chosen) == size
            assert quality(topo, chosen, "Tesla-V100-SXM2-16GB") == best_quality(topo, free, size, "Tesla-V100-SXM2-16GB")


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 15), max_size=16), st.data())
def test_dgx2_sets_are_optimal(allocated, data):
    topo = PRESETS["dgx2"]
    free = [i for i in range(16) if i not in allocated]
    if not free:
        return
    size = data.draw(st.integers(1, len(free)))
    chosen = single_node_choice(topo, allocated, size)
    assert set(chosen) <= set(free) and len(chosen) == size
    # Every pair is NV6, so every set is optimal; the choice is the lowest free indices.
    assert list(chosen) == free[:size]


def test_random_topologies_get_optimal_sets():
    """Random (valid) link matrices of up to 9 GPUs, random allocations, every size."""
    rng = random.Random(20240501)
    codes = ["NV1", "NV2", "NV4", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS"]
    from mpijob.scheduling.topology import Topology

    for _ in range(60):
        n = rng.randint(2, 9)
        rows = [["X"] * n for _ in range(n)]
        for i, j in combinations(range(n), 2):
            rows[i][j] = rows[j][i] = rng.choice(codes)
        topo = Topology.from_links(rows)
        allocated = {i for i in range(n) if rng.random() < 0.3}
        free = [i for i in range(n) if i not in allocated]
        for size in range(1, len(free) + 1):
            chosen = single_node_choice(topo, allocated, size)
            assert quality(topo, chosen, "Tesla-V100-SXM2-16GB") == best_quality(topo, free, size, "Tesla-V100-SXM2-16GB")


def test_ties_leave_the_best_set_of_the_same_size_free():
    """Among optimal sets, the one chosen leaves a remaining set at least as good as any
    other optimal choice would (checked on every DGX-1 state and size)."""
    topo = PRESETS["dgx1-v100"]
    for taken_mask in range(0, 256, 3):
        allocated = {i for i in range(8) if taken_mask >> i & 1}
        free = [i for i in range(8) if i not in allocated]
        for size in range(1, len(free) // 2 + 1):
            chosen = single_node_choice(topo, allocated, size)
            top = best_quality(topo, free, size)
            rest_best = []
            for c in combinations(free, size):
                if quality(topo, c) == top:
                    rest = [g for g in free if g not in c]
                    rest_best.append(best_quality(topo, rest, size) if len(rest) >= size else (-1, -1))
            rest = [g for g in free if g not in chosen]
            assert best_quality(topo, rest, size) == max(rest_best)


# --- multi-node: the bottleneck over the nodes used is the best any m-node placement has --
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(("dgx1-v100", "pcie-8gpu-dual-socket")),
                          st.sets(st.integers(0, 7), max_size=7)), min_size=2, max_size=3),
       st.integers(2, 10), st.sampled_from([1, 2]))
def test_multi_node_bottleneck_is_optimal(specs, workers, g):
    nodes = tuple(Node(f"n{i}", 8, PRESETS[name], allocated=frozenset(alloc), gpu_model="Tesla-V100-SXM2-16GB")
                  for i, (name, alloc) in enumerate(specs))
    req = PlacementRequest(workers, g)
    result = place(Cluster(nodes), req)
    caps = [(8 - len(n.allocated)) // g for n in nodes]
    m = min_nodes_brute(caps, workers)
    assert result.feasible == (m is not None)
    if m is None:
        return
    got = min(quality(n.topology, a.gpus)[0] for a in result.assignments
              for n in nodes if n.name == a.node)

    def best_weakest(node, k):
        free = [i for i in range(8) if i not in node.allocated]
        return best_quality(node.topology, free, k * g)[0]

    best = -1
    for ks in product(*(range(c + 1) for c in caps)):
        if sum(ks) != workers or sum(1 for k in ks if k) != m:
            continue
        weakest = min(best_weakest(n, k) for n, k in zip(nodes, ks, strict=True) if k)
        best = max(best, weakest)
    assert result.nodes_used == m
    assert got == best
