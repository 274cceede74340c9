"""Network positions read from cluster files, node labels, Kueue Topologies and Volcano
HyperNodes; `top node` groups; the gang schedulers' topology annotations."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.backends.kubernetes.rendering import render
from launcher.backends.kubernetes.snapshot import build_snapshot, network_label_keys
from launcher.cli.app import app
from launcher.errors import UsageError
from launcher.formats.clusterfile import cluster_from_data
from mpijob.gang.kueue import REQUIRED_TOPOLOGY as KUEUE_REQUIRED_TOPOLOGY
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render import SSHKeys
from mpijob.scheduling.hypernodes import positions
from tests.launcher.backends.kubernetes.test_k8s_snapshot import node

RACK, BLOCK = "cloud.provider.com/topology-rack", "cloud.provider.com/topology-block"
SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 AAAA x")


def racked(scheduler=None):
    net = {"scheduler": scheduler} if scheduler else {}
    return {"defaults": {"gpus": 8, "topology": "dgx1-v100", "network_gbps": 100, "network": net},
            "nodes": [{"name": "a1", "labels": {BLOCK: "b1", RACK: "r1"}},
                      {"name": "b1", "labels": {BLOCK: "b1", RACK: "r2"}},
                      {"name": "b2", "labels": {BLOCK: "b1", RACK: "r2"}}]}


# --- cluster file -------------------------------------------------------------------------------
def test_cluster_file_network_key_and_labels():
    c = cluster_from_data({"nodes": [
        {"name": "x", "gpus": 8, "network": {"block": "b", "rack": "r", "oversubscription": 2}},
        {"name": "y", "gpus": 8, "labels": {RACK: "r9"}},
        {"name": "z", "gpus": 8, "labels": {"example.com/tor": "t1"}},
    ], "network_labels": {"rack": "example.com/tor"}})
    x, y, z = (c.node(n).network for n in "xyz")
    assert (x.block, x.rack, x.oversubscription) == ("b", "r", 2.0)
    assert y.rack is None  # network_labels replaced the rack keys
    assert (z.rack, z.rack_label) == ("t1", "example.com/tor")


@pytest.mark.parametrize("network, message", [
    ({"rack": ["x"]}, "network: rack: expected a name"),
    ({"oversubscription": 0.5}, "oversubscription: expected a number of at least 1"),
    ({"switch": "s"}, "expected a mapping with zone, block, rack"),
    ({"scheduler": "slurm"}, "scheduler: expected kueue or volcano"),
])
def test_cluster_file_network_errors_name_the_node_and_key(network, message):
    with pytest.raises(UsageError, match=message) as err:
        cluster_from_data({"nodes": [{"name": "n1", "gpus": 8, "network": network}]}, source="c.yaml")
    assert "(n1)" in str(err.value)


def test_bad_network_labels_env_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("HVDK8S_NETWORK_LABELS", "tor=x")
    with pytest.raises(UsageError, match=r"\$HVDK8S_NETWORK_LABELS: 'tor=x'"):
        network_label_keys()


# --- live snapshot ------------------------------------------------------------------------------
def test_snapshot_reads_positions_from_labels_and_marks_kueue_levels():
    nodes = [node("n0", labels={RACK: "r1", BLOCK: "b1", "topology.kubernetes.io/zone": "z"}),
             node("n1")]
    topo = {"metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}
    snap = build_snapshot(nodes, [], kueue_topologies=[topo])
    n0 = snap.cluster.node("n0").network
    assert (n0.zone, n0.block, n0.rack, n0.rack_label, n0.scheduler) == ("z", "b1", "r1", RACK, "kueue")
    assert not snap.cluster.node("n1").network.known
    assert build_snapshot(nodes, []).cluster.node("n0").network.scheduler is None


def hypernode(name, tier, kind, selector):
    return {"metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": selector}]}}


def test_volcano_hypernodes_give_rack_and_block():
    hns = [hypernode("leaf-a", 1, "Node", {"regexMatch": {"pattern": "gpu-a-.*"}}),
           hypernode("leaf-b", 1, "Node", {"exactMatch": {"name": "gpu-b-0"}}),
           hypernode("leaf-c", 1, "Node", {"labelMatch": {"matchLabels": {"row": "c"}}}),
           hypernode("spine-1", 2, "HyperNode", {"regexMatch": {"pattern": "leaf-[ab]"}})]
    found = positions(hns, {"gpu-a-0": {}, "gpu-a-1": {}, "gpu-b-0": {}, "gpu-c-0": {"row": "c"},
                            "cpu-0": {}})
    assert found == {"gpu-a-0": {"rack": "leaf-a", "block": "spine-1"},
                     "gpu-a-1": {"rack": "leaf-a", "block": "spine-1"},
                     "gpu-b-0": {"rack": "leaf-b", "block": "spine-1"},
                     "gpu-c-0": {"rack": "leaf-c", "block": None}}
    snap = build_snapshot([node("gpu-a-0"), node("gpu-a-1")], [], hypernodes=hns)
    pos = snap.cluster.node("gpu-a-1").network
    assert (pos.rack, pos.block, pos.scheduler) == ("leaf-a", "spine-1", "volcano")


# --- gang scheduler annotations -----------------------------------------------------------------
def _plan(data, gang):
    from launcher.preparing.planning import plan_job

    spec = build_spec(name="j", workers=16, gpus_per_worker=1, gang=gang, queue="q")
    return spec, plan_job(spec, cluster_from_data(data))


def test_kueue_required_topology_on_worker_pods_and_mpijob_template():
    spec, plan = _plan(racked("kueue"), "kueue")
    assert {a.node for a in plan.placement.assignments} == {"b1", "b2"}
    pods = [o for o in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
            if o["kind"] == "Pod"]
    assert [p["metadata"]["annotations"][KUEUE_REQUIRED_TOPOLOGY] for p in pods] == [RACK, RACK]
    mpijob = render(spec, mode="operator", placement=plan.placement, benchmark_source="x")[0]
    worker_meta = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]
    assert worker_meta["annotations"][KUEUE_REQUIRED_TOPOLOGY] == RACK


def test_no_kueue_annotation_when_kueue_does_not_know_the_levels():
    spec, plan = _plan(racked(None), "kueue")
    pods = [o for o in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
            if o["kind"] == "Pod"]
    assert all(KUEUE_REQUIRED_TOPOLOGY not in p["metadata"].get("annotations", {}) for p in pods)


def test_volcano_podgroup_network_topology_tier():
    data = racked("volcano")
    spec, plan = _plan(data, "volcano")
    group = next(o for o in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
                 if o["kind"] == "PodGroup")
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    data["nodes"][2]["labels"][RACK] = "r3"  # now only the block holds a pair
    spec, plan = _plan(data, "volcano")
    group = next(o for o in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
                 if o["kind"] == "PodGroup")
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


# --- top node ---------------------------------------------------------------------------------
def test_top_node_groups_by_rack_and_block(tmp_path):
    data = racked()
    data["nodes"][0]["allocated"] = [0, 1, 2]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["top", "node", "--cluster", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    groups = json.loads(result.output)["network_groups"]
    by = {(g["block"], g["rack"]): g for g in groups}
    assert by[("b1", "r1")]["free_gpus"] == 5 and by[("b1", "r1")]["idle_nodes"] == 0
    assert by[("b1", "r2")]["free_gpus"] == 16 and by[("b1", "r2")]["idle_nodes"] == 2
    assert by[("b1", "*")]["free_gpus"] == 21 and by[("b1", "*")]["nodes"] == 3
    table = CliRunner().invoke(app, ["top", "node", "--cluster", str(path)])
    assert "by network position" in table.output and "(all racks)" in table.output


def test_plan_shows_the_rack_choice_and_inter_rack_cost(tmp_path):
    data = racked()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(app, ["plan", "--workers", "16", "--gpus", "1", "--cluster", str(path)]).output
    assert "under rack r2" in out and "inter-rack" not in out
    data["nodes"][2]["labels"][RACK] = "r3"
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(app, ["plan", "--workers", "16", "--gpus", "1", "--model", "vgg16",
                                   "--cluster", str(path)]).output
    assert "inter-rack" in out and "oversubscribed" in out
