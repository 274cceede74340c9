"""GPU-to-GPU link kinds as `nvidia-smi topo -m` names them, and their bandwidths.

Bandwidths are effective unidirectional GB/s (bytes) that NCCL can reach on the path,
which is what ring allreduce time depends on:
- NVLink: 20 GB/s per link per direction for NVLink 1 (P100), 25 GB/s for NVLink 2-4
  (V100, A100, H100): NVIDIA's NVLink/NVSwitch product pages and the P100/V100/A100/H100
  architecture whitepapers (V100: 6 links = 150 GB/s/dir; A100: 12 = 300; H100: 18 = 450).
  `NV#` is # bonded links, so its bandwidth is # x the per-link figure. NVLink 5
  (Blackwell: B200, GB200, B300, GB300) doubles it to 50 GB/s per link per direction: 18
  links = 1.8 TB/s per GPU both directions together (NVIDIA GB200 NVL72 product page,
  https://www.nvidia.com/en-us/data-center/gb200-nvl72/: "NVLink bandwidth 130 TB/s" for
  72 GPUs; NVIDIA NVLink page, https://www.nvidia.com/en-us/data-center/nvlink/: fifth
  generation, 1.8 TB/s per GPU, 18 links).
- PCIe x16: 15.75 GB/s raw for Gen3, 31.5 Gen4, 63 Gen5 (PCI-SIG); NCCL's measured
  busbw through one PCIe switch (PIX) is about 80% of raw: ~12 GB/s on Gen3 (nccl-tests
  results published by NVIDIA and vendors such as Lambda and Microway).
- Paths that leave the PCIe switch lose P2P efficiency: PXB (several switches) ~0.9 of
  PIX, PHB (through the CPU's host bridge) ~0.75, NODE (between host bridges of one NUMA
  node) ~0.7, SYS (across the QPI/UPI socket interconnect; NCCL falls back to copies
  through host memory) ~0.5. The factors follow NCCL's own path model (src/graph/topo.h:
  LOC/PIX/PXB/PHB/SYS bandwidths) and published P2P bandwidth tests on dual-socket servers.
"""

from __future__ import annotations

import re

NVLINK_GBS_PER_LINK_DEFAULT = 25.0
NVLINK_GBS_PER_LINK = {"P100": 20.0, "B200": 50.0, "B300": 50.0}  # GB200/GB300 match too
PCIE_X16_EFFECTIVE_GBS = {3: 12.6, 4: 25.2, 5: 50.4}
PCIE_PATH_FACTOR = {"PIX": 1.0, "PXB": 0.9, "PHB": 0.75, "NODE": 0.7, "SYS": 0.5}
# Old drivers print SOC for what newer ones call SYS.
ALIASES = {"SOC": "SYS"}
PCIE_KINDS = tuple(PCIE_PATH_FACTOR)
SELF = "X"

_NV_RE = re.compile(r"^NV(\d+)$")


class LinkCodeError(ValueError):
    pass


def normalize(code: str) -> str:
    """Canonical form of a link code: 'nv2' -> 'NV2', 'SOC' -> 'SYS'."""
    code = code.strip().upper()
    code = ALIASES.get(code, code)
    if code == SELF or code in PCIE_PATH_FACTOR or _NV_RE.match(code):
        return code
    raise LinkCodeError(f"unknown link code {code!r} (expected X, NV#, PIX, PXB, PHB, NODE or SYS)")


def nvlink_count(code: str) -> int:
    """Number of bonded NVLinks of a code (0 for PCIe/socket paths)."""
    m = _NV_RE.match(code)
    return int(m.group(1)) if m else 0


def is_nvlink(code: str) -> bool:
    return nvlink_count(code) > 0


def nvlink_gbs_per_link(gpu_model: str | None) -> float:
    model = (gpu_model or "").upper()
    for key, gbs in NVLINK_GBS_PER_LINK.items():
        if key in model:
            return gbs
    return NVLINK_GBS_PER_LINK_DEFAULT


def bandwidth_gbs(code: str, *, pcie_gen: int = 3, gpu_model: str | None = None) -> float:
    """Effective unidirectional GB/s between two GPUs joined by `code`."""
    code = normalize(code)
    if code == SELF:
        return float("inf")
    n = nvlink_count(code)
    if n:
        return n * nvlink_gbs_per_link(gpu_model)
    return PCIE_X16_EFFECTIVE_GBS.get(pcie_gen, PCIE_X16_EFFECTIVE_GBS[3]) * PCIE_PATH_FACTOR[code]


def rank(code: str) -> tuple[int, int]:
    """Sort key: higher is better. NVLink by link count, then PCIe paths from PIX to SYS."""
    code = normalize(code)
    if code == SELF:
        return (3, 0)
    n = nvlink_count(code)
    if n:
        return (2, n)
    return (1, len(PCIE_KINDS) - PCIE_KINDS.index(code))
