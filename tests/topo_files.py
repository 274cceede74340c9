"""The real `nvidia-smi topo -m` outputs of tests/data/topo, as tests compare against them."""

from __future__ import annotations

from pathlib import Path

TOPO_DIR = Path(__file__).resolve().parent / "data" / "topo"


def gpu_links(name: str) -> tuple[tuple[str, ...], ...]:
    """The GPU-to-GPU block of one output: row i is GPU i's link to each GPU ("X" itself)."""
    rows = [line.split() for line in (TOPO_DIR / name).read_text().splitlines()
            if line.startswith("GPU")]
    return tuple(tuple(row[1:len(rows) + 1]) for row in rows)
