"""A stand-in for nvidia-ml-py's `pynvml`, for machines without a GPU.

It offers exactly the calls `launcher.hardware.nvml_topology` makes, with nvidia-ml-py's signatures,
return types (ctypes structures and arrays where the real one returns them) and error
behaviour (13.615: NOT_SUPPORTED on GPUs without NVLink or MIG, INVALID_ARGUMENT past the
last link, NOT_FOUND for an empty MIG slot, UNINITIALIZED before nvmlInit). The hardware
is described physically (PCIe tree, NVLink cables) and NVML's answers are derived from it,
so the tests compare the collector against `nvidia-smi topo -m`, not against the fake.
"""

from __future__ import annotations

import ctypes
import types
from dataclasses import dataclass, field

# Values from nvidia-ml-py 13.615.
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12

_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
}


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


class nvmlPciInfo_t(ctypes.Structure):  # noqa: N801 - nvidia-ml-py's name
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


def pci_info(bus: int, domain: int = 0) -> nvmlPciInfo_t:
    info = nvmlPciInfo_t()
    info.domain, info.bus, info.device = domain, bus, 0
    info.busIdLegacy = b"%04X:%02X:00.0" % (domain, bus)
    info.busId = b"%08X:%02X:00.0" % (domain, bus)
    return info


@dataclass
class FakeGpu:
    name: str
    uuid: str
    bus: int
    # PCIe path from the top: (socket, host bridge, switch, switch, ...).
    pcie_path: tuple[str, ...]
    numa: int
    cpus: tuple[int, ...]
    pcie_gen: int = 3
    # One entry per NVLink port: (remote device type, remote PCI bus, active).
    ports: list[tuple[int, int, bool]] = field(default_factory=list)
    # None: MIG unsupported (pre-Ampere); else the MIG device UUIDs by slot (None = empty).
    mig: list[str | None] | None = None
    # Compute processes on the GPU: (pid, process name), as nvidia-smi lists them.
    processes: list[tuple[int, str]] = field(default_factory=list)


class c_nvmlProcessInfo_t(ctypes.Structure):  # noqa: N801 - nvidia-ml-py's name
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


@dataclass(frozen=True)
class _Handle:
    index: int
    mig_slot: int | None = None


class FakeNvml(types.ModuleType):
    NVMLError = NVMLError

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        remote_device_type: bool = True,
        numa_call: bool = True,
        init_error: int | None = None,
        uuid_bytes: bool = False,
    ):
        super().__init__("pynvml")
        self.gpus = gpus
        self.initialized = False
        self.init_error = init_error
        self.uuid_bytes = uuid_bytes
        for name, value in globals().items():
            if name.startswith("NVML_"):
                setattr(self, name, value)
        # Calls that older drivers/bindings lack, present only when asked for.
        if remote_device_type:
            self.nvmlDeviceGetNvLinkRemoteDeviceType = self._remote_device_type
        if numa_call:
            self.nvmlDeviceGetNumaNodeId = self._numa_node_id

    # -- library --
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._check()
        self.initialized = False

    def _check(self) -> None:
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: _Handle) -> FakeGpu:
        self._check()
        if not isinstance(handle, _Handle):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[handle.index]

    # -- devices --
    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetUUID(self, handle: _Handle):
        gpu = self._gpu(handle)
        uuid = gpu.uuid if handle.mig_slot is None else gpu.mig[handle.mig_slot]
        return uuid.encode() if self.uuid_bytes else uuid

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> nvmlPciInfo_t:
        return pci_info(self._gpu(handle).bus)

    # -- NVLink --
    def _port(self, device: _Handle, link: int) -> tuple[int, int, bool]:
        gpu = self._gpu(device)
        if not gpu.ports:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not isinstance(link, int) or not 0 <= link < len(gpu.ports):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.ports[link]

    def nvmlDeviceGetNvLinkState(self, device: _Handle, link: int) -> int:
        return NVML_FEATURE_ENABLED if self._port(device, link)[2] else NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: _Handle, link: int) -> nvmlPciInfo_t:
        return pci_info(self._port(device, link)[1])

    def _remote_device_type(self, handle: _Handle, link: int) -> int:
        return self._port(handle, link)[0]

    # -- PCIe --
    def nvmlDeviceGetTopologyCommonAncestor(self, device1: _Handle, device2: _Handle) -> int:
        a, b = self._gpu(device1).pcie_path, self._gpu(device2).pcie_path
        if a[0] != b[0]:
            return NVML_TOPOLOGY_SYSTEM
        if a[1] != b[1]:
            return NVML_TOPOLOGY_NODE
        sa, sb = a[2:], b[2:]
        common = 0
        while common < min(len(sa), len(sb)) and sa[common] == sb[common]:
            common += 1
        if common == 0:
            return NVML_TOPOLOGY_HOSTBRIDGE
        if common == len(sa) == len(sb):
            return NVML_TOPOLOGY_SINGLE
        return NVML_TOPOLOGY_MULTIPLE

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: _Handle) -> int:
        return self._gpu(handle).pcie_gen

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: _Handle) -> int:
        self._gpu(handle)
        return 1  # idle GPUs train their link down

    # -- CPU/NUMA --
    def nvmlDeviceGetCpuAffinity(self, handle: _Handle, cpuSetSize: int):  # noqa: N803
        gpu = self._gpu(handle)
        if not isinstance(cpuSetSize, int) or cpuSetSize < 1:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        words = (ctypes.c_ulonglong * cpuSetSize)()
        for cpu in gpu.cpus:
            if cpu // 64 < cpuSetSize:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def _numa_node_id(self, handle: _Handle) -> int:
        return self._gpu(handle).numa

    # -- processes --
    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list:
        gpu = self._gpu(handle)
        out = []
        for pid, _name in gpu.processes:
            info = c_nvmlProcessInfo_t()
            info.pid, info.usedGpuMemory = pid, 1 << 30
            out.append(info)
        return out

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._check()
        for gpu in self.gpus:
            for p, name in gpu.processes:
                if p == pid:
                    return name
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    # -- MIG --
    def nvmlDeviceGetMigMode(self, device: _Handle) -> list[int]:
        gpu = self._gpu(device)
        if gpu.mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        mode = NVML_DEVICE_MIG_ENABLE if any(gpu.mig) else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: _Handle) -> int:
        gpu = self._gpu(device)
        if gpu.mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return len(gpu.mig)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: _Handle, index: int) -> _Handle:
        gpu = self._gpu(device)
        if gpu.mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= index < len(gpu.mig) or gpu.mig[index] is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(device.index, index)


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-{i:012x}"


def _cpus(socket: int, cores: int = 20) -> tuple[int, ...]:
    # Hyperthreaded dual socket: socket s owns cores s*20.. and their siblings 40 up.
    first = socket * cores
    return tuple(range(first, first + cores)) + tuple(range(2 * cores + first, 3 * cores + first))


# DGX-1 with V100: the hybrid cube-mesh. (GPU, GPU, cables) from NVIDIA's DGX-1 V100
# system architecture whitepaper; every GPU uses all 6 of its NVLink ports.
DGX1_V100_CABLES = (
    (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2),
    (1, 2, 2), (1, 3, 1), (1, 5, 2),
    (2, 3, 2), (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1), (4, 6, 1), (4, 7, 2),
    (5, 6, 2), (5, 7, 1),
    (6, 7, 2),
)  # fmt: skip
GPU_BUS = (0x06, 0x07, 0x0A, 0x0B, 0x85, 0x86, 0x89, 0x8A)


def dgx1_v100(**kwargs) -> FakeNvml:
    """DGX-1: GPUs 0-3 on socket 0, 4-7 on socket 1, two GPUs per PCIe switch."""
    gpus = [
        FakeGpu(
            name="Tesla V100-SXM2-16GB",
            uuid=_uuid(i),
            bus=GPU_BUS[i],
            pcie_path=(f"cpu{i // 4}", f"hb{i // 4}", f"plx{i // 2}"),
            numa=i // 4,
            cpus=_cpus(i // 4),
            pcie_gen=3,
        )
        for i in range(8)
    ]
    for a, b, cables in DGX1_V100_CABLES:
        for _ in range(cables):
            gpus[a].ports.append((NVML_NVLINK_DEVICE_TYPE_GPU, GPU_BUS[b], True))
            gpus[b].ports.append((NVML_NVLINK_DEVICE_TYPE_GPU, GPU_BUS[a], True))
    return FakeNvml(gpus, **kwargs)


def pcie_box(**kwargs) -> FakeNvml:
    """Six PCIe GPUs, no NVLink, one of each kind of path from GPU0:
    GPU1 same switch (PIX), GPU2 a sibling switch under a common one (PXB), GPU3 a root
    port of the same host bridge (PHB), GPU4 the other host bridge of socket 0 (NODE),
    GPU5 on socket 1 (SYS)."""
    layout = [
        ("cpu0", "hb0", "sw0", "sw0a"),
        ("cpu0", "hb0", "sw0", "sw0a"),
        ("cpu0", "hb0", "sw0", "sw0b"),
        ("cpu0", "hb0"),
        ("cpu0", "hb1"),
        ("cpu1", "hb2"),
    ]
    gpus = [
        FakeGpu(
            name="NVIDIA A10",
            uuid=_uuid(0x100 + i),
            bus=0x10 + i,
            pcie_path=path,
            numa=0 if path[0] == "cpu0" else 1,
            cpus=_cpus(0 if path[0] == "cpu0" else 1),
            pcie_gen=4,
        )
        for i, path in enumerate(layout)
    ]
    return FakeNvml(gpus, **kwargs)


NVSWITCH_BUS = (0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC5)


def hgx_a100(**kwargs) -> FakeNvml:
    """HGX A100 8-GPU: every GPU has 12 NVLinks, two to each of six NVSwitches."""
    gpus = [
        FakeGpu(
            name="NVIDIA A100-SXM4-80GB",
            uuid=_uuid(0x200 + i),
            bus=0x20 + i,
            pcie_path=(f"cpu{i // 4}", f"hb{i // 2}", f"sw{i // 2}"),
            numa=i // 4,
            cpus=_cpus(i // 4, cores=64),
            pcie_gen=4,
            ports=[(NVML_NVLINK_DEVICE_TYPE_SWITCH, NVSWITCH_BUS[p // 2], True) for p in range(12)],
            mig=[None] * 7,
        )
        for i in range(8)
    ]
    return FakeNvml(gpus, **kwargs)


def one_h100(**kwargs) -> FakeNvml:
    """A workstation with one H100 SXM5 (MIG capable, MIG off), no NVLink peers."""
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", uuid=_uuid(0x300), bus=0x18,
                  pcie_path=("cpu0", "hb0"), numa=0, cpus=_cpus(0), pcie_gen=5, mig=[None] * 7)
    return FakeNvml([gpu], **kwargs)
