"""Submit's re-check of a plan against a fresh snapshot uses placement's own node screening,
so everything placement weighs (readiness, node selector, taints, free GPUs, CPU and now
memory) is weighed again before anything is created."""

from __future__ import annotations

import dataclasses

from launcher.backends.kubernetes.submit import _plan_conflicts
from mpijob.jobspec.spec import JobSpec
from mpijob.scheduling.cluster import Cluster, Node, Taint
from mpijob.scheduling.placement import PlacementRequest, place
from mpijob.scheduling.presets import preset

GiB = 2**30


def _node(**kw) -> Node:
    base = dict(name="n0", gpus=8, topology=preset("dgx1-v100"), labels={"pool": "a"},
                free_cpu=64.0, free_memory=512 * GiB)
    return Node(**{**base, **kw})


def _plan(spec: JobSpec, node: Node):
    placement = place(Cluster((node,)), PlacementRequest.from_spec(spec))
    assert placement.feasible, placement.reason
    return placement


SPEC = JobSpec(name="j", workers=2, gpus_per_worker=2, memory="64Gi", cpu="4",
               node_selector={"pool": "a"})


def test_a_plan_that_still_fits_has_no_conflict():
    node = _node()
    assert _plan_conflicts(Cluster((node,)), _plan(SPEC, node), SPEC) is None


def test_memory_taken_since_planning_is_a_conflict():
    node = _node()
    plan = _plan(SPEC, node)
    now = dataclasses.replace(node, free_memory=100 * GiB)  # room for one 64Gi worker, not two
    assert _plan_conflicts(Cluster((now,)), plan, SPEC) == \
        "node n0 has 100Gi of free memory now"


def test_a_node_relabelled_away_from_the_selector_is_a_conflict():
    node = _node()
    plan = _plan(SPEC, node)
    now = dataclasses.replace(node, labels={"pool": "b"})
    assert _plan_conflicts(Cluster((now,)), plan, SPEC) == "node n0 no longer matches --selector"


def test_taints_cpu_and_gpus_are_still_checked():
    node = _node()
    plan = _plan(SPEC, node)
    cordoned = dataclasses.replace(node, taints=(Taint("node.kubernetes.io/unschedulable", "",
                                                       "NoSchedule"),))
    assert _plan_conflicts(Cluster((cordoned,)), plan, SPEC) == "node n0 is cordoned"
    busy_cpu = dataclasses.replace(node, free_cpu=6.0)
    assert _plan_conflicts(Cluster((busy_cpu,)), plan, SPEC) == "node n0 has 6 free CPUs now"
    gpus = plan.assignments[0].gpus
    taken = dataclasses.replace(node, allocated=frozenset(gpus[:1]))
    assert _plan_conflicts(Cluster((taken,)), plan, SPEC) == \
        f"GPU(s) {gpus[0]} of n0 are taken now"
