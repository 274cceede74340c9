"""Read a node's GPU topology live through NVML (nvidia-ml-py, imported as `pynvml`).

What `nvidia-smi topo -m` prints, from the same NVML calls:
- NVLink: every active link of a GPU (`nvmlDeviceGetNvLinkState`) names its far end
  (`nvmlDeviceGetNvLinkRemotePciInfo`). Links whose far end is another GPU are counted per
  peer, so `NV#` is the number of bonded links of the pair.
- NVSwitch (DGX-2, HGX A100/H100): the far end of every link is a switch, not a GPU. The
  switch fabric joins every GPU to every other at the bandwidth of its switch links, so a
  pair of switch-attached GPUs is `NV<min(switch links of the two)>` (plus any direct
  links), as nvidia-smi reports (NV6 on DGX-2, NV12 on DGX A100, NV18 on DGX H100).
- Pairs without NVLink: the deepest common PCIe ancestor
  (`nvmlDeviceGetTopologyCommonAncestor`) gives PIX/PXB/PHB/NODE/SYS.
- NUMA node, CPU affinity (as a cpulist, "0-19,40-59") and the PCIe generation.
- MIG devices' UUIDs, so that pods holding a MIG slice map to the GPU it lives on.
NICs are not visible to NVML, so `nics` stays empty.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from launcher.errors import UserError
from mpijob.scheduling.topology import Topology

# nvidia-ml-py's constants, used when an old pynvml lacks them.
_TOPOLOGY_CODES = (  # (highest NVML_TOPOLOGY_* level, code), nearest first
    ("NVML_TOPOLOGY_SINGLE", 10, "PIX"),  # INTERNAL (0, same board) is nearer still
    ("NVML_TOPOLOGY_MULTIPLE", 20, "PXB"),
    ("NVML_TOPOLOGY_HOSTBRIDGE", 30, "PHB"),
    ("NVML_TOPOLOGY_NODE", 40, "NODE"),
)
_FARTHEST = "SYS"  # NVML_TOPOLOGY_SYSTEM, and whatever NVML cannot tell
_NVLINK_DEVICE_TYPE_GPU = 0x00
_NVLINK_DEVICE_TYPE_SWITCH = 0x02
_DEFAULT_MAX_LINKS = 18
_MIG_ENABLED = 1
_MIN_CPU_SET_WORDS = 16
SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")


class NvmlUnavailable(UserError):
    """NVML cannot be loaded or initialised: no driver, no GPU, or no pynvml."""


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs of one node as NVML sees them, indexed like nvidia-smi (NVML index order)."""

    gpu_model: str
    uuids: tuple[str, ...]
    links: tuple[tuple[str, ...], ...]
    numa: tuple[int | None, ...]
    cpu_affinity: tuple[str | None, ...]
    pcie_gen: int | None
    # MIG device UUID -> index of the GPU that holds it.
    mig_parents: Mapping[str, int] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return len(self.uuids)

    def topology(self, name: str | None = None) -> Topology:
        return replace(
            Topology.from_links(self.links),
            numa=self.numa,
            cpu_affinity=self.cpu_affinity,
            name=name,
        )


def load_nvml() -> Any:
    """Import and initialise pynvml; `NvmlUnavailable` (one line) when that is impossible."""
    try:
        # lazy: pynvml is optional (hvdk8s[agent])
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(
            f"NVML is unavailable: cannot import pynvml ({exc}); install hvdk8s[agent]"
        ) from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(
            f"NVML is unavailable: {exc}; run on a GPU node with the NVIDIA driver, in a "
            "container started by the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES=all, "
            "NVIDIA_DRIVER_CAPABILITIES=utility)"
        ) from None
    except OSError as exc:  # libnvidia-ml.so present but unloadable
        raise NvmlUnavailable(f"NVML is unavailable: {exc}") from None
    return pynvml


def collect(nvml: Any, *, sysfs: Path = SYSFS_PCI_DEVICES) -> GpuInventory:
    """Everything the agent reports about this node's GPUs. `nvml` is an initialised pynvml."""
    count = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    uuids = tuple(_text(nvml.nvmlDeviceGetUUID(h)) for h in handles)
    names = [_text(nvml.nvmlDeviceGetName(h)) for h in handles]
    pci = [_pci_key(nvml.nvmlDeviceGetPciInfo(h)) for h in handles]
    index_of_bus = {key: i for i, key in enumerate(pci)}

    direct, switch_links = _nvlinks(nvml, handles, index_of_bus)
    links = tuple(
        tuple(
            "X" if i == j else _pair_code(nvml, handles, direct, switch_links, i, j)
            for j in range(count)
        )
        for i in range(count)
    )
    return GpuInventory(
        gpu_model=_model(names),
        uuids=uuids,
        links=links,
        numa=tuple(_numa(nvml, h, key, sysfs) for h, key in zip(handles, pci, strict=True)),
        cpu_affinity=tuple(_cpu_affinity(nvml, h) for h in handles),
        pcie_gen=_pcie_gen(nvml, handles),
        mig_parents=_mig_parents(nvml, handles),
    )


def _nvlinks(nvml, handles, index_of_bus) -> tuple[list[list[int]], list[int]]:
    """Active links per (GPU, peer GPU), and per GPU the active links to NVSwitches."""
    count = len(handles)
    seen = [[0] * count for _ in range(count)]
    switch_links = [0] * count
    max_links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", _DEFAULT_MAX_LINKS)
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    for i, handle in enumerate(handles):
        for link in range(max_links):
            # GPUs without NVLink answer NOT_SUPPORTED, link numbers past the GPU's last
            # INVALID_ARGUMENT: either way the link does not exist.
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link) != enabled:
                    continue
                remote = _pci_key(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link))
            except nvml.NVMLError:
                continue
            kind = _remote_kind(nvml, handle, link, remote in index_of_bus)
            if kind == _NVLINK_DEVICE_TYPE_GPU:
                peer = index_of_bus.get(remote)
                if peer is not None and peer != i:
                    seen[i][peer] += 1
            elif kind == _NVLINK_DEVICE_TYPE_SWITCH:
                switch_links[i] += 1
    # A link exists when both ends report it; the smaller count is the usable one.
    direct = [[min(seen[i][j], seen[j][i]) for j in range(count)] for i in range(count)]
    return direct, switch_links


def _remote_kind(nvml, handle, link: int, remote_is_local_gpu: bool) -> int:
    getter = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    if getter is not None:
        try:
            return getter(handle, link)
        except nvml.NVMLError:
            pass
    # Old drivers: a far end that is none of this node's GPUs is taken for an NVSwitch.
    return _NVLINK_DEVICE_TYPE_GPU if remote_is_local_gpu else _NVLINK_DEVICE_TYPE_SWITCH


def _pair_code(nvml, handles, direct, switch_links, i: int, j: int) -> str:
    links = direct[i][j]
    if switch_links[i] and switch_links[j]:
        links += min(switch_links[i], switch_links[j])
    if links:
        return f"NV{links}"
    try:
        level = nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
    except nvml.NVMLError:
        return _FARTHEST  # unknown path: assume the slowest
    return pcie_code(nvml, level)


def pcie_code(nvml, level: int) -> str:
    """nvidia-smi's code for an NVML_TOPOLOGY_* level (INTERNAL and SINGLE are both PIX)."""
    for const, default, code in _TOPOLOGY_CODES:
        if level <= getattr(nvml, const, default):
            return code
    return _FARTHEST


def _numa(nvml, handle, pci_key, sysfs: Path) -> int | None:
    getter = getattr(nvml, "nvmlDeviceGetNumaNodeId", None)
    if getter is not None:
        try:
            node = getter(handle)
            return node if node >= 0 else None
        except nvml.NVMLError:
            pass
    # Drivers before NVML's NUMA call: the kernel knows the PCI device's node.
    domain, bus, device = pci_key
    path = sysfs / f"{domain:04x}:{bus:02x}:{device:02x}.0" / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def _cpu_affinity(nvml, handle) -> str | None:
    # 64 CPUs a word. os.cpu_count() can undercount (CPU-limited container, offline CPUs),
    # and a short buffer silently drops high CPUs, so ask for at least 1024.
    words = max(_MIN_CPU_SET_WORDS, -(-(os.cpu_count() or 1) // 64))
    try:
        mask = nvml.nvmlDeviceGetCpuAffinity(handle, words)
    except nvml.NVMLError:
        return None
    cpus = [w * 64 + b for w, word in enumerate(mask) for b in range(64) if int(word) >> b & 1]
    return cpulist(cpus) or None


def cpulist(cpus: Iterable[int]) -> str:
    """Linux cpulist form of a CPU set: [0, 1, 2, 5] -> "0-2,5"."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start: int | None = None
    prev: int | None = None
    for cpu in [*ordered, None]:
        if start is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(ranges)


def _pcie_gen(nvml, handles) -> int | None:
    """The slowest GPU's link generation. The maximum, not the current one: idle GPUs
    drop their link to Gen1 to save power."""
    gens = []
    for handle in handles:
        for name in ("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkGeneration"):
            getter = getattr(nvml, name, None)
            if getter is None:
                continue
            try:
                gens.append(int(getter(handle)))
                break
            except nvml.NVMLError:
                continue
    return min(gens) if gens else None


def _mig_parents(nvml, handles) -> dict[str, int]:
    parents: dict[str, int] = {}
    if not hasattr(nvml, "nvmlDeviceGetMigMode"):
        return parents
    enabled = getattr(nvml, "NVML_DEVICE_MIG_ENABLE", _MIG_ENABLED)
    for i, handle in enumerate(handles):
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
            if current != enabled:
                continue
            slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except nvml.NVMLError:  # NOT_SUPPORTED before Ampere
            continue
        for slot in range(slots):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                parents[_text(nvml.nvmlDeviceGetUUID(mig))] = i
            except nvml.NVMLError:  # NOT_FOUND: empty slot
                continue
    return parents


def _model(names: list[str]) -> str:
    distinct = sorted(set(names))
    return " + ".join(distinct) if distinct else "unknown"


def _text(value: str | bytes) -> str:
    # nvidia-ml-py returns str; pynvml releases before 11.5 returned bytes.
    return value.decode() if isinstance(value, bytes) else value


def _pci_key(info) -> tuple[int, int, int]:
    """(domain, bus, device) of an nvmlPciInfo_t: the same device whichever way NVML
    spelled its bus id (8- or 4-digit domain, upper or lower case)."""
    bus_id = _text(getattr(info, "busId", b"") or b"")
    parts = bus_id.replace(".", ":").split(":")
    if len(parts) == 4:
        try:
            return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
        except ValueError:
            pass
    return int(info.domain), int(info.bus), int(info.device)
