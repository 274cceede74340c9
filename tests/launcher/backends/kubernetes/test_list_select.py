"""Submit's re-check decodes only the planned nodes' objects (snapshot.pods_on and
named_nodes pass over the others by their bytes): what it keeps is what decoding every
object and filtering would keep, for pods however their nodeName is written or hidden (in
an annotation, a nested array starting with "metadata", no node at all, spaced JSON)."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from launcher.backends.kubernetes.liststream import parse_list
from launcher.backends.kubernetes.projections import PlacementNode, PlacementPod
from launcher.backends.kubernetes.snapshot import PodReader, named_nodes, pods_on
from tests.launcher.backends.kubernetes.test_liststream import iter_chunks

NODES = [f"node-{i}" for i in range(6)]


def _pod(i: int, node: str | None, trick: int) -> dict:
    pod = {"metadata": {"name": f"p{i}", "namespace": "default", "annotations": {}},
           "spec": {"containers": [{"name": "c", "resources": {
               "requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": str(i % 3)}}}]},
           "status": {"phase": "Running"}}
    if node is not None:
        pod["spec"]["nodeName"] = node
    if trick == 1:  # the key's text in a string value, quotes escaped
        pod["metadata"]["annotations"]["note"] = f'"nodeName":"{NODES[0]}"'
    if trick == 2:  # a nested array whose objects begin with "metadata": a false boundary
        pod["spec"]["volumes"] = [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]
    return pod


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, *NODES]), st.integers(0, 2)), max_size=40),
       st.sets(st.sampled_from(NODES)), st.sampled_from([7, 300, 1 << 16]),
       st.booleans())
# Found by CI's run: an unbound pod, then a bound one, each with a nested "metadata" array.
@example(pods=[(None, 2), ("node-0", 2)], planned={"node-0"}, read=300, spaced=False)
def test_pods_on_keeps_what_decoding_everything_keeps(pods, planned, read, spaced):
    items = [_pod(i, node, trick) for i, (node, trick) in enumerate(pods)]
    body = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"},
                       "items": items}, separators=(", ", ": ") if spaced else (",", ":"))
    data = body.encode()
    every, chosen = PodReader(set(planned)), PodReader(set(planned))
    _, kept_all = parse_list(iter_chunks(data, read), every.keep, PlacementPod)
    _, kept_sel = parse_list(iter_chunks(data, read), chosen.keep, PlacementPod,
                             pods_on(set(planned)))
    assert every.pods(kept_all) == chosen.pods(kept_sel)


def test_named_nodes_keeps_the_planned_nodes_only():
    nodes = [{"metadata": {"name": n, "labels": {"x": n}}, "status": {"allocatable": {}}}
             for n in NODES * 40]
    data = json.dumps({"kind": "NodeList", "metadata": {}, "items": nodes},
                      separators=(",", ":")).encode()
    planned = {"node-1", "node-4"}

    def keep(n):
        return n["metadata"]["name"] if n["metadata"]["name"] in planned else None

    _, everything = parse_list(iter_chunks(data, 4096), keep, PlacementNode)
    _, selected = parse_list(iter_chunks(data, 4096), keep, PlacementNode,
                             named_nodes(planned))
    assert selected == everything and set(selected) == planned
    item = b'{"metadata":{"name":"node-0","labels":{}}}'
    assert not named_nodes(planned)(item, 0, len(item))
    spaced = b'{"metadata": {"name": "node-0"}}'  # not as the API server writes it: decoded
    assert named_nodes(planned)(spaced, 0, len(spaced))
