"""The preflight's judgement: what the model expects of each path on a table of placements,
and the verdict of measured figures on both sides of the threshold."""

from __future__ import annotations

import importlib.util

import pytest

from mpijob.perf import preflight
from mpijob.perf.perfmodel import Assumptions
from mpijob.perf.preflight import DEFAULT_THRESHOLD, expected, gpu_plan, judge, verdict_of
from mpijob.scheduling.cluster import Node
from mpijob.scheduling.presets import preset
from tests.paths import ROOT

H100 = "NVIDIA-H100-80GB-HBM3"
GB200 = "NVIDIA-GB200"
MIB64 = 64 << 20


def node(name, topology, model=H100, gbps=100.0, **kw) -> Node:
    topo = preset(topology)
    return Node(name=name, gpus=topo.gpus, topology=topo, gpu_model=model, network_gbps=gbps, **kw)


def program():
    spec = importlib.util.spec_from_file_location(
        "hvdk8s_preflight", ROOT / "mpijob" / "k8s" / "podscripts" / "hvdk8s_preflight.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (case, pods, assumptions, path, (low, high) GB/s expected, link kind)
TABLE = [
    ("one node, NVLink (H100 NVSwitch)", [(node("a", "dgx-h100"), tuple(range(8)))],
     Assumptions(), "node", (300, 450), "nvlink"),
    ("PCIe only, two GPUs on one switch", [(node("a", "pcie-8gpu-dual-socket", "Tesla-T4"), (0, 1))],
     Assumptions(), "node", (8, 12.6), "pcie"),
    ("two nodes over RDMA", [(node("a", "dgx-h100", gbps=400.0), tuple(range(8))),
                             (node("b", "dgx-h100", gbps=400.0), tuple(range(8)))],
     Assumptions(transport="rdma"), "nodes", (40, 46), "net"),
    ("two nodes over TCP", [(node("a", "dgx-h100"), tuple(range(8))),
                            (node("b", "dgx-h100"), tuple(range(8)))],
     Assumptions(transport="tcp"), "nodes", (7, 7.5), "net"),
    ("an NVL72 domain, two trays", [
        (node("t0", "gb200-nvl72-tray", GB200, 400.0, nvlink_domain="uuid.1"), (0, 1, 2, 3)),
        (node("t1", "gb200-nvl72-tray", GB200, 400.0, nvlink_domain="uuid.1"), (0, 1, 2, 3))],
     Assumptions(nvlink_channel=True), "nodes", (450, 900), "nvlink"),  # 64 MiB: latency shows
]


@pytest.mark.parametrize("case,pods,assumptions,path,bounds,kind", TABLE, ids=[t[0] for t in TABLE])
def test_expected_busbw_per_path_follows_the_bottleneck_link(case, pods, assumptions, path,
                                                             bounds, kind):
    plan = gpu_plan(pods, [len(g) for _, g in pods], assumptions=assumptions)
    exp = plan["pods"][0]["node_path"] if path == "node" else plan[path]
    low, high = bounds
    assert low <= exp["gbs"] <= high, exp
    assert exp["kind"] == kind


def test_rdma_expects_more_than_tcp_on_the_same_nodes_by_the_efficiencies():
    pods = [(node("a", "dgx-h100"), (0,)), (node("b", "dgx-h100"), (0,))]
    rdma = expected(pods, MIB64, Assumptions(transport="rdma"))
    tcp = expected(pods, MIB64, Assumptions(transport="tcp"))
    # The fallback a preflight must catch: TCP is 0.6/0.92 of RDMA, below the threshold.
    assert tcp.gbs / rdma.gbs == pytest.approx(0.6 / 0.92, rel=0.02)
    assert tcp.gbs / rdma.gbs < DEFAULT_THRESHOLD


def test_nvl72_without_a_channel_is_expected_at_network_speed():
    pods = [(node(f"t{i}", "gb200-nvl72-tray", GB200, 400.0, nvlink_domain="uuid.1"), (0,))
            for i in range(2)]
    fabric = expected(pods, MIB64, Assumptions(nvlink_channel=True))
    network = expected(pods, MIB64, Assumptions(nvlink_channel=False, transport="rdma"))
    assert network.kind == "net" and fabric.kind == "nvlink"
    assert fabric.gbs > 10 * network.gbs


@pytest.mark.parametrize("case,pods,assumptions,path,bounds,kind", TABLE, ids=[t[0] for t in TABLE])
@pytest.mark.parametrize("ratio,verdict", [(0.95, "ok"), (0.71, "ok"), (0.69, "slow"),
                                           (0.3, "slow")])
def test_verdict_on_both_sides_of_the_threshold(case, pods, assumptions, path, bounds, kind,
                                                ratio, verdict):
    plan = gpu_plan(pods, [len(g) for _, g in pods], assumptions=assumptions)
    exp = (plan["pods"][0]["node_path"] if path == "node" else plan[path])["gbs"]
    assert judge(ratio * exp, exp) == verdict
    assert program().judge(ratio * exp, exp, DEFAULT_THRESHOLD) == verdict  # the same rule


def test_nothing_expected_is_unjudged_not_ok():
    assert judge(3.0, None) == "unjudged"
    assert judge(None, 5.0) == "unjudged"


def test_plan_counts_the_nvlinks_of_each_gpu():
    dgx1 = node("a", "dgx1-v100", "Tesla-V100-SXM2-16GB")
    h100 = node("b", "dgx-h100")
    pcie = node("c", "pcie-8gpu-dual-socket", "Tesla-T4")
    plan = gpu_plan([(dgx1, tuple(range(8))), (h100, tuple(range(8))), (pcie, (0, 1))],
                    [8, 8, 2])
    assert [p.get("nvlinks") for p in plan["pods"]] == [6, 18, None]


def test_pairs_put_every_pod_in_two_pairs():
    for count in range(3, 10):
        pairs = preflight.pair_keys(count)
        seen = [sum(i in p for p in pairs) for i in range(count)]
        assert seen == [2] * count, count
        mod = program()
        assert mod.pair_rounds(count) == preflight.pair_rounds(count)  # what the plan expects


def test_estimated_cost_of_64_gpus_is_within_30_seconds():
    pods = [(node(f"n{i}", "dgx-h100"), tuple(range(8))) for i in range(8)]
    plan = gpu_plan(pods, [8] * 8, assumptions=Assumptions(transport="tcp"))
    assert preflight.estimated_seconds(plan) <= 30
    one = gpu_plan(pods[:1], [8])
    assert preflight.estimated_seconds(one) < preflight.estimated_seconds(plan)


def _reports(node_gbs, expected_gbs=400.0, policy="warn"):
    path = {"kind": "preflight", "rank": 0, "time": 1.0, "check": "allreduce", "path": "node",
            "busbw_gbs": node_gbs, "expected_gbs": expected_gbs, "nodes": ["a"],
            "link_kind": "nvlink"}
    verdict = "fail" if judge(node_gbs, expected_gbs) == "slow" else "pass"
    summary = {"kind": "preflight", "rank": 0, "time": 2.0, "check": "summary",
               "verdict": verdict, "policy": policy, "threshold": DEFAULT_THRESHOLD,
               "findings": ["node a: slow"] if verdict == "fail" else []}
    return [path, summary]


def test_verdict_of_reports_names_the_slow_hardware():
    assert verdict_of(_reports(390.0)).verdict == "pass"
    failed = verdict_of(_reports(100.0))
    assert failed.verdict == "fail" and failed.findings == ("node a: slow",)
    assert verdict_of(_reports(100.0)[:1]).verdict == "running"
    assert verdict_of([]).verdict == "none"


def test_verdict_of_reports_rejudged_at_another_threshold():
    v = verdict_of(_reports(300.0), threshold=0.9)  # 0.75 of expected: ok at 0.7, slow at 0.9
    assert v.verdict == "fail" and "node a" in v.findings[0]


def test_measured_links_feed_calibration_by_kind():
    reports = _reports(390.0) + [{"check": "allreduce", "path": "job", "busbw_gbs": 5.0,
                                  "expected_gbs": 7.0, "link_kind": "net"},
                                 {"check": "allreduce", "path": "nodes", "busbw_gbs": 6.0,
                                  "expected_gbs": None, "link_kind": "net"}]
    assert preflight.measured_links(reports) == {"nvlink": [390.0]}
