"""What DRA says about GPUs: ResourceSlices (the devices each node publishes) and
ResourceClaims (which of them are allocated), as the resource.k8s.io/v1 API returns them.

A ResourceSlice's `spec.driver`, `spec.pool.name` and `spec.nodeName` say whose devices
`spec.devices[]` are; a device's attribute values are typed (`string`, `int`, `bool`,
`version`). A claim's `status.allocation.devices.results[]` names (driver, pool, device)
per request (Kubernetes API reference, resource.k8s.io/v1 ResourceSlice and ResourceClaim).
NVIDIA's driver names a full GPU `gpu-<minor>` (mpijob.k8s.dra), so the index placement uses is
the minor number. Pure.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from mpijob.scheduling.dra_devices import (
    DRIVER,
    NIC_DRIVERS,
    NIC_RDMA_ATTRIBUTE,
    PCIE_ROOT,
    DraDevice,
    DraNic,
)

_GPU_NAME = re.compile(r"^gpu-(\d+)$")


def _attr(device: dict, name: str, driver: str | None = None):
    """A typed attribute's value; an unqualified name is in the driver's own domain, so
    `<driver>/<name>` and `<name>` are the same attribute (the structured allocator's
    lookupAttribute)."""
    attrs = device.get("attributes") or {}
    value = attrs.get(name) or (attrs.get(f"{driver}/{name}") if driver else None) or {}
    for kind in ("string", "int", "version", "bool"):
        if kind in value:
            return value[kind]
    return None


@dataclass
class DraInventory:
    devices: dict[str, list[DraDevice]] = field(default_factory=dict)  # node -> GPUs
    allocated: dict[str, set[int]] = field(default_factory=dict)  # node -> GPU indices
    # "namespace/claim" -> [(node, device name)] for `get`
    claims: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # "namespace/pod" -> "namespace/claim"


def inventory(slices: list[dict], claims: list[dict], driver: str = DRIVER) -> DraInventory:
    inv = DraInventory()
    where: dict[tuple[str, str, str], tuple[str, int]] = {}
    by_node: dict[str, list[DraDevice]] = defaultdict(list)
    for s in slices:
        spec = s.get("spec") or {}
        node, pool = spec.get("nodeName"), (spec.get("pool") or {}).get("name", "")
        if spec.get("driver") != driver or not node:
            continue
        for d in spec.get("devices") or []:
            match = _GPU_NAME.match(d.get("name") or "")
            uuid = _attr(d, "uuid")
            if not match or not isinstance(uuid, str) or _attr(d, "type") not in (None, "gpu"):
                continue  # MIG and VFIO devices are not whole GPUs
            dev = DraDevice(name=d["name"], index=int(match.group(1)), uuid=uuid, driver=driver,
                            pcie_root=_attr(d, PCIE_ROOT), pool=pool)
            by_node[node].append(dev)
            where[(driver, pool, d["name"])] = (node, dev.index)
    inv.devices = {n: sorted(ds, key=lambda d: d.index) for n, ds in by_node.items()}
    for c in claims:
        m = c.get("metadata") or {}
        key = f"{m.get('namespace', '')}/{m.get('name', '')}"
        results = ((((c.get("status") or {}).get("allocation") or {}).get("devices") or {})
                   .get("results") or [])
        got = []
        for r in results:
            hit = where.get((r.get("driver"), r.get("pool"), r.get("device")))
            if hit is not None:
                inv.allocated.setdefault(hit[0], set()).add(hit[1])
                got.append((hit[0], r["device"]))
        if got:
            inv.claims[key] = got
        for ref in (c.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods" and ref.get("name"):
                inv.owners[f"{m.get('namespace', '')}/{ref['name']}"] = key
    return inv


def slice_cliques(slices: list[dict], attribute: str) -> dict[str, str]:
    """node -> the `attribute` string of its published devices (mpijob.scheduling.nvlink):
    the NVLink clique where a driver publishes one."""
    out: dict[str, str] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        for d in spec.get("devices") or []:
            value = _attr(d, attribute)
            if node and isinstance(value, str) and value:
                out.setdefault(node, value)
    return out


def free_nics(slices: list[dict], claims: list[dict]) -> dict[str, list[DraNic]]:
    """node -> the NICs a NIC DRA driver (mpijob.scheduling.dra_devices.NIC_DRIVERS) publishes there that
    no claim holds; of a driver that marks RDMA, only those marked."""
    taken = {(r.get("driver"), r.get("pool"), r.get("device"))
             for c in claims
             for r in ((((c.get("status") or {}).get("allocation") or {}).get("devices") or {})
                       .get("results") or [])}
    out: dict[str, list[DraNic]] = defaultdict(list)
    for s in slices:
        spec = s.get("spec") or {}
        driver, node = spec.get("driver"), spec.get("nodeName")
        pool = (spec.get("pool") or {}).get("name", "")
        if driver not in NIC_DRIVERS or not node:
            continue
        for d in spec.get("devices") or []:
            marker = NIC_RDMA_ATTRIBUTE.get(driver)
            if marker and _attr(d, marker, driver) is not True:
                continue
            if (driver, pool, d.get("name")) in taken or not d.get("name"):
                continue
            root = _attr(d, PCIE_ROOT)
            out[node].append(DraNic(name=d["name"], driver=driver, pool=pool,
                                    pcie_root=root if isinstance(root, str) else None))
    return {n: sorted(ns, key=lambda x: (x.driver, x.pool, x.name)) for n, ns in out.items()}
