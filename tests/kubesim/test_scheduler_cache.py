"""The test scheduler's usage cache, fed by pod events, must count what a recount of the
stored pods counts, and know the same unbound pods: after creates, binds, phase changes,
deletes and a compaction."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.scheduler import Usage, UsageCache
from kubesim.store import Store


def pod(name: str, node: str | None, cpu: int, port: int | None) -> dict:
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu), "nvidia.com/gpu": "1"}}}
    if port:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [container]}, "status": {"phase": "Pending"}}


def recount(store: Store) -> Usage:
    return Usage(store.items("/pods"))


def unbound(store: Store) -> list[str]:
    return sorted(p["metadata"]["name"] for p in store.items("/pods")
                  if not p["spec"].get("nodeName") and p["status"]["phase"] == "Pending")


def cached_unbound(cache: UsageCache) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cache.unbound())


def same(a: Usage, b: Usage) -> bool:
    nonzero = lambda u: {n: {k: v for k, v in c.items() if v} for n, c in u.by_node.items()}  # noqa: E731
    held = lambda u: {n: {p for p, k in c.items() if k > 0} for n, c in u.ports.items()}  # noqa: E731
    drop_empty = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
    return drop_empty(nonzero(a)) == drop_empty(nonzero(b)) and \
        drop_empty(held(a)) == drop_empty(held(b))


OPS = st.lists(st.tuples(st.sampled_from(["create", "bind", "finish", "delete", "compact"]),
                         st.integers(0, 7), st.sampled_from(["n1", "n2", "n3"]),
                         st.integers(1, 4), st.sampled_from([None, 8000, 9000])),
               max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_event_fed_usage_equals_a_recount(ops):
    store, cache = Store(history=16), UsageCache()  # a short history: trims happen
    for op, i, node, cpu, port in ops:
        name = f"p{i}"
        cur = store.get("/pods", "ns", name)
        if op == "create" and cur is None:
            store.create("/pods", pod(name, node if cpu % 2 else None, cpu, port))
        elif op == "bind" and cur is not None and not cur["spec"]["nodeName"]:
            store.mutate("/pods", "ns", name, lambda p, node=node: p["spec"].update(nodeName=node))
        elif op == "finish" and cur is not None:
            store.mutate("/pods", "ns", name, lambda p: p["status"].update(phase="Succeeded"))
        elif op == "delete":
            store.remove("/pods", "ns", name)
        elif op == "compact":
            store.compact()
        if i % 3 == 0:  # the scheduler reads the cache between some writes, not all
            with store.lock:
                assert same(cache.current(store), recount(store))
                assert cached_unbound(cache) == unbound(store)
    with store.lock:
        assert same(cache.current(store), recount(store))
        assert cached_unbound(cache) == unbound(store)


def test_a_cycle_may_assume_pods_on_its_copy_without_changing_the_cache():
    store, cache = Store(), UsageCache()
    store.create("/pods", pod("a", "n1", 2, None))
    with store.lock:
        usage = cache.current(store)
        usage.add("n1", pod("b", "n1", 3, None))
        assert same(cache.current(store), recount(store))


def test_a_host_port_two_pods_hold_stays_held_when_one_of_them_ends():
    """Pods bound by hand (nodeName set at create) may share a hostPort; the first to end
    must not free it for the other (found by the property test above in CI)."""
    store, cache = Store(), UsageCache()
    store.create("/pods", pod("a", "n1", 1, 8000))
    store.create("/pods", pod("b", "n1", 1, 8000))
    with store.lock:
        cache.current(store)
    store.mutate("/pods", "ns", "b", lambda p: p["status"].update(phase="Succeeded"))
    with store.lock:
        usage = cache.current(store)
        assert usage.ports["n1"][("TCP", 8000)] == 1 and same(usage, recount(store))
