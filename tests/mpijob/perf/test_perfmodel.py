"""The throughput model: formulas on hand-computed cases, the published facts it must
reproduce, GPU names, fallbacks and what a prediction prints."""

from __future__ import annotations

import pytest

from mpijob.errors import SpecError
from mpijob.perf import perfdata
from mpijob.perf.perfmodel import (
    DEFAULT_ASSUMPTIONS,
    Assumptions,
    PredictionError,
    allreduce_cost,
    expected_max_normal,
    predict,
    single_gpu_images_per_sec,
)
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.placement import NodeAssignment, Placement, PlacementRequest, place
from mpijob.scheduling.presets import preset
from mpijob.scheduling.topology import Topology

V100 = "Tesla-V100-SXM2-16GB"
P100 = "Tesla-P100-PCIE-16GB"
RESNET50_BYTES = 25_583_592 * 4
VGG16_BYTES = 138_357_544 * 4


def node(name, topology="dgx1-v100", model=V100, gbps=10.0, **kw) -> Node:
    topo = preset(topology) if isinstance(topology, str) else topology
    return Node(name=name, gpus=topo.gpus, topology=topo, gpu_model=model, network_gbps=gbps, **kw)


def placement(*pods, policy="topology") -> Placement:
    """pods: (node name, GPU indices) per worker pod."""
    return Placement(True, policy, tuple(NodeAssignment(n, tuple(g), len(g)) for n, g in pods))


def run(model, pods, cluster, *, batch=64, precision="fp32", **kw):
    return predict(model=model, batch_size=batch, precision=precision,
                   placement=placement(*pods), cluster=cluster, **kw)


def pair(code: str) -> Topology:
    return Topology.from_links([["X", code], [code, "X"]])


# --- formulas on hand-computed cases --------------------------------------------------------
def cost(pods, cluster, grad_bytes, **kw):
    by_name = {n.name: n for n in cluster.nodes}
    return allreduce_cost([(by_name[n], tuple(g)) for n, g in pods], grad_bytes,
                          Assumptions(**kw))


def test_two_gpus_on_one_pcie_switch_follow_the_ring_formula():
    c = Cluster((node("a", pair("PIX")),))
    k = cost([("a", (0, 1))], c, RESNET50_BYTES)
    # 2(n-1)/n per byte over B = 12.6 GB/s (PCIe Gen3 x16 through one switch); NCCL latency
    # per fused allreduce: 8.4 us + 2 PCIe steps x 5.7 us (tuning.cc, one node: no plateau).
    assert k.seconds_per_byte == pytest.approx(1.0 / 12.6e9, rel=1e-9)
    assert k.op_latency_s == pytest.approx(8.4e-6 + 2 * 5.7e-6, rel=1e-9)
    assert k.name == "ring" and "PIX" in k.bottleneck
    p = run("resnet50", [("a", (0, 1))], c)
    assert p.gradient_bytes == RESNET50_BYTES and p.algorithm == "ring"
    assert p.allreduce_seconds >= RESNET50_BYTES * k.seconds_per_byte


def test_two_nodes_over_10gbe_tcp_follow_the_ring_formula_and_the_step_rule():
    c = Cluster((node("a"), node("b")))
    k = cost([("a", (0,)), ("b", (0,))], c, VGG16_BYTES)
    nic = 10 / 8 * 0.6  # GB/s: 10 Gb/s line rate at NCCL sockets' 0.6 efficiency
    assert k.seconds_per_byte == pytest.approx(1 / (nic * 1e9), rel=1e-9)
    # 2 ring steps, both over the network, x1.9 for a ring across nodes (tuning.cc plateau).
    assert k.op_latency_s == pytest.approx((8.4e-6 + 2 * 9.6e-6) * 1.9, rel=1e-9)
    assert "10 Gb/s TCP" in k.bottleneck
    p = run("vgg16", [("a", (0,)), ("b", (0,))], c)
    # V100 VGG16: 249 images/s at batch 192 published; at batch 64 with the fixed step time.
    t0 = perfdata.step_overhead_s("vgg16")
    per_gpu = 64 / (64 * (192 / 249 - t0) / 192 + t0)
    assert p.single_gpu_images_per_sec == pytest.approx(per_gpu)
    compute = 64 / per_gpu
    assert p.compute_seconds == pytest.approx(compute)
    # Two ranks: the slower of two waits E[max of 2 normals] = 0.56 sigma longer.
    assert p.straggler_seconds == pytest.approx(compute * 0.034 * expected_max_normal(2))
    assert expected_max_normal(2) == pytest.approx(0.564, abs=0.03)
    assert p.step_seconds == pytest.approx(compute + p.straggler_seconds + p.exposed_allreduce_seconds)
    # VGG16's 553 MB over 0.75 GB/s cannot hide behind a 0.3 s backward pass.
    assert p.exposed_allreduce_seconds > 0.2
    assert p.images_per_sec == pytest.approx(2 * 64 / p.step_seconds)
    assert p.scaling_efficiency == pytest.approx(p.images_per_sec / (2 * per_gpu))
    assert "10 Gb/s TCP" in p.bottleneck


def test_rdma_label_raises_the_network_efficiency():
    labels = {"feature.node.kubernetes.io/rdma.available": "true"}
    tcp = Cluster((node("a", gbps=25), node("b", gbps=25)))
    rdma = Cluster((node("a", gbps=25, labels=labels), node("b", gbps=25, labels=labels)))
    pods = [("a", (0,)), ("b", (0,))]
    t, r = run("vgg16", pods, tcp), run("vgg16", pods, rdma)
    assert r.allreduce_seconds < t.allreduce_seconds
    assert "RDMA" in r.bottleneck and "TCP" in t.bottleneck
    forced = run("vgg16", pods, tcp, assumptions=Assumptions(transport="rdma"))
    assert forced.allreduce_seconds == pytest.approx(r.allreduce_seconds)


def test_nvlink_rings_use_every_link_of_the_quad():
    # DGX-1 quad 0-3: GPU 0 and 1 have 4 NVLinks (NV1+NV1+NV2) to the others = 100 GB/s.
    c = Cluster((node("a"),))
    k = cost([("a", (0, 1, 2, 3))], c, VGG16_BYTES)
    assert k.seconds_per_byte == pytest.approx(2 * 3 / 4 / 100e9, rel=1e-9)
    assert k.op_latency_s == pytest.approx(8.4e-6 + 6 * 3.4e-6, rel=1e-9)
    assert "NVLink" in k.bottleneck


def test_nvswitch_pairs_are_capped_at_one_gpus_links():
    # Every pair of a DGX A100 prints NV12, but a GPU has 12 links (300 GB/s), not 7 x 12.
    c = Cluster((node("a", "dgx-a100", "NVIDIA-A100-SXM4-80GB"),))
    k = cost([("a", tuple(range(8)))], c, VGG16_BYTES)
    assert k.seconds_per_byte == pytest.approx(2 * 7 / 8 / 300e9, rel=1e-9)


def test_two_eight_gpu_nodes_take_the_hierarchical_allreduce():
    c = Cluster((node("a"), node("b")))
    pods = [("a", tuple(range(8))), ("b", tuple(range(8)))]
    k = cost(pods, c, VGG16_BYTES)
    assert k.name.startswith("hierarchical")
    nic = 10 / 8 * 0.6e9
    assert k.seconds_per_byte == pytest.approx(2 * 7 / 8 / 150e9 + 2 * 1 / 2 / nic, rel=1e-9)
    assert k.seconds_per_byte < 2 * 15 / 16 / nic  # the flat ring's
    assert "network" in k.bottleneck
    assert run("vgg16", pods, c).algorithm.startswith("hierarchical")


def test_allreduce_latency_grows_with_ranks_and_nodes():
    """NCCL's ring latency: 2(n-1) steps, network steps dearer, x1.9 across nodes."""
    nodes = Cluster(tuple(node(f"n{i}", "pcie-4", P100, gbps=25) for i in range(8)))
    lat = [cost([(f"n{i}", (0, 1, 2, 3)) for i in range(k)], nodes, VGG16_BYTES).op_latency_s
           for k in (1, 2, 4, 8)]
    assert lat == sorted(lat) and lat[1] > 1.9 * lat[0]


def test_one_gpu_has_no_allreduce():
    c = Cluster((node("a"),))
    p = run("resnet50", [("a", (3,))], c)
    assert p.allreduce_seconds == 0 and p.gpus == 1
    assert p.scaling_efficiency == pytest.approx(1.0)
    assert p.images_per_sec == pytest.approx(p.single_gpu_images_per_sec)
    assert p.algorithm.startswith("none")


def test_fp16_allreduce_compression_halves_the_bytes_but_amp_alone_does_not():
    c = Cluster((node("a"), node("b")))
    pods = [("a", (0,)), ("b", (0,))]
    fp32 = run("vgg16", pods, c)
    amp = run("vgg16", pods, c, precision="fp16")
    compressed = run("vgg16", pods, c, precision="fp16",
                     assumptions=Assumptions(fp16_allreduce=True))
    assert amp.gradient_bytes == fp32.gradient_bytes == VGG16_BYTES
    assert compressed.gradient_bytes == VGG16_BYTES // 2
    assert compressed.allreduce_seconds < amp.allreduce_seconds
    assert amp.compute_seconds < fp32.compute_seconds  # Tensor Cores


# --- what the model must reproduce ---------------------------------------------------------
def test_done_when_topology_beats_spread_several_times_for_vgg16_not_for_resnet50():
    """Two DGX-1 V100 nodes on 10 GbE, 4 workers x 1 GPU, batch 64: the policies' real
    placements, then their predictions."""
    c = Cluster((node("dgx-a"), node("dgx-b")))
    request = PlacementRequest(workers=4, gpus_per_worker=1)
    topo = place(c, request, "topology")
    spread = place(c, request, "spread")
    assert topo.nodes_used == 1 and len(topo.assignments) == 1
    assert set(topo.assignments[0].gpus) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert spread.nodes_used == 2 and len(spread.assignments) == 4
    ratios = {}
    for model in ("vgg16", "resnet50"):
        t = predict(model=model, batch_size=64, precision="fp32", placement=topo, cluster=c)
        s = predict(model=model, batch_size=64, precision="fp32", placement=spread, cluster=c)
        ratios[model] = t.images_per_sec / s.images_per_sec
    assert ratios["vgg16"] >= 3
    assert ratios["resnet50"] < 2 < ratios["vgg16"] / ratios["resnet50"]


def test_cross_node_ethernet_hurts_vgg16_far_more_than_resnet50():
    c = Cluster(tuple(node(f"n{i}", gbps=10) for i in range(4)))
    pods = [(f"n{i}", (0,)) for i in range(4)]
    vgg, resnet = run("vgg16", pods, c), run("resnet50", pods, c)
    assert vgg.scaling_efficiency < 0.5
    assert resnet.scaling_efficiency > vgg.scaling_efficiency + 0.3


def test_horovod_paper_128_gpus_on_25gbe_resnet101_and_inception3_scale_better_than_vgg16():
    """Sergeev & Del Balso (2018): ~90% for Inception V3 and ResNet-101, ~68% for VGG-16
    (qualitative: the order and a wide gap, not the numbers)."""
    c = Cluster(tuple(node(f"n{i}", "pcie-4", P100, gbps=25) for i in range(32)))
    pods = [(f"n{i}", (0, 1, 2, 3)) for i in range(32)]
    eff = {m: run(m, pods, c).scaling_efficiency for m in ("inception3", "resnet101", "vgg16")}
    assert eff["vgg16"] < 0.8
    assert eff["inception3"] > 0.85 and eff["resnet101"] > 0.85
    assert min(eff["inception3"], eff["resnet101"]) > eff["vgg16"] + 0.15


def test_nvlink_beats_pcie_beats_the_network():
    c = Cluster((node("nv", pair("NV2")), node("pcie", pair("PHB")), node("x", pair("NV2")),
                 node("y", pair("NV2"))))
    nvlink = run("vgg16", [("nv", (0, 1))], c)
    pcie = run("vgg16", [("pcie", (0, 1))], c)
    network = run("vgg16", [("x", (0,)), ("y", (0,))], c)
    assert nvlink.allreduce_seconds < pcie.allreduce_seconds < network.allreduce_seconds
    assert nvlink.images_per_sec >= pcie.images_per_sec > network.images_per_sec


def test_single_gpu_pods_on_one_node_lose_nvlink():
    c = Cluster((node("a"),))
    one_pod = run("vgg16", [("a", (0, 3))], c)  # NV2 pair inside one pod
    two_pods = run("vgg16", [("a", (0,)), ("a", (3,))], c)
    assert two_pods.allreduce_seconds > 5 * one_pod.allreduce_seconds
    assert "host memory" in two_pods.bottleneck
    assert any("NVLink/P2P" in n for n in two_pods.notes)


# --- compute: figures, GPU names, fallbacks --------------------------------------------------
@pytest.mark.parametrize("label, gpu", [
    ("Tesla-V100-SXM2-16GB", "V100"),
    ("NVIDIA-A100-SXM4-80GB", "A100"),
    ("NVIDIA-H100-80GB-HBM3", "H100"),
    ("Tesla-T4", "T4"),
    ("Tesla-P100-PCIE-16GB", "P100"),
    ("Tesla-V100S-PCIE-32GB", "V100"),
    ("NVIDIA-A10", "A10"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA-L40S", "L40S"),
    ("Quadro-P400", None),
    ("GeForce-RTX-3090", None),
    ("", None),
])
def test_gpu_labels_are_normalised(label, gpu):
    assert perfdata.normalize_gpu(label) == gpu


@pytest.mark.parametrize("gpu", ["P100", "V100", "T4", "A100", "H100"])
@pytest.mark.parametrize("model", ["vgg16", "vgg19", "resnet50", "resnet101", "resnet152", "inception3"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_every_required_gpu_model_and_precision_has_a_cited_figure(gpu, model, precision):
    fig = perfdata.figure(gpu, model, precision)
    assert fig is not None and fig.images_per_sec > 0
    assert all(key.strip() in perfdata.SOURCES for key in fig.source.split(";"))


def test_published_figures_are_used_as_published_at_their_batch():
    fig = perfdata.figure("P100", "resnet50", "fp32")
    assert fig.derived is None
    assert fig.at_batch(64) == pytest.approx(219)  # tensorflow.org benchmarks, DGX-1 P100
    assert fig.at_batch(32) < 219 < fig.at_batch(256)


@pytest.mark.parametrize("model, published", [
    ("resnet50", 195), ("vgg16", 144), ("inception3", 128), ("resnet152", 82.7)])
def test_batch_overhead_fits_the_published_batch_32_figures(model, published):
    # tensorflow.org P100 "Other Results": the same models at batch 32.
    assert perfdata.figure("P100", model, "fp32").at_batch(32) == pytest.approx(published, rel=0.05)


def test_resnet101_sits_between_resnet50_and_resnet152():
    for gpu in ("P100", "V100", "A100"):
        r50, r101, r152 = (perfdata.figure(gpu, m, "fp32").peak for m in ("resnet50", "resnet101", "resnet152"))
        assert r152 < r101 < r50


def test_flops_fallback_is_calibrated_near_the_published_v100_figures():
    for model in ("resnet50", "resnet152", "inception3"):
        for precision in ("fp32", "fp16"):
            estimate = perfdata.flops_estimate("V100", model, precision).images_per_sec
            published = perfdata.figure("V100", model, precision).peak
            assert 0.7 < estimate / published < 1.4


def test_gpu_without_figures_falls_back_to_flops_and_says_so():
    c = Cluster((node("a", "pcie-2", "NVIDIA-A10"),))
    p = run("resnet50", [("a", (0,))], c)
    assert any("FLOPs estimate" in n for n in p.notes)
    assert p.images_per_sec > 0


def test_unknown_gpu_is_named_in_the_notes():
    c = Cluster((node("a", "pcie-2", "Mystery-GPU-9000"),))
    p = run("resnet50", [("a", (0,))], c)
    assert any("Mystery-GPU-9000" in n and "unknown GPU" in n for n in p.notes)


def test_derived_figures_say_how_they_were_derived():
    c = Cluster((node("a", "pcie-2", "Tesla-T4"),))
    p = run("resnet50", [("a", (0,))], c)
    assert any("T4/V100" in n for n in p.notes)
    h200 = Cluster((node("a", "dgx-h100", "NVIDIA-H200"),))
    assert any("H100" in n for n in run("resnet50", [("a", (0,))], h200).notes)


def test_faster_gpus_predict_more_images_per_second():
    ips = {g: single_gpu_images_per_sec(label, "resnet50", "fp16", 64) for g, label in
           (("T4", "Tesla-T4"), ("V100", V100), ("A100", "NVIDIA-A100-SXM4-80GB"),
            ("H100", "NVIDIA-H100-80GB-HBM3"))}
    assert ips["T4"] < ips["V100"] < ips["A100"] < ips["H100"]


def test_mixed_gpu_models_run_at_the_slowest():
    c = Cluster((node("v", model=V100), node("t", "pcie-2", "Tesla-T4")))
    p = run("resnet50", [("v", (0,)), ("t", (0,))], c)
    assert p.single_gpu_images_per_sec == pytest.approx(
        single_gpu_images_per_sec("Tesla-T4", "resnet50", "fp32", 64))
    assert any("mixed GPU models" in n for n in p.notes)


# --- errors and output -------------------------------------------------------------------------
def test_infeasible_placement_raises_prediction_error():
    c = Cluster((node("a"),))
    bad = Placement(False, "topology", (), reason="needs 16 GPUs, 8 free")
    with pytest.raises(PredictionError, match="needs 16 GPUs"):
        predict(model="vgg16", batch_size=64, precision="fp32", placement=bad, cluster=c)


def test_placement_naming_a_missing_node_raises_prediction_error():
    with pytest.raises(PredictionError, match="ghost"):
        run("vgg16", [("ghost", (0,))], Cluster((node("a"),)))


@pytest.mark.parametrize("kw, field", [
    ({"model": "alexnet9"}, "model"), ({"precision": "int4"}, "precision"), ({"batch": 0}, "batch_size"),
])
def test_bad_inputs_raise_spec_errors_naming_the_field(kw, field):
    c = Cluster((node("a"),))
    args = {"model": "vgg16", "batch": 64, "precision": "fp32", **kw}
    with pytest.raises(SpecError) as err:
        run(args["model"], [("a", (0,))], c, batch=args["batch"], precision=args["precision"])
    assert err.value.field == field


def test_prediction_json_and_description():
    c = Cluster((node("a"), node("b")))
    p = run("vgg16", [("a", (0,)), ("b", (0,))], c)
    data = p.to_json()
    for key in ("images_per_sec", "step_seconds", "compute_seconds", "allreduce_seconds",
                "bottleneck", "scaling_efficiency", "algorithm", "notes", "gpus"):
        assert key in data
    assert isinstance(data["notes"], list)
    lines = p.describe()
    assert lines[0].startswith("throughput") and f"{p.images_per_sec:,.0f}" in lines[0]
    assert any(line.startswith("bottleneck") and "network" in line for line in lines)
    assert any("tensorflow" in line or "lambda" in line for line in lines)


def test_default_assumptions_are_the_documented_ones():
    a = DEFAULT_ASSUMPTIONS
    assert (a.tcp_efficiency, a.rdma_efficiency) == (0.6, 0.92)
    # Horovod >= 0.21 defaults: 1 ms cycle, 128 MB fusion buffer.
    assert a.backward_share == pytest.approx(2 / 3) and a.fusion_bytes == 128 * 2**20
    assert a.cycle_s == 1e-3 and a.rank_jitter == 0.034


# --- overlap: the order gradients become ready -------------------------------------------------
def test_gradients_ready_early_in_backward_overlap_and_late_ones_do_not():
    """VGG16's big FC gradients are ready first in backward, so they hide behind the convs."""
    from mpijob.perf import overlap
    kw = dict(forward_s=0.1, backward_s=0.2, bytes_per_param=4, seconds_per_byte=1e-9,
              op_latency_s=1e-4, negotiate_s=0.0, cycle_s=1e-3, fusion_bytes=2**27)
    early = overlap.schedule(profile=((0.1, 40_000_000, 1), (1.0, 1000, 1)), **kw)
    late = overlap.schedule(profile=((0.1, 1000, 1), (1.0, 40_000_000, 1)), **kw)
    # 160 MB at 1 GB/s = 0.16 s: started at 0.12 s it ends at ~0.28 s, before backward (0.3 s).
    assert early.exposed_s == pytest.approx(1e-3 / 2 + 1e-4 + 4000e-9, rel=0.01)
    assert late.exposed_s > 0.16
    assert early.busy_s == pytest.approx(late.busy_s, rel=0.01)


def test_vgg16_at_horovod_scale_is_within_five_points_of_the_paper():
    """The 128-GPU row (Sergeev & Del Balso 2018): 32 x 4 P100 PCIe on 25 Gb RoCE, 2017
    Horovod settings (5 ms cycle, 64 MB fusion): 79% for VGG-16, 90% for ResNet-101."""
    c = Cluster(tuple(node(f"n{i}", "pcie-4", P100, gbps=25) for i in range(32)))
    pods = [(f"n{i}", (0, 1, 2, 3)) for i in range(32)]
    legacy = Assumptions(transport="rdma", cycle_s=5e-3, fusion_bytes=64 * 2**20)
    assert abs(run("vgg16", pods, c, assumptions=legacy).scaling_efficiency - 0.79) <= 0.05
    assert abs(run("resnet101", pods, c, assumptions=legacy).scaling_efficiency - 0.90) <= 0.05
