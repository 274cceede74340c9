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
`resource.kubernetes.io/pcieRoot`: the interconnect domain every driver publishes.

GPU-NIC pairing: where a NIC DRA driver publishes the nodes' NICs too, the claim has one
request per planned GPU (`gpu-<i>`, that GPU's UUID) and one per NIC (`nic-<i>`, the NIC
driver's DeviceClass), and per pair a constraint `{requests: [gpu-<i>, nic-<i>],
matchAttribute: resource.kubernetes.io/pcieRoot}`: the scheduler then gives each GPU a NIC
under its own PCIe root. The attribute is the standard one both drivers publish, in the
format `pci<domain>:<bus>` (Kubernetes docs, "Standard Device Attributes for Dynamic
Resource Allocation"; k8s.io/dynamic-resource-allocation/deviceattribute,
StandardDeviceAttributePCIeRoot). One constraint over `count: N` GPUs and N NICs would
instead put all of them under one root. Pure.
"""

from __future__ import annotations

import json

from mpijob.scheduling.dra_devices import DRIVER, NIC_DRIVERS, NIC_RDMA_ATTRIBUTE, PCIE_ROOT

DEVICE_CLASS = DRIVER  # the DeviceClass NVIDIA's chart installs is named after its driver
REQUEST = "gpus"  # the request's name inside the claim, and the pod's claim name
API_VERSION = "resource.k8s.io/v1"


def nic_selector(driver: str) -> str | None:
    """The CEL expression keeping a driver's RDMA-capable devices, where it marks them."""
    attr = NIC_RDMA_ATTRIBUTE.get(driver)
    return f"device.attributes[{json.dumps(driver)}].{attr} == true" if attr else None


def paired_request(count: int, uuids: list[str], nic_driver: str, driver: str = DRIVER) -> dict:
    """spec of a ResourceClaim for `count` GPUs, each one of `uuids` (the pod's planned
    GPUs, or every planned GPU of the job for a shared template; none: any), each with a
    NIC of `nic_driver` under its PCIe root."""
    wanted = uuid_selector(sorted(uuids), driver) if uuids else None
    nic_class = NIC_DRIVERS.get(nic_driver, nic_driver)
    nic_cel = nic_selector(nic_driver)
    requests: list[dict] = []
    constraints: list[dict] = []
    for i in range(count):
        gpu: dict = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1}
        if wanted:
            gpu["selectors"] = [{"cel": {"expression": wanted}}]
        nic: dict = {"deviceClassName": nic_class, "allocationMode": "ExactCount", "count": 1}
        if nic_cel:
            nic["selectors"] = [{"cel": {"expression": nic_cel}}]
        requests += [{"name": f"gpu-{i}", "exactly": gpu}, {"name": f"nic-{i}", "exactly": nic}]
        constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT})
    return {"devices": {"requests": requests, "constraints": constraints}}


def uuid_selector(uuids: list[str], driver: str = DRIVER) -> str:
    """The CEL expression matching exactly these GPUs (JSON quoting is CEL string syntax
    for the characters a UUID has)."""
    return f"device.attributes[{json.dumps(driver)}].uuid in [{', '.join(json.dumps(u) for u in uuids)}]"


def device_request(count: int, uuids: list[str] | None, driver: str = DRIVER, *,
                   same_root: bool = True) -> dict:
    """spec of a ResourceClaim (what a ResourceClaimTemplate's spec.spec holds); without
    UUIDs, `count` GPUs under one PCIe root, or (`same_root` False) any `count` free."""
    exactly: dict = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": count}
    devices: dict = {"requests": [{"name": REQUEST, "exactly": exactly}]}
    if uuids:
        exactly["selectors"] = [{"cel": {"expression": uuid_selector(sorted(uuids), driver)}}]
    elif count > 1 and same_root:
        devices["constraints"] = [{"requests": [REQUEST], "matchAttribute": PCIE_ROOT}]
    return {"devices": devices}


def claim_template(name: str, namespace: str, labels: dict, count: int,
                   uuids: list[str] | None, nic_driver: str | None = None, *,
                   same_root: bool = True) -> dict:
    """nic_driver: pair each GPU with a NIC of that driver (each pair under one PCIe root)."""
    spec = (paired_request(count, uuids or [], nic_driver) if nic_driver
            else device_request(count, uuids, same_root=same_root))
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"spec": spec}}

