"""`list` reads its pods through projections.StatusPod (msgspec skips the containers'
spec): every job row must be what the whole pods give, whatever state the pods are in."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.backends.kubernetes import status as kstatus
from launcher.backends.kubernetes.liststream import parse_list
from launcher.backends.kubernetes.projections import StatusPod
from tests.launcher.backends.kubernetes.test_k8s_status import launcher, root, worker
from tests.launcher.backends.kubernetes.test_liststream import iter_chunks

STATES = st.sampled_from([
    {}, {"phase": "Pending", "waiting": {"reason": "ImagePullBackOff", "message": "no pull"}},
    {"phase": "Pending", "waiting": {"reason": "ContainerCreating"}},
    {"phase": "Failed", "terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    {"phase": "Succeeded", "terminated": {"exitCode": 0}},
    {"phase": "Pending", "unscheduled": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
    {"phase": "Running", "restarts": 3, "gpus": "0,1"},
])


def with_containers_spec(p: dict) -> dict:
    """A pod as the API returns it: the containers' spec, which the projection skips."""
    p["spec"]["containers"][0].update(image="img", env=[{"name": "A", "value": "x" * 50}],
                                      resources={"limits": {"nvidia.com/gpu": "1"}})
    p["spec"]["volumes"] = [{"name": "ssh", "secret": {"secretName": "s"}}]
    p["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    return p


@settings(max_examples=150, deadline=None)
@given(st.lists(STATES, min_size=0, max_size=4), STATES, st.booleans(), st.booleans(),
       st.integers(5, 4000))
def test_list_rows_from_projected_pods_equal_rows_from_whole_pods(workers, launch, has_root,
                                                                  deleting, chunk):
    pods = [with_containers_spec(worker(i, **w)) for i, w in enumerate(workers)]
    pods.append(with_containers_spec(launcher(**launch)))
    if deleting and pods:
        pods[0]["metadata"]["deletionTimestamp"] = "2024-01-01T00:01:00Z"
    roots = [root(workers=max(1, len(workers)))] if has_root else []
    data = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods},
                      separators=(",", ":")).encode()
    _, projected = parse_list(iter_chunks(data, chunk), lambda p: p, StatusPod)
    # All but the last: the generic parser reads the last item (and the list's tail).
    assert all("managedFields" not in p["metadata"] for p in projected[:-1])
    assert kstatus.group_statuses(roots, projected) == kstatus.group_statuses(roots, pods)


def test_the_projection_drops_the_containers_spec():
    p = with_containers_spec(worker(0))
    got = msgspec.json.decode(json.dumps(p).encode(), type=StatusPod)
    assert "containers" not in got["spec"] and got["status"] == p["status"]
