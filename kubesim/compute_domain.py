"""NVIDIA's ComputeDomain (resource.nvidia.com/v1beta1) for the test API server.

Models what the DRA driver's controller does with a ComputeDomain, from its source
(github.com/NVIDIA/k8s-dra-driver-gpu at 2240711):
- cmd/compute-domain-controller/computedomain.go onAddOrUpdate: adds its finalizer
  `resource.nvidia.com/computeDomain` to the domain, then creates the workload
  ResourceClaimTemplate named `spec.channel.resourceClaimTemplate.name` in the domain's
  namespace (WorkloadResourceClaimTemplateManager.Create; at most one per domain uid);
- templates/compute-domain-workload-claim-template.tmpl.yaml: that template carries the
  same finalizer, the labels `resource.nvidia.com/computeDomain: <domain uid>` and
  `resource.nvidia.com/computeDomainTarget: Workload`, and one request `channel` of
  DeviceClass `compute-domain-default-channel.nvidia.com` with the opaque
  ComputeDomainChannelConfig (domainID = the domain's uid, allocationMode);
- on deletion (a deletionTimestamp): deletes the template, removes the template's
  finalizer, then its own from the domain, which completes the deletion.
`install_compute_domains` also publishes, per node, the ResourceSlice of channel devices
the compute-domain kubelet plugin publishes (cmd/compute-domain-kubelet-plugin/
deviceinfo.go: device `channel-<id>` with attributes `type: channel` and `id`) and the
channel DeviceClass (deployments/helm/.../deviceclass-compute-domain-default-channel.yaml:
driver compute-domain.nvidia.com, type channel), so the DRA model allocates a channel to
each worker's claim. The IMEX daemons themselves are not modelled.
"""

from __future__ import annotations

from copy import deepcopy

from . import errors
from .controller import Loop
from .dra import node_slice
from .resources import ResourceType

GROUP, VERSION = "resource.nvidia.com", "v1beta1"
TYPES = [ResourceType(GROUP, VERSION, "computedomains", "ComputeDomain", True,
                      subresources=("status",))]
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
FINALIZER = LABEL = "resource.nvidia.com/computeDomain"
TARGET_LABEL = "resource.nvidia.com/computeDomainTarget"
_RCT = "resource.k8s.io/resourceclaimtemplates"
_CD = f"{GROUP}/computedomains"


def channel_template(cd: dict) -> dict:
    m = cd["metadata"]
    channel = cd["spec"]["channel"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": channel["resourceClaimTemplate"]["name"],
                         "namespace": m["namespace"], "finalizers": [FINALIZER],
                         "labels": {LABEL: m["uid"], TARGET_LABEL: "Workload"}},
            "spec": {"spec": {"devices": {
                "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                "config": [{"requests": ["channel"], "opaque": {"driver": DRIVER, "parameters": {
                    "apiVersion": f"{GROUP}/{VERSION}", "kind": "ComputeDomainChannelConfig",
                    "domainID": m["uid"],
                    "allocationMode": channel.get("allocationMode") or "Single"}}}]}}}}


def channel_slice(node: str) -> dict:
    return node_slice(f"{node}-{DRIVER}-channels", DRIVER, node, [
        {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}])


class ComputeDomainController(Loop):
    name = "compute-domain"

    def __init__(self, store, registry, objects, tick: float = 0.02):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects

    def _rt(self, key: str):
        return self.registry.by_key(key)

    def _step(self) -> None:
        for cd in self.store.items(_CD):
            if cd["metadata"].get("deletionTimestamp"):
                self._remove(cd)
            else:
                self._ensure(cd)

    def _templates(self, cd: dict) -> list[dict]:
        return [t for t in self.store.items(_RCT, cd["metadata"]["namespace"])
                if (t["metadata"].get("labels") or {}).get(LABEL) == cd["metadata"]["uid"]]

    def _set_finalizers(self, key: str, obj: dict, finalizers: list[str]) -> None:
        new = deepcopy(obj)
        new["metadata"]["finalizers"] = finalizers
        m = new["metadata"]
        self.objects.update(self._rt(key), m.get("namespace") or "", m["name"], new)

    def _ensure(self, cd: dict) -> None:
        if FINALIZER not in (cd["metadata"].get("finalizers") or []):
            self._set_finalizers(_CD, cd, [*(cd["metadata"].get("finalizers") or []), FINALIZER])
        if not self._templates(cd):
            template = channel_template(cd)
            try:
                self.objects.create(self._rt(_RCT), template, cd["metadata"]["namespace"])
            except errors.ApiError as exc:
                if exc.code != 409:  # a template of that name exists: the driver retries
                    raise

    def _remove(self, cd: dict) -> None:
        for t in self._templates(cd):
            m = t["metadata"]
            if not m.get("deletionTimestamp"):
                self.objects.delete(self._rt(_RCT), m["namespace"], m["name"])
            current = self.store.get(_RCT, m["namespace"], m["name"])
            if current is not None:
                self._set_finalizers(_RCT, current, [f for f in current["metadata"].get(
                    "finalizers") or [] if f != FINALIZER])
        current = self.store.get(_CD, cd["metadata"]["namespace"], cd["metadata"]["name"])
        if current is not None:
            self._set_finalizers(_CD, current, [f for f in current["metadata"].get("finalizers")
                                                or [] if f != FINALIZER])


def install_compute_domains(server, nodes: list[str]) -> ComputeDomainController:
    """Serve ComputeDomain (after install_dra), the channel DeviceClass, a channel slice per
    node, and run the driver's controller (threaded when the server's loops are)."""
    for rt in TYPES:
        server.registry.add(rt)
    if server.get("deviceclasses", CHANNEL_CLASS) is None:
        server.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                       "metadata": {"name": CHANNEL_CLASS},
                       "spec": {"selectors": [{"cel": {"expression": (
                           f'device.driver == "{DRIVER}" && '
                           f'device.attributes["{DRIVER}"].type == "channel"')}}]}})
    for node in nodes:
        server.create(channel_slice(node))
    server.compute_domains = ComputeDomainController(server.store, server.registry,
                                                     server.objects_api, server.tick)
    if server.controllers and server._httpd is not None:
        server.compute_domains.start()
    return server.compute_domains
