"""Multus secondary networks for the test API server: the NetworkAttachmentDefinition CRD and
the admission check that pairs a pod's networks with their device resources.

- The CRD: `k8s.cni.cncf.io/v1` `network-attachment-definitions`, kind
  NetworkAttachmentDefinition, namespaced, short name `net-attach-def` (the Network Plumbing
  Working Group's multi-net spec, github.com/k8snetworkplumbingwg/multi-net-spec; the CRD
  in Multus's deployments/multus-daemonset.yml). A NAD's `metadata.annotations`
  `k8s.v1.cni.cncf.io/resourceName` names the device-plugin resource its interfaces come
  from (an SR-IOV VF pool, an RDMA shared device).
- A pod joins networks with the annotation `k8s.v1.cni.cncf.io/networks`: a comma-separated
  list of `[<namespace>/]<name>[@<interface>]` (or a JSON list of {name, namespace,
  interface}); a name without a namespace is in the pod's.
- The check is the SR-IOV network resources injector's
  (github.com/k8snetworkplumbingwg/network-resources-injector, pkg/webhook/webhook.go:
  parsePodNetworkSelections, getResourceName per NAD, then one unit of each NAD's resource
  per network selection on the first container). The injector adds what is missing; this
  model refuses it instead, so a launcher that forgets the resource is caught rather than
  silently fixed. A network whose NAD does not exist is refused, as the injector refuses
  it ("could not find network attachment definition"). The denial reads like any
  webhook's (k8s.io/apiserver pkg/admission/plugin/webhook/errors/statuserror.go,
  ToStatusErr: `admission webhook "<name>" denied the request: ...`, and 400 where the
  webhook gives no code, as the injector's toAdmissionResponse does not).
"""

from __future__ import annotations

import json
from decimal import Decimal

from . import errors
from .podutil import container_requests
from .resources import ResourceType

GROUP, VERSION = "k8s.cni.cncf.io", "v1"
NAD = ResourceType(GROUP, VERSION, "network-attachment-definitions", "NetworkAttachmentDefinition",
                   True, singular="network-attachment-definition", short_names=("net-attach-def",),
                   custom=True)
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
WEBHOOK = "network-resources-injector-mutating-config.k8s.cni.cncf.io"


def nad(name: str, namespace: str = "default", resource: str | None = None,
        cni: str = "sriov") -> dict:
    """A NetworkAttachmentDefinition as a cluster admin writes one."""
    meta: dict = {"name": name, "namespace": namespace}
    if resource:
        meta["annotations"] = {RESOURCE_ANNOTATION: resource}
    config = {"cniVersion": "0.3.1", "name": name, "type": cni,
              "ipam": {"type": "whereabouts", "range": "192.168.100.0/24"}}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NetworkAttachmentDefinition",
            "metadata": meta, "spec": {"config": json.dumps(config)}}


def selections(value: str, namespace: str) -> list[tuple[str, str]]:
    """(namespace, name) per network the annotation names, in order."""
    value = value.strip()
    if value.startswith("["):
        return [(e.get("namespace") or namespace, e["name"]) for e in json.loads(value)]
    out = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        ns, _, name = item.rpartition("/")
        out.append((ns or namespace, name.split("@", 1)[0]))
    return out


def install_multus(server) -> None:
    """Serve the NAD CRD and run the injector's check on every new pod."""
    server.registry.add(NAD)

    def webhook(rt, obj: dict, store) -> None:
        if rt.key != "/pods":
            return
        meta = obj.get("metadata") or {}
        value = (meta.get("annotations") or {}).get(NETWORKS_ANNOTATION)
        if not value:
            return
        ns = meta.get("namespace", "default")

        def deny(message: str):
            return errors.bad_request(f'admission webhook "{WEBHOOK}" denied the request: '
                                      f"{message}")
        try:
            wanted = selections(value, ns)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise deny(f"could not parse the {NETWORKS_ANNOTATION} annotation {value!r}") from None
        need: dict[str, int] = {}
        for net_ns, net in wanted:
            found = store.get(NAD.key, net_ns, net)
            if found is None:
                raise deny(f"could not find network attachment definition '{net_ns}/{net}'")
            resource = (found["metadata"].get("annotations") or {}).get(RESOURCE_ANNOTATION)
            if resource:
                need[resource] = need.get(resource, 0) + 1
        containers = (obj.get("spec") or {}).get("containers") or []
        for resource, count in need.items():
            have = max((container_requests(c).get(resource, Decimal(0)) for c in containers),
                       default=Decimal(0))
            if have < count:
                raise deny(f"the pod names {count} network(s) of resource {resource} and "
                           f"requests {have} of it")

    server.admission.webhooks.append(webhook)
