"""Topology: validation, bandwidths, JSON round trips and the agent's node annotation."""

from __future__ import annotations

import json

import pytest

from mpijob.scheduling.links import bandwidth_gbs
from mpijob.scheduling.presets import PRESETS
from mpijob.scheduling.topology import (
    ANNOTATION_TOPOLOGY,
    TOPOLOGY_FORMAT_VERSION,
    Topology,
    annotation_payload,
    format_matrix,
    parse_annotation,
    parse_topo_matrix,
)
from tests.paths import DATA


def test_from_links_normalizes_codes():
    topo = Topology.from_links([["x", "soc"], ["SYS", "X"]])
    assert topo.links == (("X", "SYS"), ("SYS", "X"))
    assert topo.gpus == 2


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([], "empty"),
        ([["X", "NV1"]], "row 0 has 2 entries"),
        ([["X", "NV1"], ["NV2", "X"]], "not symmetric"),
        ([["PIX", "NV1"], ["NV1", "X"]], "diagonal"),
        ([["X", "NVX"], ["NVX", "X"]], "unknown link code"),
        ([["X", "X"], ["X", "X"]], "off the diagonal"),
        ("X NV1", "not a string"),
    ],
)
def test_from_links_rejects_bad_matrices_with_a_clear_message(rows, words):
    with pytest.raises(ValueError, match=words):
        Topology.from_links(rows)


def test_bandwidth_follows_the_link_table():
    topo = PRESETS["dgx1-v100"]
    assert topo.bandwidth(0, 3) == bandwidth_gbs("NV2")
    assert topo.bandwidth(0, 3) == 2 * topo.bandwidth(0, 1)
    assert topo.bandwidth(0, 5, pcie_gen=4) == bandwidth_gbs("SYS", pcie_gen=4)
    assert topo.bandwidth(0, 1, gpu_model="Tesla-P100-SXM2-16GB") < topo.bandwidth(0, 1)


def test_json_round_trip_keeps_everything():
    topo = parse_topo_matrix((DATA / "topo/hgx-h100-8nic.txt").read_text())
    data = json.loads(json.dumps(topo.to_json()))
    assert data["gpus"] == 8 and data["links"][0][1] == "NV18"
    assert Topology.from_json(data) == topo


def test_from_json_checks_lengths():
    data = PRESETS["dgx-a100"].to_json()
    data["numa"] = [0, 1]
    with pytest.raises(ValueError, match="numa has 2 entries for 8 GPUs"):
        Topology.from_json(data)
    with pytest.raises(ValueError, match="'gpus' is 4"):
        Topology.from_json({**PRESETS["dgx-a100"].to_json(), "gpus": 4})


def test_subset_takes_the_first_gpus():
    quad = PRESETS["dgx1-v100"].subset(4)
    assert quad.gpus == 4
    assert quad.links == tuple(row[:4] for row in PRESETS["dgx1-v100"].links[:4])


def test_format_matrix_reads_back_as_the_same_links():
    topo = PRESETS["pcie-8gpu-dual-socket"]
    assert parse_topo_matrix(format_matrix(topo)).links == topo.links


def test_annotation_round_trip():
    topo = PRESETS["dgx1-v100"]
    text = annotation_payload(
        node="dgx-1", topology=topo, gpu_model="Tesla-V100-SXM2-16GB",
        uuids=[f"GPU-{i}" for i in range(8)], pcie_gen=3,
        allocated={"team-a/job-worker-0": [3, 1], "team-b/other-worker-0": [6]},
        updated="2024-05-01T12:00:00Z",
    )
    data = json.loads(text)
    assert data["version"] == TOPOLOGY_FORMAT_VERSION
    assert data["allocated"]["team-a/job-worker-0"] == [1, 3]
    back, taken, meta = parse_annotation(text)
    assert back.links == topo.links
    assert back.numa == topo.numa
    assert taken == frozenset({1, 3, 6})
    assert meta["node"] == "dgx-1" and meta["pcie_gen"] == 3 and meta["uuids"][7] == "GPU-7"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ("[]", "JSON object"),
        ('{"version": 2, "links": [["X"]]}', "version 2"),
        ('{"version": 1, "links": [["X", "NV1"]]}', "row 0"),
        ('{"version": 1, "links": [["X"]], "allocated": {"ns/p": [3]}}', "invalid GPU index 3"),
    ],
)
def test_parse_annotation_rejects_bad_values(text, words):
    with pytest.raises(ValueError, match=words) as info:
        parse_annotation(text)
    assert ANNOTATION_TOPOLOGY in str(info.value)


def test_annotation_payload_rejects_gpus_the_node_lacks():
    with pytest.raises(ValueError, match="holds GPU 9"):
        annotation_payload(node="n", topology=PRESETS["dgx-a100"], gpu_model="A100", allocated={"a/b": [9]})
