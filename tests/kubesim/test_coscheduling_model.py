"""The test API server's model of scheduler-plugins' Coscheduling plugin and PodGroup
controller (kubesim/coscheduling.py cites the upstream source), asserted
directly: a group that fits binds whole; a waiting group's reservations hold GPUs that another
group cannot take until its Permit wait runs out, and no partial binding persists; PreFilter's
and Permit's refusals read as upstream's.

The loops do not run on their own (controllers=False): each srv.step() is one pass, and the
scheduler's clock is a fake one the tests move, so a 5 s Permit wait takes no time."""

from __future__ import annotations

import pytest

from kubesim.server import KubeAPIServer

SCHED = "scheduler-plugins-scheduler"
PG = "podgroups.scheduling.x-k8s.io"


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def srv():
    with KubeAPIServer(controllers=False, start_delay=0.0) as s:
        for i in range(2):
            s.add_node(f"gpu-node-{i}", gpus=8)
        s.install_group("scheduler-plugins")
        s.scheduler.clock = FakeClock()
        yield s


def podgroup(srv, name, min_member, timeout=None):
    spec = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    srv.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def pod(srv, name, group, gpus):
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "labels": {"scheduling.x-k8s.io/pod-group": group}},
        "spec": {"schedulerName": SCHED, "containers": [{
            "name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}})


def node_of(srv, name):
    return srv.get("pods", name)["spec"].get("nodeName")


def message(srv, name):
    conds = srv.get("pods", name)["status"].get("conditions") or []
    (c,) = [c for c in conds if c["type"] == "PodScheduled"]
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    return c["message"]


def failed_scheduling(srv, name):
    return [e["message"] for e in srv.events_for(name, reason="FailedScheduling")]


def test_a_group_that_fits_binds_whole_and_its_podgroup_turns_running(srv):
    podgroup(srv, "fits", 2)
    pod(srv, "fits-0", "fits", 8)
    pod(srv, "fits-1", "fits", 8)
    srv.step()
    # The first member waited at Permit; the second made minMember, so both were bound.
    assert {node_of(srv, "fits-0"), node_of(srv, "fits-1")} == {"gpu-node-0", "gpu-node-1"}
    assert srv.scheduler.coscheduling.waiting == {}
    srv.wait_for(lambda: srv.get(PG, "fits")["status"].get("phase") == "Running")
    status = srv.get(PG, "fits")["status"]
    assert status["running"] == 2 and "scheduled" not in status  # no such field in v0.34


def test_a_waiting_group_holds_its_gpus_until_its_permit_wait_runs_out(srv):
    # Group a: 10 members, 9 x 1 GPU then one of 8. Nine fit (8 on gpu-node-0, 1 on
    # gpu-node-1) and wait at Permit; a-9 does not fit, but a gap of 1/10 is within the
    # plugin's podGroupRejectPercentage (10), so PostFilter does not reject the group.
    podgroup(srv, "a", 10, timeout=5)
    for i in range(9):
        pod(srv, f"a-{i}", "a", 1)
    pod(srv, "a-9", "a", 8)
    # Group b: 2 x 4 GPUs would fit an idle cluster, not beside a's reservations.
    podgroup(srv, "b", 2)
    pod(srv, "b-0", "b", 4)
    pod(srv, "b-1", "b", 4)
    srv.step()
    waiting = srv.scheduler.coscheduling.waiting
    assert sorted(w.pod["metadata"]["name"] for w in waiting.values()) == [
        f"a-{i}" for i in range(9)]
    names = [f"a-{i}" for i in range(10)] + ["b-0", "b-1"]
    assert [n for n in names if node_of(srv, n)] == []  # assumed is not bound: nothing bound
    assert message(srv, "a-9") == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    # b-0 fit into gpu-node-1's 7 free GPUs and waited; b-1 did not, and PostFilter
    # rejected b (gap 1/2).
    assert message(srv, "b-1") == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. PodGroup default/b gets "
        "rejected due to Pod b-1 is unschedulable even after PostFilter.")
    assert message(srv, "b-0") == "0/1 nodes are available: 1 optimistic rejection in PostFilter."

    srv.scheduler.clock.now += 4.9  # not yet: a keeps its reservations, b still waits
    srv.step(3)
    assert len(waiting) == 9 and [n for n in names if node_of(srv, n)] == []

    srv.scheduler.clock.now += 0.2  # a's 5 s run out: rejected, released, back in the queue
    srv.step()
    timed_out = [n for n in names[:9] if any(
        m == "0/1 nodes are available: 1 rejected due to timeout after waiting 5s at plugin "
             "Coscheduling." for m in failed_scheduling(srv, n))]
    assert len(timed_out) == 1
    assert all("0/1 nodes are available: 1 rejection in Unreserve." in failed_scheduling(srv, n)
               for n in names[:9] if n not in timed_out)
    # b failed before a did, so it goes first now (Less: the time a group last failed) and
    # binds whole; a then falls short by 2 of 10 and PostFilter rejects it whole.
    assert {node_of(srv, "b-0"), node_of(srv, "b-1")} == {"gpu-node-0"}
    assert [n for n in names[:10] if node_of(srv, n)] == []
    assert waiting == {}
    srv.step(3)
    assert [n for n in names[:10] if node_of(srv, n)] == []
    assert all(message(srv, n) for n in names[:10])  # each a pod Unschedulable, none bound


def test_prefilter_refuses_a_group_with_too_few_pods_and_permit_a_missing_podgroup(srv):
    podgroup(srv, "short", 2)
    pod(srv, "short-0", "short", 1)
    srv.step()
    assert node_of(srv, "short-0") is None
    assert message(srv, "short-0") == (
        "0/2 nodes are available: pre-filter pod short-0 cannot find enough sibling pods, "
        "current pods number: 1, minMember of group: 2. PodGroup default/short gets rejected "
        "due to Pod short-0 is unschedulable even after PostFilter.")
    srv.step(3)  # the controller: "" -> Pending, and it stays Pending with one pod of two
    assert srv.get(PG, "short")["status"]["phase"] == "Pending"
    # A pod of a group that ended (Succeeded) is not a sibling (the scheduler's informers
    # leave terminal pods out).
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "short-old", "labels": {"scheduling.x-k8s.io/pod-group": "short"}},
        "spec": {"schedulerName": SCHED, "nodeName": "gpu-node-1",
                 "containers": [{"name": "c", "image": "x"}]}})
    srv.store.mutate("/pods", "default", "short-old",
                     lambda p: p.setdefault("status", {}).__setitem__("phase", "Succeeded"))
    srv.step()
    assert "current pods number: 1," in message(srv, "short-0")
    pod(srv, "short-1", "short", 1)
    srv.step()
    assert node_of(srv, "short-0") and node_of(srv, "short-1")

    # No PodGroup: PreFilter lets the pod through, Permit refuses it.
    pod(srv, "lost-0", "lost", 1)
    srv.step()
    assert node_of(srv, "lost-0") is None
    assert message(srv, "lost-0") == "0/1 nodes are available: 1 PodGroup not found."
