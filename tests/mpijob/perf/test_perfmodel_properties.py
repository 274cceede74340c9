"""Monotonicity of the throughput model, for any model, batch, precision and job shape."""

from __future__ import annotations

import math
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpijob.perf import perfdata, perfmodel
from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, Assumptions, predict
from mpijob.scheduling import links
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.placement import NodeAssignment, Placement
from mpijob.scheduling.presets import preset

MODELS = ("vgg16", "vgg19", "resnet50", "resnet101", "resnet152", "inception3")
GPUS = ("Tesla-V100-SXM2-16GB", "Tesla-P100-PCIE-16GB", "NVIDIA-A100-SXM4-80GB", "Tesla-T4")
TOPOLOGIES = ("dgx1-v100", "pcie-8gpu-dual-socket", "dgx-a100", "pcie-8")

jobs = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "batch": st.integers(1, 512),
    "precision": st.sampled_from(("fp32", "fp16")),
    "gpu": st.sampled_from(GPUS),
    "topology": st.sampled_from(TOPOLOGIES),
    "nodes": st.integers(1, 4),
    "per_node": st.integers(1, 8),
    "pods_per_node": st.sampled_from((1, "per-gpu")),
})


def _predict(job, *, gbps: float, pcie_gen: int = 3, topology=None, per_node=None, nodes=None,
             assumptions=DEFAULT_ASSUMPTIONS):
    topo = topology or preset(job["topology"])
    count = nodes or job["nodes"]
    k = per_node or job["per_node"]
    cluster = Cluster(tuple(
        Node(name=f"n{i}", gpus=topo.gpus, topology=topo, gpu_model=job["gpu"],
             network_gbps=gbps, pcie_gen=pcie_gen) for i in range(count)))
    pods = []
    for i in range(count):
        gpus = tuple(range(k))
        if job["pods_per_node"] == 1:
            pods.append(NodeAssignment(f"n{i}", gpus, 1))
        else:
            pods.extend(NodeAssignment(f"n{i}", (g,), 1) for g in gpus)
    placement = Placement(True, "topology", tuple(pods))
    return predict(model=job["model"], batch_size=job["batch"], precision=job["precision"],
                   placement=placement, cluster=cluster, assumptions=assumptions)


@settings(max_examples=150, deadline=None)
@given(job=jobs, slow=st.floats(0.1, 400), factor=st.floats(1.0, 100.0))
def test_more_network_bandwidth_never_predicts_slower(job, slow, factor):
    before = _predict(job, gbps=slow)
    after = _predict(job, gbps=slow * factor)
    assert after.images_per_sec >= before.images_per_sec * (1 - 1e-12)
    assert after.allreduce_seconds <= before.allreduce_seconds * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(job=jobs, gen=st.sampled_from((3, 4)), gbps=st.floats(1, 400))
def test_a_faster_pcie_generation_never_predicts_slower(job, gen, gbps):
    before = _predict(job, gbps=gbps, pcie_gen=gen)
    after = _predict(job, gbps=gbps, pcie_gen=gen + 1)
    assert after.images_per_sec >= before.images_per_sec * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(job=jobs, nodes=st.integers(1, 6), per_node=st.integers(1, 7))
def test_more_gpus_on_a_perfect_link_never_predict_lower_total_throughput(job, nodes, per_node):
    perfect = preset("uniform-8-NV18")  # every pair 18 NVLinks; network 1 Pb/s
    job = {**job, "gpu": "NVIDIA-H100-80GB-HBM3", "pods_per_node": 1}
    base = _predict(job, gbps=1e6, topology=perfect, nodes=nodes, per_node=per_node)
    wider = _predict(job, gbps=1e6, topology=perfect, nodes=nodes, per_node=per_node + 1)
    longer = _predict(job, gbps=1e6, topology=perfect, nodes=nodes + 1, per_node=per_node)
    assert wider.images_per_sec >= base.images_per_sec
    assert longer.images_per_sec >= base.images_per_sec


@settings(max_examples=100, deadline=None)
@given(job=jobs, gbps=st.floats(0.1, 400))
def test_efficiency_is_a_fraction_and_the_step_adds_up(job, gbps):
    p = _predict(job, gbps=gbps)
    assert 0 < p.scaling_efficiency <= 1 + 1e-12
    assert p.step_seconds >= p.compute_seconds
    assert 0 <= p.exposed_allreduce_seconds <= p.allreduce_seconds
    assert p.step_seconds == pytest.approx(
        p.compute_seconds + p.straggler_seconds + p.exposed_allreduce_seconds, rel=1e-12)


# --- limits of the communication terms -------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(job=jobs, gbps=st.floats(0.1, 400))
def test_one_gpu_has_no_communication_term(job, gbps):
    p = _predict({**job, "nodes": 1}, gbps=gbps, per_node=1)
    assert p.allreduce_seconds == 0 and p.exposed_allreduce_seconds == 0
    assert p.straggler_seconds == 0 and p.step_seconds == p.compute_seconds


@settings(max_examples=60, deadline=None)
@given(job=jobs)
def test_infinite_bandwidth_and_no_latency_is_compute_bound(job):
    """With links of unbounded bandwidth, no latency and no jitter, the step is the compute."""
    perfect = preset("uniform-8-NV18")
    no_wait = Assumptions(rank_jitter=0.0, cycle_s=0.0)
    perfmodel._pod_ring.cache_clear()  # cached bandwidths of the finite links
    with patch.dict(perfdata.NCCL_RING_STEP_LATENCY_S, {"nvlink": 0.0, "pcie": 0.0, "net": 0.0}), \
            patch.object(perfdata, "NCCL_RING_BASE_LATENCY_S", 0.0), \
            patch.object(links, "NVLINK_GBS_PER_LINK_DEFAULT", math.inf):
        p = _predict({**job, "gpu": "NVIDIA-H100-80GB-HBM3", "pods_per_node": 1}, gbps=math.inf,
                     topology=perfect, assumptions=no_wait)
    assert p.exposed_allreduce_seconds == 0
    assert p.step_seconds == pytest.approx(p.compute_seconds)
    assert p.scaling_efficiency == pytest.approx(1.0)
    perfmodel._pod_ring.cache_clear()


@settings(max_examples=100, deadline=None)
@given(job=jobs, gbps=st.floats(0.1, 400), nodes=st.integers(1, 5), per_node=st.integers(1, 7),
       code=st.sampled_from(("PIX", "PHB", "SYS")))
def test_more_ranks_are_never_faster_per_gpu(job, gbps, nodes, per_node, code):
    """On PCIe links all alike. (With NVLink an added GPU brings links of its own: NCCL
    spreads its channels over them, so a pod's per-GPU bandwidth can grow with it.)"""
    topo = preset(f"uniform-8-{code}")
    base = _predict(job, gbps=gbps, nodes=nodes, per_node=per_node, topology=topo)
    wider = _predict(job, gbps=gbps, nodes=nodes, per_node=per_node + 1, topology=topo)
    longer = _predict(job, gbps=gbps, nodes=nodes + 1, per_node=per_node, topology=topo)
    per_gpu = base.images_per_sec / base.gpus
    assert wider.images_per_sec / wider.gpus <= per_gpu * (1 + 1e-9)
    assert longer.images_per_sec / longer.gpus <= per_gpu * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(job=jobs, gbps=st.floats(0.1, 400), transport=st.sampled_from(("tcp", "rdma")))
def test_overlap_never_hides_more_than_the_backward_pass_lasts(job, gbps, transport):
    a = Assumptions(transport=transport)
    p = _predict(job, gbps=gbps, assumptions=a)
    backward = a.backward_share * (p.compute_seconds + p.straggler_seconds)
    hidden = p.allreduce_seconds - p.exposed_allreduce_seconds
    assert hidden <= backward * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(job=jobs, gbps=st.floats(0.1, 400))
def test_rdma_is_never_slower_than_the_sockets(job, gbps):
    job = {**job, "nodes": max(2, job["nodes"])}
    tcp = _predict(job, gbps=gbps, assumptions=Assumptions(transport="tcp"))
    rdma = _predict(job, gbps=gbps, assumptions=Assumptions(transport="rdma"))
    assert rdma.images_per_sec >= tcp.images_per_sec * (1 - 1e-12)
