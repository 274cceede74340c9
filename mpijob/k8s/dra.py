"""GPUs requested through Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes
1.34) instead of the device plugin's `nvidia.com/gpu` count: the claim names the devices.

NVIDIA's DRA driver (github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/
deviceinfo.go, GpuInfo.GetDevice) publishes each full GPU in a ResourceSlice as device
`gpu-<minor>` of driver `gpu.nvidia.com`, with the string attributes `uuid`, `productName`,
`brand`, `architecture`, `pcieBusID`, `addressingMode`, `type` ("gpu"), versions
`cudaComputeCapability`, `driverVersion`, `cudaDriverVersion`, and the standard
`resource.kubernetes.io/pcieRoot` where known; its DeviceClass is `gpu.nvidia.com`. DRA's
CEL environment sees `device.driver` and `device.attributes[<domain>]`, not the device name
(Kubernetes docs, "Dynamic Resource Allocation", ResourceClaim device selectors), so the
exact set is selected by UUID:

    device.attributes["gpu.nvidia.com"].uuid in ["GPU-…", "GPU-…"]

The UUIDs are globally unique, so one selector over every planned GPU of the job also
works for a template shared by all workers (operator mode): a pod pinned to a node can only
get that node's planned GPUs. Without planned devices (no snapshot), the claim asks for
`count` GPUs sharing one PCIe root through a `matchAttribute` constraint on
`resource.kubernetes.io/pcieRoot`: the interconnect domain every driver publishes. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = DRIVER  # the DeviceClass NVIDIA's chart installs is named after its driver
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
REQUEST = "gpus"  # the request's name inside the claim, and the pod's claim name
API_VERSION = "resource.k8s.io/v1"


@dataclass(frozen=True)
class DraDevice:
    """One GPU as a DRA driver publishes it."""

    name: str  # gpu-<minor>
    index: int  # the GPU index placement uses (the minor number)
    uuid: str
    driver: str = DRIVER
    pcie_root: str | None = None
    pool: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "index": self.index, "uuid": self.uuid, "driver": self.driver,
                "pcie_root": self.pcie_root, "pool": self.pool}


def uuid_selector(uuids: list[str], driver: str = DRIVER) -> str:
    """The CEL expression matching exactly these GPUs (JSON quoting is CEL string syntax
    for the characters a UUID has)."""
    return f"device.attributes[{json.dumps(driver)}].uuid in [{', '.join(json.dumps(u) for u in uuids)}]"


def device_request(count: int, uuids: list[str] | None, driver: str = DRIVER) -> dict:
    """spec of a ResourceClaim (what a ResourceClaimTemplate's spec.spec holds)."""
    exactly: dict = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": count}
    devices: dict = {"requests": [{"name": REQUEST, "exactly": exactly}]}
    if uuids:
        exactly["selectors"] = [{"cel": {"expression": uuid_selector(sorted(uuids), driver)}}]
    elif count > 1:
        devices["constraints"] = [{"requests": [REQUEST], "matchAttribute": PCIE_ROOT}]
    return {"devices": devices}


def claim_template(name: str, namespace: str, labels: dict, count: int,
                   uuids: list[str] | None) -> dict:
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"spec": device_request(count, uuids)}}


def devices_by_index(devices) -> dict[int, DraDevice]:
    return {d.index: d for d in devices}
