"""The kubelet model's volume mounts (kubesim/kubelet.py): a missing ConfigMap or Secret a
volume needs holds the pod in ContainerCreating with the kubelet's FailedMount event, until
the object appears; an optional one does not."""

from __future__ import annotations

import pytest

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys"},
          "data": {"id_rsa": "a2V5"}}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "files"},
          "data": {"launch.sh": "exit 0\n"}}


def _pod(name: str, volume: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "main", "image": "img:1",
                        "volumeMounts": [{"name": volume["name"], "mountPath": "/etc/x"}]}],
        "volumes": [volume]}}


def _state(srv, name: str) -> tuple[str, dict]:
    pod = srv.get("pods", name)
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or [{}]
    return status.get("phase", ""), statuses[0].get("state") or {}


def _mount_events(srv, name: str) -> list[str]:
    return [e["message"] for e in srv.objects("events", "default")
            if e["involvedObject"]["name"] == name and e["reason"] == "FailedMount"]


@pytest.mark.parametrize("volume, made, said", [
    ({"name": "cfg", "configMap": {"name": "files"}}, CONFIG,
     'MountVolume.SetUp failed for volume "cfg" : configmap "files" not found'),
    ({"name": "ssh", "secret": {"secretName": "keys"}}, SECRET,
     'MountVolume.SetUp failed for volume "ssh" : secret "keys" not found'),
    ({"name": "both", "projected": {"sources": [{"secret": {"name": "keys"}}]}}, SECRET,
     'MountVolume.SetUp failed for volume "both" : secret "keys" not found'),
])
def test_a_missing_object_holds_the_pod_until_it_appears(kube_server, volume, made, said):
    kube_server.create(_pod("p", volume))
    kube_server.wait_for(lambda: _mount_events(kube_server, "p"))
    assert _mount_events(kube_server, "p") == [said]
    phase, state = _state(kube_server, "p")
    assert phase == "Pending" and state["waiting"]["reason"] == "ContainerCreating"
    kube_server.create(made)  # the kubelet tries again: the pod starts
    kube_server.wait_for(lambda: _state(kube_server, "p")[0] == "Running")
    assert _mount_events(kube_server, "p") == [said]  # said once, not on every retry


def test_an_items_key_the_object_lacks_fails_the_mount(kube_server):
    kube_server.create(CONFIG)
    kube_server.create(_pod("k", {"name": "cfg", "configMap": {
        "name": "files", "items": [{"key": "hostfile", "path": "hostfile"}]}}))
    kube_server.wait_for(lambda: _mount_events(kube_server, "k"))
    assert _mount_events(kube_server, "k") == [
        'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent '
        "config key: hostfile"]
    assert _state(kube_server, "k")[0] == "Pending"


@pytest.mark.parametrize("volume", [
    {"name": "cfg", "configMap": {"name": "nowhere", "optional": True}},
    {"name": "ssh", "secret": {"secretName": "nowhere", "optional": True}},
    {"name": "dw", "downwardAPI": {"items": [{"path": "a", "fieldRef": {
        "fieldPath": "metadata.annotations['x.io/a']"}}]}},
])
def test_an_optional_object_or_a_downward_api_volume_starts_at_once(kube_server, volume):
    kube_server.create(_pod("o", volume))
    kube_server.wait_for(lambda: _state(kube_server, "o")[0] == "Running")
    assert _mount_events(kube_server, "o") == []
