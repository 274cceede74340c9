"""Network topology across nodes: racks, blocks and zones in placement and in the model.

The brute-force oracle enumerates every subset of nodes with itertools, independently of
mpijob.scheduling.placement_network's dynamic programme."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpijob.perf.perfmodel import predict
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.network import NetworkPosition, parse_label_keys, position_from_labels, span
from mpijob.scheduling.placement import PlacementRequest, place
from mpijob.scheduling.presets import preset
from tests.placement_check import place_checked

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DGX1 = preset("dgx1-v100")


def node(name, rack=None, block=None, zone=None, allocated=(), gpus=8, over=3.0):
    topo = DGX1 if gpus == 8 else DGX1.subset(gpus)
    return Node(name=name, gpus=gpus, topology=topo, allocated=frozenset(allocated),
                gpu_model="Tesla-V100-SXM2-16GB", network_gbps=100.0,
                network=NetworkPosition(zone=zone, block=block, rack=rack, oversubscription=over))


def racks_of(placement, cluster):
    return span([(a.node, cluster.node(a.node).network) for a in placement.assignments])


# --- the oracle -------------------------------------------------------------------------------
def brute(cluster, workers, g):
    """(fewest nodes, fewest racks among those, fewest blocks among those) by enumeration."""
    caps = {n.name: (n.gpus - len(n.allocated)) // g for n in cluster.nodes}
    names = [n for n, c in caps.items() if c > 0]
    for m in range(1, len(names) + 1):
        fits = [s for s in combinations(names, m) if sum(caps[x] for x in s) >= workers]
        fits = [s for s in fits if len({cluster.node(x).network.zone for x in s}) == 1]
        if fits:
            def key(s):
                where = span([(x, cluster.node(x).network) for x in s])
                return where["racks"], where["blocks"]
            best = min(key(s) for s in fits)
            return m, best[0], best[1]
    return None


@st.composite
def rack_clusters(draw):
    count = draw(st.integers(2, 8))
    racks = draw(st.integers(1, 4))
    nodes = []
    for i in range(count):
        r = draw(st.integers(0, racks - 1))
        allocated = draw(st.sets(st.integers(0, 7), max_size=8))
        zone = draw(st.sampled_from(["z1", "z1", "z2"])) if draw(st.booleans()) else None
        nodes.append(node(f"n{i}", rack=f"r{r}", block=f"b{r // 2}", allocated=allocated,
                          zone=zone))
    # Racks live in one zone: give every node of a rack the zone of its first node.
    zone_of = {}
    fixed = []
    for n in nodes:
        z = zone_of.setdefault(n.network.rack, n.network.zone)
        fixed.append(Node(**{**n.__dict__, "network": NetworkPosition(z, n.network.block, n.network.rack)}))
    return Cluster(tuple(fixed))


@SETTINGS
@given(rack_clusters(), st.integers(1, 24), st.sampled_from([1, 2, 4]))
def test_fewest_nodes_then_fewest_racks_then_one_block(cluster, workers, g):
    expected = brute(cluster, workers, g)
    result = place_checked(cluster, workers, g, feasible=expected is not None)
    if result is None:
        return
    where = racks_of(result, cluster)
    assert (result.nodes_used, where["racks"], where["blocks"]) == expected
    assert where["zones"] == 1


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), st.sets(st.integers(0, 7), max_size=8)),
                min_size=2, max_size=10))
def test_16_gpus_on_two_nodes_of_one_rack_whenever_such_a_pair_is_free(spec):
    """The issue's acceptance: 8-GPU nodes in several racks, a 16-GPU job."""
    cluster = Cluster(tuple(node(f"n{i}", rack=f"r{r}", block="b0", allocated=alloc)
                            for i, (r, alloc) in enumerate(spec)))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    idle = [n for n in cluster.nodes if not n.allocated]
    pair_in_rack = any(sum(1 for n in idle if n.network.rack == r) >= 2 for r in {n.network.rack for n in idle})
    if pair_in_rack:
        assert result.nodes_used == 2
        assert racks_of(result, cluster)["racks"] == 1


def test_prefers_the_rack_pair_over_the_first_nodes():
    cluster = Cluster((node("a", rack="r1"), node("b", rack="r2"), node("c", rack="r3"),
                       node("d", rack="r3")))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    assert sorted(a.node for a in result.assignments) == ["c", "d"]
    assert any("rack r3" in line for line in result.explanation)


def test_two_racks_of_one_block_beat_two_blocks():
    cluster = Cluster((node("a", rack="r1", block="b1"), node("b", rack="r2", block="b2"),
                       node("c", rack="r3", block="b2")))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    assert sorted(a.node for a in result.assignments) == ["b", "c"]
    assert any("block b2" in line for line in result.explanation)


def test_best_fit_rack_keeps_the_roomier_rack_whole():
    cluster = Cluster((node("a1", rack="r1"), node("a2", rack="r1"), node("a3", rack="r1"),
                       node("b1", rack="r2"), node("b2", rack="r2")))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    assert sorted(a.node for a in result.assignments) == ["b1", "b2"]


def test_never_split_across_zones_unless_asked():
    cluster = Cluster((node("a", rack="r1", zone="z1"), node("b", rack="r2", zone="z2")))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    assert not result.feasible
    assert "--cross-zone" in result.reason
    asked = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1, cross_zone=True))
    assert asked.feasible and asked.nodes_used == 2


def test_fewer_nodes_across_racks_beat_more_nodes_in_one_rack():
    cluster = Cluster((node("a", rack="r1"), node("b", rack="r2"),
                       node("c1", rack="r3", allocated=range(4)), node("c2", rack="r3", allocated=range(4)),
                       node("c3", rack="r3", allocated=range(4)), node("c4", rack="r3", allocated=range(4))))
    result = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    assert result.nodes_used == 2


def test_no_network_data_changes_nothing():
    plain = Cluster(tuple(node(f"n{i}") for i in range(4)))
    result = place(plain, PlacementRequest(workers=16, gpus_per_worker=1))
    assert result.nodes_used == 2
    assert not any(line.startswith("network:") for line in result.explanation)


# --- the throughput model ------------------------------------------------------------------
def test_prediction_shows_the_inter_rack_cost():
    one = Cluster((node("a", rack="r1"), node("b", rack="r1")))
    two = Cluster((node("a", rack="r1"), node("b", rack="r2")))
    kw = dict(model="vgg16", batch_size=64, precision="fp32")
    same = predict(placement=place(one, PlacementRequest(16, 1)), cluster=one, **kw)
    split = predict(placement=place(two, PlacementRequest(16, 1)), cluster=two, **kw)
    assert split.allreduce_seconds > 2 * same.allreduce_seconds
    assert "inter-rack" in split.bottleneck and "3:1 oversubscribed" in split.bottleneck
    assert any("2 racks" in n for n in split.notes)
    assert "inter-rack" not in same.bottleneck


def test_non_blocking_fabric_costs_nothing_between_racks():
    two = Cluster((node("a", rack="r1", over=1.0), node("b", rack="r2", over=1.0)))
    one = Cluster((node("a", rack="r1"), node("b", rack="r1")))
    kw = dict(model="vgg16", batch_size=64, precision="fp32")
    a = predict(placement=place(two, PlacementRequest(16, 1)), cluster=two, **kw)
    b = predict(placement=place(one, PlacementRequest(16, 1)), cluster=one, **kw)
    assert a.allreduce_seconds == pytest.approx(b.allreduce_seconds)


# --- positions from labels ----------------------------------------------------------------
def test_position_from_kueue_and_topograph_labels():
    kueue = position_from_labels({"cloud.provider.com/topology-block": "b1",
                                  "cloud.provider.com/topology-rack": "r1",
                                  "topology.kubernetes.io/zone": "z"})
    assert (kueue.zone, kueue.block, kueue.rack) == ("z", "b1", "r1")
    topograph = position_from_labels({"network.topology.nvidia.com/leaf": "s1",
                                      "network.topology.nvidia.com/spine": "s2"})
    assert (topograph.block, topograph.rack) == ("s2", "s1")
    assert not position_from_labels({}).known


def test_label_keys_are_configurable():
    keys = parse_label_keys("rack=example.com/tor, block=example.com/pod")
    pos = position_from_labels({"example.com/tor": "t7", "example.com/pod": "p1",
                                "cloud.provider.com/topology-rack": "ignored"}, keys)
    assert (pos.block, pos.rack) == ("p1", "t7")
    with pytest.raises(ValueError, match="LEVEL=LABEL_KEY"):
        parse_label_keys("switch=x")
