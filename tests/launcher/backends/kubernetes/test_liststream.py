"""liststream.parse_list with a projection (msgspec blocks) gives what the generic parser
gives, restricted to the projected fields, whatever the items hold and however the answer
is cut: nested arrays of objects that begin with "metadata", strings holding the boundary's
characters, fields of types the projection refuses, items that begin with another field,
an empty list, fields after the items, spaced JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.backends.kubernetes import liststream
from launcher.backends.kubernetes.liststream import parse_list
from launcher.backends.kubernetes.projections import PlacementPod


def iter_chunks(data: bytes, size: int):
    """`data` in pieces of `size`, as a response arrives."""
    for i in range(0, len(data), size):
        yield data[i:i + size]


def project(pod: dict) -> dict:
    """What PlacementPod keeps of a pod, written out by hand."""
    out: dict = {}
    m = pod.get("metadata")
    if m is not None:
        out["metadata"] = {k: m[k] for k in ("name", "namespace", "labels", "annotations")
                           if k in m}
    spec = pod.get("spec")
    if spec is not None:
        s = {k: spec[k] for k in ("nodeName", "overhead", "hostNetwork") if k in spec}
        for key in ("containers", "initContainers"):
            if key in spec:
                s[key] = [{**({"resources": {k: c["resources"][k] for k in ("requests", "limits")
                                             if k in c["resources"]}} if "resources" in c else {}),
                           **({"ports": [{k: p[k] for k in ("containerPort", "hostPort") if k in p}
                                         for p in c["ports"]]} if "ports" in c else {})}
                          for c in spec[key]]
        out["spec"] = s
    if "status" in pod:
        out["status"] = {k: pod["status"][k] for k in ("phase",) if k in pod["status"]}
    return out


def pod(i: int, odd: str) -> dict:
    p = {"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}",
                      "labels": {"app": "x"}, "managedFields": [{"manager": "m"}],
                      "annotations": {"note": '},{"metadata":{"name":"fake"}}'}},
         "spec": {"nodeName": f"n{i % 3}", "volumes": [{"name": "v", "emptyDir": {}}],
                  "containers": [{"name": "c", "image": "img", "env": [{"name": "A", "value": "b"}],
                                  "resources": {"requests": {"cpu": "500m"},
                                                "limits": {"nvidia.com/gpu": "1"}},
                                  "ports": [{"containerPort": 22, "hostPort": 2222,
                                             "protocol": "TCP"}]}]},
         "status": {"phase": "Running", "podIP": "10.0.0.1",
                    "containerStatuses": [{"name": "c", "ready": True}]}}
    if odd == "nested":  # an array of objects that begin with "metadata", inside the item
        p["spec"]["templates"] = [{"metadata": {"a": 1}}, {"metadata": {"b": 2}}]
    elif odd == "type":  # a field of a type the projection refuses
        p["status"]["phase"] = 3
    elif odd == "order":  # an item that does not begin with its metadata
        p = {"spec": p["spec"], "metadata": p["metadata"]}
    return p


LISTS = st.lists(st.sampled_from(["plain", "plain", "plain", "nested", "type", "order"]),
                 max_size=30)


@settings(max_examples=200, deadline=None)
@given(LISTS, st.integers(1, 3000), st.booleans(), st.booleans())
def test_projected_parse_is_the_generic_parse_projected(kinds, chunk, tail, spaced):
    items = [pod(i, odd) for i, odd in enumerate(kinds)]
    body = {"kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "7", "continue": "abc"}, "items": items}
    if tail:
        body["after"] = {"x": [1, 2]}
    data = json.dumps(body, separators=(", ", ": ") if spaced else (",", ":")).encode()
    head, got = parse_list(iter_chunks(data, chunk), lambda p: p, PlacementPod)
    ghead, whole = parse_list(iter_chunks(data, chunk), lambda p: p)
    assert head == ghead == {k: v for k, v in body.items() if k != "items"}
    assert [project(p) for p in got] == [project(p) for p in whole]
    assert [p["metadata"]["name"] for p in got] == [f"p{i}" for i in range(len(items))]


def test_items_the_projection_reads_are_decoded_in_blocks_not_one_by_one(monkeypatch):
    """The fast path is taken: compact JSON of plain pods never reaches json.loads."""
    data = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                       "items": [pod(i, "plain") for i in range(200)]},
                      separators=(",", ":")).encode()
    calls = []
    real = liststream._one_by_one
    monkeypatch.setattr(liststream, "_one_by_one", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(liststream, "_Reader", _no_generic_beyond_the_last_item())
    _, got = parse_list(iter_chunks(data, 4096), lambda p: p, PlacementPod)
    assert len(got) == 200 and not calls
    assert "managedFields" not in got[0]["metadata"] and "env" not in got[0]["spec"]["containers"][0]


def _no_generic_beyond_the_last_item():
    real = liststream._Reader

    class Reader(real):  # type: ignore[misc, valid-type]
        def __init__(self, chunks):
            super().__init__(chunks)
            self.items = 0

        def value(self):
            v = super().value()
            if isinstance(v, dict) and "metadata" in v:
                self.items += 1
                assert self.items <= 1, "the generic parser read more than the last item"
            return v
    return Reader


@pytest.mark.parametrize("text", [b'{"kind":"PodList","items":[]}', b'{"items":[]}', b"{}",
                                  b'{"metadata":{"resourceVersion":"1"},"items":[],"x":1}'])
def test_small_and_empty_lists(text):
    assert parse_list(iter_chunks(text, 3), lambda p: p, PlacementPod) == \
        parse_list(iter_chunks(text, 3), lambda p: p)


def test_a_long_item_with_a_nested_boundary_does_not_send_the_rest_to_the_generic_parser():
    """An item longer than a block whose nested array looks like an item boundary: the
    items after it are still decoded in blocks (managed fields dropped), not generically."""
    items = [pod(i, "plain") for i in range(60)]
    items[3] = pod(3, "nested")
    items[3]["metadata"]["annotations"]["big"] = "x" * (liststream._BLOCK + 5000)
    data = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items},
                      separators=(",", ":")).encode()
    _, got = parse_list(iter_chunks(data, 8192), lambda p: p, PlacementPod)
    assert [p["metadata"]["name"] for p in got] == [f"p{i}" for i in range(60)]
    assert all("managedFields" not in p["metadata"] for p in got[4:-1])
    assert got[3]["metadata"]["annotations"]["big"] == items[3]["metadata"]["annotations"]["big"]
