"""The test API server's paged lists read a key range (as etcd does) instead of selecting
the whole resource for each page: page by page they must give what one whole read gives,
in key order, with the same remainingItemCount, and a write between pages must not show."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesim import KubeAPIServer


@pytest.fixture(scope="module")
def srv():
    with KubeAPIServer(controllers=False) as s:
        yield s


def body(resp) -> dict:
    return json.loads(resp.body.data)


def pages(srv, ns, query: dict) -> tuple[list[str], list[int | None]]:
    rt, names, remaining, cont = srv.resource("pods"), [], [], None
    while True:
        q = {**query, **({"continue": cont} if cont else {})}
        out = body(srv.rest.list(rt, ns, q))
        names += [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in out["items"]]
        remaining.append(out["metadata"].get("remainingItemCount"))
        cont = out["metadata"].get("continue")
        if not cont:
            return names, remaining


PODS = st.lists(st.tuples(st.sampled_from(["a", "b", "b2", "c"]), st.integers(0, 40),
                          st.sampled_from(["x", "y"])), max_size=40, unique_by=lambda t: t[:2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PODS, st.sampled_from([None, "a", "b", "c"]), st.sampled_from([None, "app=x"]),
       st.integers(1, 7), st.booleans())
def test_pages_are_one_consistent_read_in_key_order(srv, pods, ns, selector, limit, write_between):
    for existing in srv.objects("pods"):
        srv.store.remove("/pods", existing["metadata"]["namespace"], existing["metadata"]["name"])
    for pod_ns, i, app in pods:
        srv.store.create("/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"p{i}", "namespace": pod_ns, "labels": {"app": app}}, "spec": {}})
    query = {"labelSelector": selector} if selector else {}
    whole = [f"{o['metadata']['namespace']}/{o['metadata']['name']}"
             for o in body(srv.rest.list(srv.resource("pods"), ns, query))["items"]]
    assert whole == sorted(whole)
    expected = sorted(f"{p[0]}/p{p[1]}" for p in pods if (ns is None or p[0] == ns)
                      and (selector is None or p[2] == "x"))
    assert whole == expected
    if write_between and whole:  # the first page fixes the revision the others read at;
        # the late pod sorts after every page, where a read of today's state would find it
        first = body(srv.rest.list(srv.resource("pods"), ns, {**query, "limit": str(limit)}))
        srv.store.create("/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "zz-late", "namespace": ns or "c", "labels": {"app": "x"}}, "spec": {}})
        cont = first["metadata"].get("continue")
        rest, _ = pages(srv, ns, {**query, "limit": str(limit), "continue": cont}) if cont \
            else ([], [])
        got = [f"{o['metadata']['namespace']}/{o['metadata']['name']}"
               for o in first["items"]] + rest
        assert got == whole
        return
    got, remaining = pages(srv, ns, {**query, "limit": str(limit)})
    assert got == whole
    if selector is None:  # told only without selectors, as the real apiserver does
        left = [len(whole) - limit * (k + 1) for k in range(len(remaining) - 1)]
        assert remaining[:-1] == left and remaining[-1] is None
