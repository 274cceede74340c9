"""GPUs and NICs as DRA drivers publish them in ResourceSlices (resource.k8s.io/v1): what
placement chooses among. How a job's claim asks for them is rendering (mpijob.k8s.dra).

NVIDIA's DRA driver (github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/
deviceinfo.go, GpuInfo.GetDevice) publishes each full GPU as device `gpu-<minor>` of driver
`gpu.nvidia.com`, with the standard `resource.kubernetes.io/pcieRoot` where known
(Kubernetes docs, "Standard Device Attributes for Dynamic Resource Allocation";
k8s.io/dynamic-resource-allocation/deviceattribute, StandardDeviceAttributePCIeRoot). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

DRIVER = "gpu.nvidia.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# NIC DRA drivers and the DeviceClass each one's deployment creates: Google's DraNet
# (github.com/google/dranet: driver `dra.net`, DeviceClass `dranet`, bool attribute `rdma`
# on RDMA-capable interfaces) and the SR-IOV VF driver (github.com/k8snetworkplumbingwg/
# dra-driver-sriov, also deployed by NVIDIA's Network Operator: driver and DeviceClass
# `sriovnetwork.k8snetworkplumbingwg.io`).
NIC_DRIVERS = {"dra.net": "dranet",
               "sriovnetwork.k8snetworkplumbingwg.io": "sriovnetwork.k8snetworkplumbingwg.io"}
# The NIC drivers that mark which of their devices do RDMA (others publish only RDMA VFs).
NIC_RDMA_ATTRIBUTE = {"dra.net": "rdma"}


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


@dataclass(frozen=True)
class DraNic:
    """One NIC (or VF) as a NIC DRA driver publishes it."""

    name: str
    driver: str
    pcie_root: str | None = None
    pool: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "driver": self.driver, "pcie_root": self.pcie_root,
                "pool": self.pool}


def devices_by_index(devices) -> dict[int, DraDevice]:
    return {d.index: d for d in devices}
