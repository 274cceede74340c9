"""NVLink partitions across nodes (GB200/GB300 NVL72): topology, placement, prediction and
ComputeDomains.

The placement oracle enumerates partitions and node subsets with itertools, independently of
mpijob.scheduling.placement_nvlink."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from launcher.errors import UsageError
from launcher.formats.clusterfile import cluster_from_data, load_cluster
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.computedomain import CHANNEL_DEVICE_CLASS, channel_template_name, domain_name
from mpijob.k8s.render import SSHKeys, with_owner
from mpijob.perf.perfmodel import predict
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.dra_slices import slice_cliques
from mpijob.scheduling.network import NetworkPosition
from mpijob.scheduling.nvlink import CLIQUE_LABEL, parse_clique
from mpijob.scheduling.placement import PlacementRequest, place
from mpijob.scheduling.placement_nvlink import split_in_two
from mpijob.scheduling.presets import PRESETS, preset_for
from tests.paths import DATA
from tests.placement_check import place_checked

NVL72 = str(DATA / "clusters" / "nvl72-two-partitions.yaml")
CD_SCHEMA = json.loads((DATA / "k8s-schemas" / "computedomain-resource-nvidia-v1beta1.json").read_text())
TRAY = PRESETS["gb200-nvl72-tray"]
SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
              "ssh-ed25519 AAAA x")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UUID = "3f9d2c1e-7b4a-4e8f-9c6d-2a1b0e5f4d3c"


def tray(name, domain=None, allocated=(), rack=None):
    return Node(name=name, gpus=4, topology=TRAY, allocated=frozenset(allocated),
                gpu_model="NVIDIA-GB200", network_gbps=400.0, nvlink_domain=domain,
                network=NetworkPosition(rack=rack, block="b1" if rack else None))


# --- topology --------------------------------------------------------------------------------
def test_clique_values_are_checked():
    assert parse_clique(f"{UUID}.0") == f"{UUID}.0"
    for bad in ("", "nodot", ".3", f"{UUID}.", "a b.1"):
        with pytest.raises(ValueError, match="nvidia.com/gpu.clique"):
            parse_clique(bad)


def test_cluster_file_reads_the_partition_from_the_key_or_the_gfd_label():
    cluster = cluster_from_data({"computeDomains": True, "nodes": [
        {"name": "a", "topology": "gb200-nvl72-tray", "nvlinkDomain": f"{UUID}.1"},
        {"name": "b", "topology": "gb200-nvl72-tray", "labels": {CLIQUE_LABEL: f"{UUID}.2"}},
        {"name": "c", "topology": "dgx-h100"}]})
    assert [n.nvlink_domain for n in cluster.nodes] == [f"{UUID}.1", f"{UUID}.2", None]
    assert cluster.compute_domains


@pytest.mark.parametrize(("node", "key"), [({"nvlinkDomain": "x"}, "nvlinkDomain"),
                                           ({"labels": {CLIQUE_LABEL: "x"}}, CLIQUE_LABEL)])
def test_a_broken_partition_is_one_line_naming_node_and_key(node, key):
    with pytest.raises(UsageError) as err:
        cluster_from_data({"nodes": [{"name": "t1", "gpus": 4, **node}]}, source="c.yaml")
    text = str(err.value)
    assert "\n" not in text and "(t1)" in text and key in text and "<cluster UUID>" in text


def test_presets_of_the_nvlink_5_systems():
    assert preset_for("NVIDIA-GB200", 4).name == "gb200-nvl72-tray"
    assert preset_for("NVIDIA-GB300", 4).name == "gb300-nvl72-tray"
    assert preset_for("NVIDIA-B200", 8).name == "hgx-b200"
    assert preset_for("NVIDIA-H200", 8).name == "hgx-h200"
    # NV18 of NVLink 5: 18 x 50 GB/s each way (1.8 TB/s both ways together).
    assert TRAY.bandwidth(0, 1, gpu_model="NVIDIA-GB200") == 900.0


def test_cliques_from_resource_slices():
    slices = [
        {"spec": {"driver": "compute-domain.nvidia.com", "nodeName": "t1",
                  "devices": [{"name": "channel-0", "attributes": {"type": {"string": "channel"},
                                                                   "id": {"int": 0}}}]}},
        {"spec": {"driver": "example.com", "nodeName": "t2",
                  "devices": [{"name": "d", "attributes": {"cliqueID": {"string": f"{UUID}.4"}}}]}},
    ]
    assert slice_cliques(slices, "cliqueID") == {"t2": f"{UUID}.4"}


# --- placement: the oracle -------------------------------------------------------------------
def fewest_nodes(caps, need):
    for m in range(1, len(caps) + 1):
        if any(sum(s) >= need for s in combinations(caps, m)):
            return m
    return None


def oracle(cluster, workers, g):
    """(partitions, nodes) a placement must use, by enumeration: one partition when one holds
    the job (its fewest nodes, the fewest over such partitions); else the fewest partitions,
    and the fewest nodes over every set of that many."""
    caps = {n.name: (n.gpus - len(n.allocated)) // g for n in cluster.nodes}
    parts: dict = {}
    for n in cluster.nodes:
        if caps[n.name] > 0:
            parts.setdefault(n.nvlink_domain or n.name, []).append(caps[n.name])
    single = [fewest_nodes(c, workers) for c in parts.values() if sum(c) >= workers]
    if single:
        return 1, min(single)
    for k in range(2, len(parts) + 1):
        sets = [s for s in combinations(parts.values(), k) if sum(map(sum, s)) >= workers]
        if sets:
            return k, min(fewest_nodes([c for p in s for c in p], workers) for s in sets)
    return None


@st.composite
def nvl_clusters(draw):
    nodes = []
    for i in range(draw(st.integers(2, 9))):
        domain = draw(st.sampled_from([f"{UUID}.0", f"{UUID}.1", f"{UUID}.2", None]))
        nodes.append(tray(f"t{i}", domain, draw(st.sets(st.integers(0, 3), max_size=4))))
    return Cluster(tuple(nodes), compute_domains=draw(st.booleans()))


@SETTINGS
@given(nvl_clusters(), st.integers(1, 20), st.sampled_from([1, 2]))
def test_one_partition_when_one_holds_it_else_the_fewest(cluster, workers, g):
    expected = oracle(cluster, workers, g)
    result = place_checked(cluster, workers, g, feasible=expected is not None)
    if result is None:
        return
    used = {cluster.node(a.node).nvlink_domain or a.node for a in result.assignments}
    assert (len(used), result.nodes_used) == expected
    shared = {cluster.node(a.node).nvlink_domain for a in result.assignments}
    one = len(shared) == 1 and None not in shared
    assert result.nvlink_domain == (shared.pop() if one else None)
    assert result.compute_domain == (one and result.nodes_used > 1 and cluster.compute_domains)


def test_a_small_job_is_never_split_even_when_the_split_uses_fewer_nodes():
    # Partition 0: one whole tray and six with one GPU free; partition 1: the same. Seven
    # workers fit 2 whole trays across the partitions, but inside one partition only on 4.
    nodes = []
    for p in (0, 1):
        nodes.append(tray(f"p{p}-whole", f"{UUID}.{p}"))
        nodes += [tray(f"p{p}-t{i}", f"{UUID}.{p}", {0, 1, 2}) for i in range(6)]
    result = place(Cluster(tuple(nodes)), PlacementRequest(workers=7, gpus_per_worker=1))
    assert {a.node.split("-")[0] for a in result.assignments} == {"p0"}
    assert result.nodes_used == 4
    assert any("fits in one partition" in line for line in result.explanation)


def test_no_partitions_changes_nothing():
    nodes = tuple(tray(f"t{i}", None, {0} if i % 2 else ()) for i in range(6))
    with_domains = tuple(replace(n, nvlink_domain=None) for n in nodes)
    a = place(Cluster(nodes), PlacementRequest(workers=10, gpus_per_worker=1))
    b = place(Cluster(with_domains), PlacementRequest(workers=10, gpus_per_worker=1))
    assert a == b and a.nvlink_domain is None and not a.compute_domain


# --- prediction ------------------------------------------------------------------------------
def predicted(cluster, placement, model="vgg16"):
    return predict(model=model, batch_size=64, precision="fp32", placement=placement, cluster=cluster)


def test_the_done_when_plan_puts_16_gpus_in_the_partition_of_fewest_nodes_at_nvlink_speed():
    result = CliRunner().invoke(app, ["plan", "--workers", "16", "--gpus", "1", "--cluster", NVL72,
                                      "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    nodes = [p["node"] for p in data["placement"]]
    # Rack A holds 16 GPUs only on 6 trays (2 whole, 4 with 2 free); rack B on 4 whole.
    assert data["nodes_used"] == 4 and all(n.startswith("nvl72-b-") for n in nodes)
    assert data["nvlink_domain"].endswith(".1") and data["compute_domain"] is True
    assert data["prediction"]["bottleneck"].startswith("NVLink across nodes")


def test_nvlink_between_nodes_only_with_the_compute_domain_channel():
    cluster = load_cluster(NVL72)
    placement = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    with_channel = predicted(cluster, placement)
    without = replace(cluster, compute_domains=False)
    plain = place(without, PlacementRequest(workers=16, gpus_per_worker=1))
    assert plain.assignments == placement.assignments and not plain.compute_domain
    over_network = predicted(without, plain)
    assert "NVLink across nodes" in with_channel.bottleneck
    assert "network" in over_network.bottleneck or "inter-rack" in over_network.bottleneck
    assert any("no ComputeDomain IMEX channel" in n for n in over_network.notes)
    assert with_channel.allreduce_seconds * 2 < over_network.allreduce_seconds


def test_compare_shows_one_partition_against_two():
    cluster = load_cluster(NVL72)
    one = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    two = split_in_two(cluster, one)
    assert {cluster.node(a.node).nvlink_domain for a in two.assignments} == {
        f"{UUID}.0", f"{UUID}.1"}
    assert not two.compute_domain
    assert predicted(cluster, two).allreduce_seconds > 2 * predicted(cluster, one).allreduce_seconds
    result = CliRunner().invoke(app, ["plan", "--workers", "16", "--gpus", "1", "--cluster", NVL72,
                                      "--model", "vgg16", "--compare"])
    assert result.exit_code == 0, result.output
    assert "topology, 2 NVLink partitions" in result.output


# --- ComputeDomains --------------------------------------------------------------------------
def rendered(mode, compute_domains=True):
    cluster = replace(load_cluster(NVL72), compute_domains=compute_domains)
    placement = place(cluster, PlacementRequest(workers=16, gpus_per_worker=1))
    spec = build_spec(name="nvl", workers=16, gpus_per_worker=1)
    return with_owner(render(spec, mode=mode, placement=placement, ssh=SSH,
                             benchmark_source="print(1)"), "uid-1")


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_the_job_owns_a_compute_domain_sized_to_its_nodes_and_its_workers_claim_the_channel(mode):
    objects = rendered(mode)
    root = objects[0]
    domains = [o for o in objects if o["kind"] == "ComputeDomain"]
    assert len(domains) == 1
    cd = domains[0]
    jsonschema.validate(cd, CD_SCHEMA)
    assert cd["metadata"]["name"] == domain_name("nvl")
    assert cd["spec"] == {"numNodes": 4, "channel": {"resourceClaimTemplate": {
        "name": channel_template_name("nvl")}}}
    assert cd["metadata"]["ownerReferences"][0]["name"] == root["metadata"]["name"]
    if mode == "pods":
        workers = [o["spec"] for o in objects if o["kind"] == "Pod"]
        assert len(workers) == 4
    else:
        workers = [root["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]]
        launcher = root["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        assert "resourceClaims" not in launcher
    for pod in workers:
        assert {"name": "imex-channel", "resourceClaimTemplateName": "nvl-imex-channel"} in \
            pod["resourceClaims"]
        assert {"name": "imex-channel"} in pod["containers"][0]["resources"]["claims"]
        term = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == CLIQUE_LABEL
        assert term["labelSelector"]["matchLabels"]["hvdk8s.io/role"] == "worker"


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_no_compute_domain_without_the_driver(mode):
    objects = rendered(mode, compute_domains=False)
    assert not [o for o in objects if o["kind"] == "ComputeDomain"]
    assert "imex-channel" not in json.dumps(objects)


def test_dry_run_prints_the_compute_domain_and_the_claims():
    result = CliRunner().invoke(app, ["submit", "mpi", "--name", "nvl", "--workers", "16",
                                      "--gpus", "1", "--cluster", NVL72, "--image", "img",
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    kinds = [d["kind"] for d in docs]
    assert kinds[0] == "Job" and kinds[1] == "ComputeDomain"
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert len(pods) == 4 and all(
        any(c.get("resourceClaimTemplateName") == "nvl-imex-channel" for c in p["spec"]["resourceClaims"])
        for p in pods)
    assert "ComputeDomain gives them its IMEX channel" in result.stderr


def test_the_driver_template_this_names_is_the_channel_class():
    # The name the pods claim is the one the driver's controller creates from the domain.
    assert CHANNEL_DEVICE_CLASS == "compute-domain-default-channel.nvidia.com"


# --- the live snapshot and `top node` ----------------------------------------------------------
def test_snapshot_reads_the_clique_label_and_says_when_one_is_broken():
    from launcher.backends.kubernetes.snapshot import build_snapshot

    def k8s_node(name, clique):
        return {"metadata": {"name": name, "labels": {CLIQUE_LABEL: clique,
                                                      "nvidia.com/gpu.product": "NVIDIA-GB200"}},
                "status": {"allocatable": {"nvidia.com/gpu": "4"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}

    snap = build_snapshot([k8s_node("t1", f"{UUID}.0"), k8s_node("t2", "broken")], [],
                          compute_domains=True)
    assert [n.nvlink_domain for n in snap.cluster.nodes] == [f"{UUID}.0", None]
    assert snap.cluster.compute_domains
    assert any(line.startswith("node t2:") and "<cluster UUID>" in line for line in snap.notes)


def test_top_node_shows_the_partitions():
    result = CliRunner().invoke(app, ["top", "node", "--cluster", NVL72, "-o", "json"])
    assert result.exit_code == 0, result.output
    parts = json.loads(result.stdout)["nvlink_partitions"]
    assert [(p["nodes"], p["free_gpus"], p["idle_nodes"]) for p in parts] == [(18, 24, 2), (18, 24, 6)]
