"""Paged lists (limit/continue, 410 Expired) and client-side rate limiting."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes import client as kclient
from launcher.backends.kubernetes.client import POD, ApiError, RetryPolicy, connect
from launcher.backends.kubernetes.ratelimit import BURST, QPS, RateLimiter
from mpijob.jobspec.spec import build_spec
from mpijob.scheduling.placement import PlacementRequest, place
from tests.launcher.backends.contract_calls import create_job


def add_pods(srv, n, node="gpu-node-0", gpus=0):
    for i in range(n):
        limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
        srv.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"p{i}", "namespace": "default"},
                    "spec": {"nodeName": node, "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": limits}}]}})


def pod_lists(srv):
    return [r.query for r in srv.request_log if r.path.endswith("/pods") and r.method == "GET"
            and "watch" not in r.query]


@pytest.fixture
def client(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    monkeypatch.setattr(kclient, "PAGE_SIZE", 3)
    return connect(retry=RetryPolicy(sleep=lambda s: None))


def test_a_list_longer_than_a_page_is_read_page_by_page(kube_server, client):
    add_pods(kube_server, 7)
    kube_server.clear_requests()
    assert [p["metadata"]["name"] for p in client.items(POD)] == [f"p{i}" for i in range(7)]
    pages = pod_lists(kube_server)
    assert [q.get("limit") for q in pages] == ["3", "3", "3"]
    assert [bool(q.get("continue")) for q in pages] == [False, True, True]


def test_a_compaction_in_the_middle_of_a_list_starts_it_over(kube_server, client):
    add_pods(kube_server, 7)
    kube_server.clear_requests()
    seen = []

    def keep(pod):
        seen.append(pod["metadata"]["name"])
        if len(seen) == 3:  # the first page is in: a write lands, then etcd compacts
            add_pods_named(kube_server, "late")
            kube_server.compact()
        return pod["metadata"]["name"]

    names = client.items(POD, keep=keep)
    assert names == sorted([f"p{i}" for i in range(7)] + ["late"])
    # page 1, page 2 refused (410 Expired), then the whole list again: 3 pages
    assert [bool(q.get("continue")) for q in pod_lists(kube_server)] == [
        False, True, False, True, True]


def add_pods_named(srv, name):
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x"}]}})


def test_a_list_that_keeps_expiring_fails_with_the_servers_words(kube_server, client):
    add_pods(kube_server, 7)
    kube_server.fail_next(10, 410, query=("continue",))
    with pytest.raises(ApiError) as err:
        client.items(POD)
    assert err.value.status == 410
    assert "continue parameter is too old" in str(err.value.user_error())


def test_submit_rechecks_the_planned_nodes_in_one_list_of_each_kind(k8s, monkeypatch):
    srv = k8s.server()
    add_pods(srv, 5, node="gpu-node-1")
    backend = k8s.backend()
    spec = build_spec(name="vgg16", namespace="default", image=k8s.image,
                      command=("python", "train.py"), workers=2, gpus_per_worker=8)
    before = srv.store.rv
    placement = place(backend.snapshot(cached=True, gpu_nodes_only=True).cluster,
                      PlacementRequest.from_spec(spec))
    assert placement.feasible
    snapshot_lists = [r.query for r in srv.request_log if r.method == "GET"
                      and r.path.endswith(("/pods", "/nodes"))]
    # the snapshot: the watch cache, whole (no limit: a limit would page from etcd)
    assert [(q.get("resourceVersion"), q.get("limit")) for q in snapshot_lists] == [
        ("0", None), ("0", None)]
    monkeypatch.setattr(kclient, "PAGE_SIZE", 3)
    srv.clear_requests()
    create_job(backend, spec, placement, schedule_timeout=20)
    reads = [(r.path, r.query) for r in srv.request_log if r.method == "GET"
             and "watch" not in r.query and r.path in ("/api/v1/nodes", "/api/v1/pods")
             or r.path.startswith("/api/v1/nodes/")]
    assert [path for path, _ in reads] == ["/api/v1/nodes", "/api/v1/pods"]
    for _, query in reads:  # one answer each, not older than what the snapshot read
        assert query.get("resourceVersionMatch") == "NotOlderThan" and "limit" not in query
        # not older than what the snapshot read (nor than the lists read since)
        assert before <= int(query["resourceVersion"]) <= srv.store.rv


# --- rate limiting --------------------------------------------------------------------------
class FakeTime:
    def __init__(self):
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_512_pod_submit_goes_out_at_the_burst_then_at_qps():
    t = FakeTime()
    limiter = RateLimiter(clock=t.clock, sleep=t.sleep)
    sent = []
    for _ in range(512):
        limiter.acquire()
        sent.append(t.now)
    assert sent[BURST - 1] == 1000.0  # the burst goes at once
    assert sent[-1] - 1000.0 == pytest.approx((512 - BURST) / QPS)
    after_burst = sent[BURST:]
    for start in after_burst:  # never more than QPS in any second after the burst
        assert sum(1 for s in after_burst if start <= s < start + 1.0) <= QPS


def test_retry_after_holds_every_request_of_the_client():
    t = FakeTime()
    limiter = RateLimiter(clock=t.clock, sleep=t.sleep)
    limiter.acquire()
    limiter.hold(4.0)
    limiter.acquire()  # another thread's request: waits out the hold too
    assert t.now == pytest.approx(1004.0)


def test_a_429_holds_the_limiter_for_its_retry_after(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    sleeps: list[float] = []
    client = connect(retry=RetryPolicy(sleep=sleeps.append, rand=lambda: 0.0))
    held = []
    monkeypatch.setattr(client.limiter, "hold", held.append)
    kube_server.fail_next(1, 429, retry_after=3)
    client.items(POD)
    assert held == [3.0] and sleeps == [3.0]
