"""GPU topologies of common systems, and the one a node most likely has from its labels.

Matrices as `nvidia-smi topo -m` prints them on the real systems:
- dgx1-v100: DGX-1 with V100 (hybrid cube-mesh). GPUs 0-3 and 4-7 are fully NVLink-joined
  quads; each GPU has 6 NVLink 2 links, two doubled (NV2) and two single (NV1); the two
  quads join through 0-4, 1-5, 2-6, 3-7 (NV2/NV1) and every other cross pair is SYS.
  (DGX-1 V100 system architecture whitepaper; the same matrix is in tests/data/topo.)
- dgx2: DGX-2 / HGX-2, 16 V100 on NVSwitch: every pair NV6.
- dgx-a100: DGX / HGX A100 8-GPU, NVSwitch: every pair NV12.
- dgx-h100: DGX / HGX H100 8-GPU, NVSwitch: every pair NV18.
- hgx-h200: HGX H200 8-GPU, NVSwitch: every pair NV18 (the H100 board with H200 GPUs;
  NVIDIA H200 page: NVLink 900 GB/s = 18 x 50 GB/s both ways).
- hgx-b200: DGX / HGX B200 8-GPU, NVLink 5 switches on the board: every pair NV18 (18
  links per GPU, 1.8 TB/s; NVIDIA DGX B200 data sheet: 14.4 TB/s NVLink for 8 GPUs).
- gb200-nvl72-tray, gb300-nvl72-tray: one compute tray of a GB200 / GB300 NVL72 (two Grace
  superchips, 4 GPUs), the node Kubernetes sees: every pair NV18 through the rack's NVLink
  switch trays (18 trays x 4 GPUs = 72 per NVLink domain; NVIDIA GB200 NVL72 and GB300
  NVL72 pages). The other 17 trays are other nodes of the same NVLink partition
  (mpijob.scheduling.nvlink), not part of this matrix.
- pcie-8gpu-dual-socket: 8 PCIe GPUs, two per PCIe switch (PIX), four per socket (PHB
  between switches), SYS across sockets, as on the 8-GPU PCIe servers in public topo dumps.
- pcie-4gpu-nvlink-pairs: 4 PCIe GPUs on one socket with NVLink bridges joining 0-1 and
  2-3 (NV4, as RTX 3090 / RTX A6000 bridges report); other pairs PHB.
`preset(name)` also accepts `pcie-<N>` (N PCIe GPUs, PHB within a socket, SYS across the
two halves when N > 4) and `uniform-<N>-<CODE>` (every pair the same code), N at most
`MAX_GPUS_PER_NODE` (mpijob.scheduling.topology says why).
"""

from __future__ import annotations

import re
from functools import lru_cache

from mpijob.scheduling.topology import Topology, check_gpu_count, too_many_gpus

_DGX1_V100 = (
    ("X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"),
    ("NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"),
    ("NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"),
    ("NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"),
    ("NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"),
    ("SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"),
    ("SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"),
    ("SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"),
)


def uniform(count: int, code: str, name: str | None = None, *, numa_halves: bool = True) -> Topology:
    """`count` GPUs with every pair joined by `code` (NVSwitch systems, single-switch boxes)."""
    check_gpu_count(count)
    links = tuple(tuple("X" if i == j else code for j in range(count)) for i in range(count))
    topo = Topology.from_links(links, name=name or f"uniform-{count}-{code}")
    if numa_halves and count > 1:
        return _with_numa(topo, _halves(count))
    return topo


def pcie(count: int, name: str | None = None) -> Topology:
    """PCIe GPUs without NVLink: PHB within a socket, SYS across sockets.

    Up to 4 GPUs are taken to share one socket (workstations); more are split in two halves
    over two sockets, the common layout of dual-socket GPU servers."""
    check_gpu_count(count)
    sockets = _halves(count) if count > 4 else (0,) * count
    links = tuple(
        tuple("X" if i == j else ("PHB" if sockets[i] == sockets[j] else "SYS") for j in range(count))
        for i in range(count)
    )
    return _with_numa(Topology.from_links(links, name=name or f"pcie-{count}"), sockets)


def _halves(count: int) -> tuple[int, ...]:
    return tuple(0 if i < (count + 1) // 2 else 1 for i in range(count))


def _with_numa(topo: Topology, numa: tuple[int, ...]) -> Topology:
    return Topology(topo.links, (), numa, (), (), topo.name)


def _pcie_8gpu_dual_socket() -> Topology:
    def code(i: int, j: int) -> str:
        if i == j:
            return "X"
        if i // 4 != j // 4:
            return "SYS"
        return "PIX" if i // 2 == j // 2 else "PHB"

    links = tuple(tuple(code(i, j) for j in range(8)) for i in range(8))
    return _with_numa(Topology.from_links(links, name="pcie-8gpu-dual-socket"), _halves(8))


def _pcie_4gpu_nvlink_pairs() -> Topology:
    def code(i: int, j: int) -> str:
        if i == j:
            return "X"
        return "NV4" if i // 2 == j // 2 else "PHB"

    links = tuple(tuple(code(i, j) for j in range(4)) for i in range(4))
    return _with_numa(Topology.from_links(links, name="pcie-4gpu-nvlink-pairs"), (0, 0, 0, 0))


PRESETS: dict[str, Topology] = {
    "dgx1-v100": _with_numa(Topology.from_links(_DGX1_V100, name="dgx1-v100"), _halves(8)),
    "dgx2": uniform(16, "NV6", "dgx2"),
    "dgx-a100": uniform(8, "NV12", "dgx-a100"),
    "dgx-h100": uniform(8, "NV18", "dgx-h100"),
    "hgx-h200": uniform(8, "NV18", "hgx-h200"),
    "hgx-b200": uniform(8, "NV18", "hgx-b200"),
    "gb200-nvl72-tray": uniform(4, "NV18", "gb200-nvl72-tray", numa_halves=False),
    "gb300-nvl72-tray": uniform(4, "NV18", "gb300-nvl72-tray", numa_halves=False),
    "pcie-8gpu-dual-socket": _pcie_8gpu_dual_socket(),
    "pcie-4gpu-nvlink-pairs": _pcie_4gpu_nvlink_pairs(),
}

PRESET_DESCRIPTIONS: dict[str, str] = {
    "dgx1-v100": "DGX-1 V100, 8 GPUs, hybrid cube-mesh NVLink (quads 0-3 and 4-7)",
    "dgx2": "DGX-2 / HGX-2, 16 V100 on NVSwitch (all pairs NV6)",
    "dgx-a100": "DGX / HGX A100, 8 GPUs on NVSwitch (all pairs NV12)",
    "dgx-h100": "DGX / HGX H100, 8 GPUs on NVSwitch (all pairs NV18)",
    "hgx-h200": "HGX H200, 8 GPUs on NVSwitch (all pairs NV18)",
    "hgx-b200": "DGX / HGX B200, 8 GPUs, NVLink 5 switches (all pairs NV18, 1.8 TB/s per GPU)",
    "gb200-nvl72-tray": "one GB200 NVL72 compute tray: 4 GPUs, NV18 into the rack's NVLink domain",
    "gb300-nvl72-tray": "one GB300 NVL72 compute tray: 4 GPUs, NV18 into the rack's NVLink domain",
    "pcie-8gpu-dual-socket": "8 PCIe GPUs, 2 per switch (PIX), 4 per socket (PHB), SYS across",
    "pcie-4gpu-nvlink-pairs": "4 PCIe GPUs, NVLink bridges 0-1 and 2-3 (NV4), PHB otherwise",
}



def _count(digits: str) -> int:
    # int() refuses thousands of digits; a count that long is past the limit all the same.
    if len(digits) > 12:
        raise ValueError(too_many_gpus(f"{digits[:12]}..."))
    return int(digits)


_PATTERNS = (
    (re.compile(r"^pcie-(\d+)$"), lambda m: pcie(_count(m.group(1)))),
    (re.compile(r"^uniform-(\d+)-([A-Za-z0-9]+)$"),
     lambda m: uniform(_count(m.group(1)), m.group(2).upper())),
)


def preset(name: str) -> Topology:
    """A preset by name; ValueError naming the choices for an unknown one."""
    key = str(name).strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    for pattern, make in _PATTERNS:
        m = pattern.match(key)
        if m:
            try:
                return _cached(key, make, m)
            except ValueError as exc:
                shown = str(name) if len(str(name)) <= 40 else f"{str(name)[:40]}..."
                raise ValueError(f"topology preset {shown!r}: {exc}") from None
    raise ValueError(
        f"unknown topology preset {name!r}; expected one of {', '.join(PRESETS)}, "
        "pcie-<N> or uniform-<N>-<CODE> (e.g. uniform-4-NV12)"
    )


_made: dict[str, Topology] = {}


def _cached(key: str, make, m) -> Topology:
    # The same object for the same name keeps per-topology caches in placement warm.
    if key not in _made:
        _made[key] = make(m)
    return _made[key]


# GPU Feature Discovery's nvidia.com/gpu.product, upper-cased: (marker, GPUs, preset).
_PRODUCT_RULES = (
    ("V100-SXM3", 16, "dgx2"),
    ("V100-SXM2", 8, "dgx1-v100"),
    ("A100-SXM", 8, "dgx-a100"),
    ("H100-SXM", 8, "dgx-h100"),
    ("H100-80GB-HBM3", 8, "dgx-h100"),
    ("H200", 8, "hgx-h200"),
    ("GB200", 4, "gb200-nvl72-tray"),  # before B200, which it contains
    ("GB300", 4, "gb300-nvl72-tray"),
    ("B200", 8, "hgx-b200"),
)
# 4-GPU HGX A100 boards join every pair directly with 4 NVLinks.
_HGX_A100_4GPU = "uniform-4-NV4"


@lru_cache(maxsize=256)
def preset_for(product: str | None, count: int) -> Topology:
    """The likely topology of a node from GPU Feature Discovery labels.

    `product` is `nvidia.com/gpu.product` (e.g. Tesla-V100-SXM2-16GB, NVIDIA-A100-SXM4-80GB,
    NVIDIA-H100-80GB-HBM3; a `-SHARED` or `-MIG-...` suffix is ignored) and `count` is
    `nvidia.com/gpu.count`. An SXM system with fewer GPUs than its preset (a VM or a
    partition of the board) gets the preset's first `count` GPUs. Anything unknown, PCIe
    parts included, gets `pcie(count)`: PHB within a socket, SYS across sockets when
    count > 4 (the conservative assumption: no NVLink). ValueError for a count no node
    has (below 1 or above MAX_GPUS_PER_NODE)."""
    check_gpu_count(count)
    text = (product or "").upper()
    if "A100-SXM" in text and count == 4:
        return preset(_HGX_A100_4GPU)
    for marker, size, name in _PRODUCT_RULES:
        if marker in text and "PCIE" not in text and count <= size:
            return PRESETS[name].subset(count)
    return preset(f"pcie-{count}")
