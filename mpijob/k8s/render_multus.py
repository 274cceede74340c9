"""The worker pods' Multus secondary networks (`--network NAD[,NAD]`).

Multus attaches the networks a pod's `k8s.v1.cni.cncf.io/networks` annotation names, a
comma-separated list of `[namespace/]name` (github.com/k8snetworkplumbingwg/multi-net-spec,
"Network Attachment Selection Annotation"). A NetworkAttachmentDefinition whose
`k8s.v1.cni.cncf.io/resourceName` annotation names a device resource (an SR-IOV VF pool,
an RDMA shared device) gives the pod an interface from it only if the pod requests one unit
of that resource per listed network; the SR-IOV network resources injector exists to add
that request (github.com/k8snetworkplumbingwg/network-resources-injector). hvdk8s adds it
itself, from the resource the Kubernetes backend's preflight read from each NAD
(`Network.resource`), so the pods are right on clusters without the injector. Where the
plan already requests the same resource (one VF per GPU for RDMA), the larger count stays:
requests and limits of an extended resource must be equal.
Launcher pods join no network: they only run mpirun. Pure: new dicts where it changes them.
"""

from __future__ import annotations

import copy

from mpijob.k8s.render_rdma import is_worker_pod

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"


def network_resources(spec) -> dict[str, int]:
    """Units of each NAD's resource one worker pod needs: one per network listed."""
    out: dict[str, int] = {}
    for net in spec.networks:
        if net.resource:
            out[net.resource] = out.get(net.resource, 0) + 1
    return out


def _patch(meta: dict, pod_spec: dict, spec) -> None:
    meta.setdefault("annotations", {})[NETWORKS_ANNOTATION] = ",".join(n.name for n in spec.networks)
    needs = network_resources(spec)
    if not needs or not pod_spec.get("containers"):
        return
    res = pod_spec["containers"][0].setdefault("resources", {})
    for part in ("limits", "requests"):
        amounts = res.setdefault(part, {})
        for name, count in needs.items():
            amounts[name] = str(max(count, int(amounts.get(name, 0))))


def apply_networks(objects: list[dict], spec) -> list[dict]:
    if not spec.networks:
        return objects
    out = []
    for obj in objects:
        if is_worker_pod(obj):
            obj = copy.deepcopy(obj)
            _patch(obj["metadata"], obj["spec"], spec)
        elif obj.get("kind") == "MPIJob":
            obj = copy.deepcopy(obj)
            template = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
            _patch(template.setdefault("metadata", {}), template["spec"], spec)
        out.append(obj)
    return out
