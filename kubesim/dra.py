"""Dynamic Resource Allocation (resource.k8s.io/v1) for the test API server.

Models what a 1.34 cluster with NVIDIA's GPU DRA driver does for a pod that names a
ResourceClaimTemplate, in the order the real components do it:
1. the resourceclaim controller (kube-controller-manager) creates a ResourceClaim from the
   template, owned by the pod, named `<pod>-<claim name>-<suffix>`, and records it in the pod's
   `status.resourceClaimStatuses`;
2. kube-scheduler's DynamicResources plugin allocates devices from the ResourceSlices of a
   node the pod may run on: devices of the DeviceClass's driver, not held by another claim,
   matching every CEL selector, `count` of them per request, and every `matchAttribute`
   constraint over the requests it names (all of the claim's when it names none); it writes
   `status.allocation` (results of driver/pool/device, and the node selector) and
   `status.reservedFor` (the pod), then binds the pod to that node.
   The search is the structured allocator's (k8s.io/dynamic-resource-allocation/structured,
   allocator.go): requests in order, `count` devices each, candidates in slice order, and
   backtracking when a later device cannot satisfy a constraint. A matchAttribute
   constraint (matchAttributeConstraint.add) ignores requests it does not name, rejects a
   device without the attribute, takes the first device's value, and then only devices
   with the same typed value; a fully qualified name `<domain>/<id>` also finds the plain
   `<id>` of a device whose driver is that domain (lookupAttribute).
(Kubernetes docs, "Dynamic Resource Allocation", https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/.)
The CEL evaluator understands only the selector forms hvdk8s emits (`mpijob.k8s.dra`):
`device.attributes["<domain>"].<attr> in [<string>, ...]`, `device.attributes["<domain>"].<attr>
== <string>` and `device.driver == <string>`, joined by `&&`; anything else fails allocation
with the expression named, as a real cluster fails a claim it cannot satisfy.
ResourceSlices come from `gpu_slice`: the attributes of NVIDIA's driver
(github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/deviceinfo.go), and from
`nic_slice`: a NIC driver's, DraNet's (github.com/google/dranet, driver `dra.net`, DeviceClass
`dranet`: per interface `ifName`, `rdma` (bool), `pciAddress`, and the standard
`resource.kubernetes.io/pcieRoot`), the attribute GPU-NIC pairing matches on.
"""

from __future__ import annotations

import json
import re

from .controller import Loop
from .podutil import is_terminal
from .resources import ResourceType
from .rest import bind_pod
from .scheduler import affinity_matches
from .util import now_rfc3339

GROUP, VERSION = "resource.k8s.io", "v1"
TYPES = [
    ResourceType(GROUP, VERSION, "resourceslices", "ResourceSlice", False),
    ResourceType(GROUP, VERSION, "resourceclaims", "ResourceClaim", True, subresources=("status",)),
    ResourceType(GROUP, VERSION, "resourceclaimtemplates", "ResourceClaimTemplate", True),
    ResourceType(GROUP, VERSION, "deviceclasses", "DeviceClass", False),
]
DRIVER = "gpu.nvidia.com"
NIC_DRIVER, NIC_CLASS = "dra.net", "dranet"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# Allocation steps before a claim is given up (the real allocator is bounded by a timeout).
MAX_STEPS = 200_000
_IN = re.compile(r'^device\.attributes\["([^"]+)"\]\.(\w+)\s+in\s+(\[.*\])$')
_EQ = re.compile(r'^device\.attributes\["([^"]+)"\]\.(\w+)\s*==\s*(".*"|true|false)$')
_DRIVER = re.compile(r'^device\.driver\s*==\s*(".*")$')


class CelError(ValueError):
    """An expression outside the forms this evaluator knows."""


def _attr_value(device: dict, domain: str, name: str, driver: str):
    attrs = device.get("attributes") or {}
    # Unqualified attribute names belong to the device's own driver domain.
    value = attrs.get(f"{domain}/{name}") or (attrs.get(name) if domain == driver else None)
    if not value:
        return None
    return next((value[k] for k in ("string", "int", "version", "bool") if k in value), None)


def _typed_attr(device: dict, qualified: str, driver: str):
    """The typed value ({"string": ...}) of a fully qualified attribute, or None."""
    domain, _, name = qualified.rpartition("/")
    attrs = device.get("attributes") or {}
    value = attrs.get(qualified) or (attrs.get(name) if domain == driver else None)
    return json.dumps(value, sort_keys=True) if value else None


def cel_matches(expression: str, device: dict, driver: str) -> bool:
    for term in (t.strip() for t in expression.split("&&")):
        if m := _IN.match(term):
            values = json.loads(m.group(3))
            if _attr_value(device, m.group(1), m.group(2), driver) not in values:
                return False
        elif m := _EQ.match(term):
            if _attr_value(device, m.group(1), m.group(2), driver) != json.loads(m.group(3)):
                return False
        elif m := _DRIVER.match(term):
            if driver != json.loads(m.group(1)):
                return False
        else:
            raise CelError(f"unsupported CEL expression {term!r}")
    return True


def gpu_slice(node: str, uuids: list[str], pcie_roots: list[str] | None = None,
              product: str = "Tesla-V100-SXM2-16GB") -> dict:
    """The ResourceSlice NVIDIA's driver publishes for a node's full GPUs."""
    devices = []
    for minor, uuid in enumerate(uuids):
        attrs = {"type": {"string": "gpu"}, "uuid": {"string": uuid},
                 "productName": {"string": product}, "brand": {"string": "Tesla"},
                 "architecture": {"string": "Volta"}, "cudaComputeCapability": {"version": "7.0.0"},
                 "driverVersion": {"version": "550.54.15"}, "cudaDriverVersion": {"version": "12.4.0"},
                 "pcieBusID": {"string": f"0000:{0x10 + minor:02x}:00.0"},
                 "addressingMode": {"string": "None"}}
        if pcie_roots:
            attrs["resource.kubernetes.io/pcieRoot"] = {"string": pcie_roots[minor]}
        devices.append({"name": f"gpu-{minor}", "attributes": attrs,
                        "capacity": {"memory": {"value": "16Gi"}}})
    return node_slice(f"{node}-{DRIVER}-gpus", DRIVER, node, devices)


def nic_slice(node: str, nics: list[tuple[str, str | None]], rdma: bool = True) -> dict:
    """The ResourceSlice DraNet publishes for a node's interfaces: (name, pcieRoot or None)."""
    devices = []
    for i, (name, root) in enumerate(nics):
        attrs = {"ifName": {"string": name}, "rdma": {"bool": rdma},
                 "pciAddress": {"string": f"0000:{0x80 + i:02x}:00.0"}}
        if root:
            attrs[PCIE_ROOT] = {"string": root}
        devices.append({"name": name, "attributes": attrs})
    return node_slice(f"{node}-{NIC_DRIVER}", NIC_DRIVER, node, devices)


def node_slice(name: str, driver: str, node: str, devices: list[dict]) -> dict:
    """A ResourceSlice of one node's devices, as a kubelet plugin publishes it: the pool is
    named after the node and held whole in this one slice."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


class DraController(Loop):
    """The resourceclaim controller plus kube-scheduler's DynamicResources plugin."""

    name = "dra"

    def __init__(self, server, tick: float = 0.02):
        super().__init__(tick)
        self.server = server
        self.store = server.store
        self.failures: dict[str, str] = {}  # pod uid -> why allocation failed (for tests)

    def _key(self, plural: str) -> str:
        return f"{GROUP}/{plural}"

    def _step(self) -> None:
        st = self.store
        with st.lock:
            pods = [p for p in st.items("/pods") if p["spec"].get("resourceClaims")
                    and not p["spec"].get("nodeName") and not is_terminal(p)
                    and not p["metadata"].get("deletionTimestamp")]
            if not pods:
                return
            nodes = sorted(st.items("/nodes"), key=lambda n: n["metadata"]["name"])
        for pod in pods:
            claims = self._claims_for(pod)
            if claims is None:
                continue
            self._allocate_and_bind(pod, claims, nodes)

    # -- 1. claims from templates --------------------------------------------------------------
    def _claims_for(self, pod: dict) -> list[dict] | None:
        m = pod["metadata"]
        ns = m["namespace"]
        out = []
        statuses = {s["name"]: s.get("resourceClaimName")
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        for ref in pod["spec"]["resourceClaims"]:
            if ref.get("resourceClaimName"):
                claim = self.store.get(self._key("resourceclaims"), ns, ref["resourceClaimName"])
            elif statuses.get(ref["name"]):
                claim = self.store.get(self._key("resourceclaims"), ns, statuses[ref["name"]])
            else:
                template = self.store.get(self._key("resourceclaimtemplates"), ns,
                                          ref.get("resourceClaimTemplateName") or "")
                if template is None:
                    return None  # the real controller waits for the template too
                claim = self.server.create({
                    "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
                    "metadata": {"generateName": f"{m['name']}-{ref['name']}-", "namespace": ns,
                                 "annotations": {"resource.kubernetes.io/pod-claim-name": ref["name"]},
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                                      "name": m["name"], "uid": m["uid"],
                                                      "controller": True,
                                                      "blockOwnerDeletion": True}]},
                    "spec": template["spec"]["spec"]})
                name = claim["metadata"]["name"]

                def record(p, ref_name=ref["name"], claim_name=name):
                    st = p.setdefault("status", {}).setdefault("resourceClaimStatuses", [])
                    st.append({"name": ref_name, "resourceClaimName": claim_name})
                self.store.mutate("/pods", ns, m["name"], record)
            if claim is None:
                return None
            out.append(claim)
        return out

    # -- 2. allocation -------------------------------------------------------------------------
    def _taken(self) -> set[tuple[str, str, str]]:
        taken = set()
        for c in self.store.items(self._key("resourceclaims")):
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                taken.add((r.get("driver"), r.get("pool"), r.get("device")))
        return taken

    def _allocate_and_bind(self, pod: dict, claims: list[dict], nodes: list[dict]) -> None:
        pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        allocated_nodes = {self._node_of(c) for c in claims if c not in pending}
        taken = self._taken()
        why = "no node matches the pod's node affinity"
        for node in nodes:
            name = node["metadata"]["name"]
            if not affinity_matches(pod, node) or (allocated_nodes and allocated_nodes != {name}):
                continue
            plan, why = self._fit(pending, name, taken)
            if plan is None:
                continue
            for claim, results in plan:
                self._write_allocation(claim, results, name, pod)
            self.store.mutate("/pods", pod["metadata"]["namespace"], pod["metadata"]["name"],
                              lambda p, n=name: bind_pod(p, n) if not p["spec"].get("nodeName") else False)
            self.failures.pop(pod["metadata"]["uid"], None)
            return
        self.failures[pod["metadata"]["uid"]] = why

    def _node_of(self, claim: dict) -> str | None:
        terms = (((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}).get(
            "nodeSelectorTerms") or []
        for t in terms:
            for f in t.get("matchFields") or []:
                if f.get("key") == "metadata.name" and f.get("values"):
                    return f["values"][0]
        return None

    def _fit(self, claims: list[dict], node: str, taken: set) -> tuple[list | None, str]:
        slices = [s for s in self.store.items(self._key("resourceslices"))
                  if s["spec"].get("nodeName") == node]
        used = set(taken)
        plan = []
        for claim in claims:
            slots = []  # (request, candidates), `count` times per request
            for req in claim["spec"]["devices"].get("requests") or []:
                exactly = req.get("exactly") or {}
                dc = self.store.get(self._key("deviceclasses"), "", exactly.get("deviceClassName", ""))
                if dc is None:
                    return None, f"device class {exactly.get('deviceClassName')} does not exist"
                selectors = [s["cel"]["expression"] for s in (dc["spec"].get("selectors") or [])
                             + (exactly.get("selectors") or [])]
                candidates = []
                for s in slices:
                    drv, pool = s["spec"]["driver"], s["spec"]["pool"]["name"]
                    for d in s["spec"].get("devices") or []:
                        if (drv, pool, d["name"]) in used:
                            continue
                        try:
                            ok = all(cel_matches(e, d, drv) for e in selectors)
                        except CelError as exc:
                            return None, str(exc)
                        if ok:
                            candidates.append((drv, pool, d))
                count = int(exactly.get("count") or 1)
                if len(candidates) < count:
                    return None, (f"cannot allocate all claims: {node} has {len(candidates)} free "
                                  f"matching device(s) for request {req['name']}, needs {count}")
                slots += [(req["name"], candidates)] * count
            constraints = [(set(c.get("requests") or ()), c["matchAttribute"])
                           for c in claim["spec"]["devices"].get("constraints") or []
                           if c.get("matchAttribute")]
            chosen = _search(slots, constraints)
            if chosen is None:
                return None, (f"cannot allocate all claims: no devices of {node} satisfy the "
                              f"constraints of claim {claim['metadata'].get('name')}")
            results = []
            for request, drv, pool, d in chosen:
                used.add((drv, pool, d["name"]))
                results.append({"request": request, "driver": drv, "pool": pool,
                                "device": d["name"]})
            plan.append((claim, results))
        return plan, ""

    def _write_allocation(self, claim: dict, results: list, node: str, pod: dict) -> None:
        m = claim["metadata"]

        def edit(c):
            status = c.setdefault("status", {})
            status["allocation"] = {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                "allocationTimestamp": now_rfc3339()}
            status["reservedFor"] = [{"resource": "pods", "name": pod["metadata"]["name"],
                                      "uid": pod["metadata"]["uid"]}]
        self.store.mutate(self._key("resourceclaims"), m["namespace"], m["name"], edit)


def _search(slots: list, constraints: list) -> list | None:
    """The first devices, one per slot in order, that keep every constraint (upstream's
    depth-first allocateOne with matchAttributeConstraint add/remove); None if none do."""
    values: list = [None] * len(constraints)
    counts = [0] * len(constraints)
    picked: list = []
    in_use: set = set()
    steps = 0

    def go(i: int) -> bool:
        nonlocal steps
        if i == len(slots):
            return True
        request, candidates = slots[i]
        for drv, pool, d in candidates:
            steps += 1
            if steps > MAX_STEPS or (drv, pool, d["name"]) in in_use:
                continue
            added = []
            for k, (names, attribute) in enumerate(constraints):
                if names and request not in names:
                    continue  # the constraint does not apply to this request
                value = _typed_attr(d, attribute, drv)
                if value is None or (counts[k] and value != values[k]):
                    break
                added.append((k, value))
            else:
                for k, value in added:
                    values[k] = value if counts[k] == 0 else values[k]
                    counts[k] += 1
                in_use.add((drv, pool, d["name"]))
                picked.append((request, drv, pool, d))
                if go(i + 1):
                    return True
                picked.pop()
                in_use.discard((drv, pool, d["name"]))
                for k, _ in added:
                    counts[k] -= 1
        return False

    return list(picked) if go(0) else None


def _device_class(server, name: str, driver: str) -> None:
    if server.get("deviceclasses", name) is None:
        server.create({"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
                       "metadata": {"name": name},
                       "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})


def install_dra(server, publish: dict[str, list[str]] | None = None,
                pcie_roots: dict[str, list[str]] | None = None,
                nics: dict[str, list[tuple[str, str | None]]] | None = None) -> DraController:
    """Serve resource.k8s.io/v1, create the gpu.nvidia.com DeviceClass, publish a slice per
    {node: [GPU UUIDs]} (with {node: [pcieRoot per GPU]}), and with `nics` DraNet's DeviceClass
    and a slice per {node: [(interface, pcieRoot)]}; run the allocator (threaded when the
    server's loops are)."""
    for rt in TYPES:
        server.registry.add(rt)
    _device_class(server, DRIVER, DRIVER)
    for node, uuids in (publish or {}).items():
        server.create(gpu_slice(node, uuids, (pcie_roots or {}).get(node)))
    if nics:
        _device_class(server, NIC_CLASS, NIC_DRIVER)
        for node, found in nics.items():
            server.create(nic_slice(node, found))
    server.dra = DraController(server, server.tick)
    if server.controllers and server._httpd is not None:
        server.dra.start()
    return server.dra
