"""Presets: the exact DGX-1 matrix, the shape of every preset, and choosing one from labels."""

from __future__ import annotations

from itertools import combinations

import pytest

from mpijob.scheduling.links import is_nvlink
from mpijob.scheduling.presets import PRESETS, pcie, preset, preset_for, uniform
from mpijob.scheduling.topology import MAX_GPUS_PER_NODE
from tests.topo_files import gpu_links


def off_diagonal(topo):
    return {topo.link(i, j) for i in range(topo.gpus) for j in range(topo.gpus) if i != j}


def test_dgx1_matrix_is_the_real_one():
    assert PRESETS["dgx1-v100"].links == gpu_links("dgx1-v100-mlx5.txt")


def test_dgx1_has_exactly_two_fully_nvlinked_quads():
    topo = PRESETS["dgx1-v100"]
    quads = [q for q in combinations(range(8), 4) if all(is_nvlink(topo.link(a, b)) for a, b in combinations(q, 2))]
    assert quads == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_dgx1_every_gpu_has_six_nvlinks():
    topo = PRESETS["dgx1-v100"]
    for i in range(8):
        links = sum(int(topo.link(i, j)[2:]) for j in range(8) if is_nvlink(topo.link(i, j)))
        assert links == 6


@pytest.mark.parametrize(("name", "gpus", "code"), [("dgx2", 16, "NV6"), ("dgx-a100", 8, "NV12"), ("dgx-h100", 8, "NV18")])
def test_nvswitch_presets_join_every_pair_equally(name, gpus, code):
    topo = PRESETS[name]
    assert topo.gpus == gpus
    assert off_diagonal(topo) == {code}


def test_pcie_8gpu_has_switch_pairs_sockets_and_sys_across():
    topo = PRESETS["pcie-8gpu-dual-socket"]
    assert topo.link(0, 1) == "PIX" and topo.link(6, 7) == "PIX"
    assert topo.link(0, 2) == "PHB" and topo.link(5, 7) == "PHB"
    assert all(topo.link(i, j) == "SYS" for i in range(4) for j in range(4, 8))
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)


def test_pcie_4gpu_nvlink_pairs():
    topo = PRESETS["pcie-4gpu-nvlink-pairs"]
    assert topo.link(0, 1) == topo.link(2, 3) == "NV4"
    assert off_diagonal(topo) == {"NV4", "PHB"}


def test_every_preset_is_a_valid_matrix_named_after_its_key():
    for name, topo in PRESETS.items():
        assert topo.name == name
        for i in range(topo.gpus):
            assert topo.link(i, i) == "X"
            assert all(topo.link(i, j) == topo.link(j, i) for j in range(topo.gpus))


def test_preset_lookup_and_helpers():
    assert preset("DGX1-V100") is PRESETS["dgx1-v100"]
    assert preset("pcie-6").gpus == 6
    assert preset("pcie-6") is preset("pcie-6")
    assert off_diagonal(preset("uniform-4-nv4")) == {"NV4"}
    assert off_diagonal(uniform(3, "PIX")) == {"PIX"}


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError) as info:
        preset("dgx-9000")
    for name in PRESETS:
        assert name in str(info.value)


@pytest.mark.parametrize(
    ("product", "count", "expected"),
    [
        ("Tesla-V100-SXM2-16GB", 8, "dgx1-v100"),
        ("Tesla-V100-SXM2-32GB-SHARED", 8, "dgx1-v100"),
        ("Tesla-V100-SXM3-32GB", 16, "dgx2"),
        ("NVIDIA-A100-SXM4-80GB", 8, "dgx-a100"),
        ("NVIDIA-A100-SXM4-40GB", 8, "dgx-a100"),
        ("NVIDIA-H100-80GB-HBM3", 8, "dgx-h100"),
    ],
)
def test_preset_for_known_sxm_systems(product, count, expected):
    assert preset_for(product, count) is PRESETS[expected]


def test_preset_for_part_of_an_sxm_board_keeps_its_links():
    quad = preset_for("Tesla-V100-SXM2-16GB", 4)
    assert quad.links == PRESETS["dgx1-v100"].subset(4).links
    assert off_diagonal(preset_for("NVIDIA-A100-SXM4-80GB", 4)) == {"NV4"}


@pytest.mark.parametrize("product", [None, "", "NVIDIA-A100-PCIE-40GB", "Tesla-T4", "NVIDIA-GeForce-RTX-4090"])
def test_unknown_or_pcie_products_get_a_pcie_topology(product):
    four = preset_for(product, 4)
    assert off_diagonal(four) == {"PHB"}
    eight = preset_for(product, 8)
    assert eight.link(0, 3) == "PHB" and eight.link(0, 4) == "SYS"
    assert not any(is_nvlink(c) for c in off_diagonal(eight))


def test_pcie_single_gpu_and_bad_counts():
    assert pcie(1).links == (("X",),)
    with pytest.raises(ValueError):
        preset_for("Tesla-T4", 0)


@pytest.mark.parametrize("name", ["uniform-1000-NV1", "uniform-65-NV1", "pcie-65", "pcie-" + "9" * 5000])
def test_preset_gpu_counts_past_the_per_node_limit_are_refused_by_name(name):
    with pytest.raises(ValueError) as info:
        preset(name)
    message = str(info.value)
    assert message.startswith("topology preset ") and name[:20] in message
    assert f"at most {MAX_GPUS_PER_NODE} GPUs per node" in message and "\n" not in message


def test_the_per_node_limit_itself_is_allowed_everywhere():
    assert preset(f"pcie-{MAX_GPUS_PER_NODE}").gpus == MAX_GPUS_PER_NODE
    assert uniform(MAX_GPUS_PER_NODE, "NV12").gpus == MAX_GPUS_PER_NODE
    with pytest.raises(ValueError, match="GPUs per node"):
        uniform(MAX_GPUS_PER_NODE + 1, "NV12")
    with pytest.raises(ValueError, match="GPUs per node"):
        preset_for("Tesla-T4", MAX_GPUS_PER_NODE + 1)
