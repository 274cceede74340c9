"""The best set of k free GPUs on one node, found exactly and cached per (topology, free mask).

A set's quality is (weakest link, total link bandwidth) in integer MB/s: allreduce over the
set runs at the pace of its slowest pair, and among sets with the same bottleneck the one
with more aggregate bandwidth has more paths for NCCL's rings and trees. A single GPU has
no links: weakest = SINGLE (above any link), total = 0.

Among sets of equal quality the choice leaves the best remaining GPUs free, the idea of
the NVIDIA device plugin's best-effort policy (go-gpuallocator partitions all free GPUs
into sets of the requested size and keeps the best partition): first the best set of the
same size still available afterwards, then the most bandwidth among the GPUs left, then
the lowest indices, so the answer is deterministic.

Exactness: nodes with up to TABLE_MAX GPUs get a table of every subset's quality (2^n
entries, built once per topology), so every answer is checked against all subsets. Larger
nodes are exact when every pair has the same link (NVSwitch systems such as DGX-2) or when
the candidate sets number at most ENUMERATE_MAX; beyond that a greedy search is used.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

from mpijob.plural import plural
from mpijob.scheduling.links import (
    PCIE_X16_EFFECTIVE_GBS,
    bandwidth_gbs,
    nvlink_count,
    nvlink_gbs_per_link,
)
from mpijob.scheduling.topology import Topology

SINGLE = 10**9
TABLE_MAX = 12
ENUMERATE_MAX = 20_000
Quality = tuple[int, int]  # (weakest link, total) in MB/s


def _mbps(code: str, pcie_gen: int, nv_per_link: float) -> int:
    n = nvlink_count(code)
    if n:
        return round(n * nv_per_link * 1000)
    return round(bandwidth_gbs(code, pcie_gen=pcie_gen) * 1000)


def mask_of(indices) -> int:
    m = 0
    for i in indices:
        m |= 1 << i
    return m


def indices_of(mask: int) -> tuple[int, ...]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


class SetIndex:
    """Best-set queries for one topology at one link-bandwidth scale."""

    def __init__(self, topology: Topology, pcie_gen: int, nv_per_link: float):
        self.topology = topology
        n = self.n = topology.gpus
        self.bw = [
            [SINGLE if i == j else _mbps(topology.links[i][j], pcie_gen, nv_per_link) for j in range(n)]
            for i in range(n)
        ]
        off = {self.bw[i][j] for i in range(n) for j in range(n) if i != j}
        self.uniform = len(off) <= 1
        self.full = (1 << n) - 1
        self._profiles: dict[int, tuple[Quality, ...]] = {}
        self._best: dict[tuple[int, int], int] = {}
        self._weak: list[int] | None = None
        self._total: list[int] | None = None
        if n <= TABLE_MAX:
            self._build_tables()

    # -- qualities -------------------------------------------------------------------
    def _build_tables(self) -> None:
        n, bw = self.n, self.bw
        size = 1 << n
        weak = [SINGLE] * size
        total = [0] * size
        for m in range(1, size):
            low = (m & -m).bit_length() - 1
            rest = m & (m - 1)
            w, t = weak[rest], total[rest]
            row = bw[low]
            r = rest
            while r:
                j = (r & -r).bit_length() - 1
                b = row[j]
                if b < w:
                    w = b
                t += b
                r &= r - 1
            weak[m], total[m] = w, t
        self._weak, self._total = weak, total

    def quality(self, mask: int) -> Quality:
        if self._weak is not None and self._total is not None:
            return self._weak[mask], self._total[mask]
        idx = indices_of(mask)
        w, t = SINGLE, 0
        for a in range(len(idx)):
            row = self.bw[idx[a]]
            for b in range(a + 1, len(idx)):
                v = row[idx[b]]
                if v < w:
                    w = v
                t += v
        return w, t

    def profile(self, free: int) -> tuple[Quality, ...]:
        """For every size s, the best quality of an s-subset of `free` ((-1, -1) if none)."""
        cached = self._profiles.get(free)
        if cached is not None:
            return cached
        count = free.bit_count()
        best: list[Quality] = [(SINGLE, 0)] + [(-1, -1)] * self.n
        if self._weak is not None and self._total is not None:
            weak, total = self._weak, self._total
            sub = free
            while sub:
                s = sub.bit_count()
                q = (weak[sub], total[sub])
                if q > best[s]:
                    best[s] = q
                sub = (sub - 1) & free
        else:
            for s in range(1, count + 1):
                best[s] = self.quality(self.best(free, s))
        out = tuple(best)
        self._profiles[free] = out
        return out

    # -- the chosen set --------------------------------------------------------------
    def best(self, free: int, size: int) -> int:
        """The mask of the best `size`-subset of `free` (0 for size 0)."""
        key = (free, size)
        hit = self._best.get(key)
        if hit is not None:
            return hit
        count = free.bit_count()
        if size <= 0:
            result = 0
        elif size > count:
            raise ValueError(f"{plural(size, 'GPU')} asked from {count} free")
        elif size == count:
            result = free
        elif self.uniform:
            # Every set is as good and leaves as good a rest: lowest indices.
            result = mask_of(indices_of(free)[:size])
        else:
            result = self._search(free, size)
        self._best[key] = result
        return result

    def _candidates(self, free: int, size: int):
        idx = indices_of(free)
        if self._weak is None and comb(len(idx), size) > ENUMERATE_MAX:
            return None
        return (mask_of(c) for c in combinations(idx, size))

    def _search(self, free: int, size: int) -> int:
        cands = self._candidates(free, size)
        if cands is None:
            return self._greedy(free, size)
        top: Quality = (-1, -1)
        tied: list[int] = []
        for m in cands:
            q = self.quality(m)
            if q > top:
                top, tied = q, [m]
            elif q == top:
                tied.append(m)
        if len(tied) == 1:
            return tied[0]
        return min(tied, key=lambda m: self._leftover_key(free, m, size))

    def _leftover_key(self, free: int, chosen: int, size: int):
        rest = free & ~chosen
        again = self._best_quality(rest, size) if rest.bit_count() >= size else (-1, -1)
        # min() picks the smallest key: negate what should be large.
        return (-again[0], -again[1], -self.quality(rest)[1], indices_of(chosen))

    def _best_quality(self, free: int, size: int) -> Quality:
        """The best quality of a `size`-subset of `free`, without choosing among ties."""
        if self._weak is not None:
            return self.profile(free)[size]
        cands = self._candidates(free, size)
        if cands is None:
            return self.quality(self._greedy(free, size))
        return max(self.quality(m) for m in cands)

    def _greedy(self, free: int, size: int) -> int:
        """Not exact: grow from the best pair, adding the GPU that keeps the set best."""
        idx = indices_of(free)
        pair = max(combinations(idx, 2), key=lambda p: (self.bw[p[0]][p[1]], -p[0], -p[1]))
        chosen = mask_of(pair)
        while chosen.bit_count() < size:
            options = [i for i in idx if not chosen >> i & 1]
            nxt = max(options, key=lambda i: (self.quality(chosen | 1 << i), -i))
            chosen |= 1 << nxt
        return chosen

    # -- for explanations ------------------------------------------------------------
    def weakest_pair(self, mask: int) -> tuple[int, int] | None:
        idx = indices_of(mask)
        pairs = [(self.bw[a][b], a, b) for a, b in combinations(idx, 2)]
        if not pairs:
            return None
        _, a, b = min(pairs)
        return a, b


_indexes: dict[tuple, SetIndex] = {}
_by_identity: dict[tuple, tuple[Topology, SetIndex]] = {}


def set_index(topology: Topology, *, pcie_gen: int = 3, gpu_model: str | None = None) -> SetIndex:
    """The shared index of a topology (cached: nodes of one system share one index)."""
    # Nodes built from one preset share the Topology object: look it up without hashing
    # the whole matrix, which dominates on clusters of thousands of nodes.
    fast = _by_identity.get((id(topology), pcie_gen, gpu_model))
    if fast is not None and fast[0] is topology:
        return fast[1]
    gen = pcie_gen if pcie_gen in PCIE_X16_EFFECTIVE_GBS else 3
    key = (topology.links, gen, nvlink_gbs_per_link(gpu_model))
    idx = _indexes.get(key)
    if idx is None:
        idx = _indexes[key] = SetIndex(topology, gen, key[2])
    _by_identity[(id(topology), pcie_gen, gpu_model)] = (topology, idx)
    return idx
