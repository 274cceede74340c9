"""Narrow a packed placement's candidate nodes to the fewest network switches.

Order of preference (mpijob.scheduling.placement then applies its GPU-set rules inside the result):
1. the fewest nodes (as before);
2. one zone: a job is never split across zones unless `cross_zone` is asked; the fewest
   nodes is then counted inside each zone;
3. the fewest racks (leaf switches) among the placements with that many nodes;
4. with several racks, one block (spine) when a block can hold it in that many racks;
5. among equally good racks or blocks, the one with the least room that still fits (best
   fit: roomier racks stay whole for the next multi-node job), then by name.

The fewest racks for m nodes: one rack when one suffices; else a greedy choice (roomiest
racks first) bounds it, and an exact dynamic programme over racks looks for fewer: best[j][k]
= the most workers that k nodes taken from j racks can hold (each rack gives its roomiest
nodes first). Past EXACT_STEPS_MAX steps (jobs of dozens of nodes on hundreds of racks) the
greedy answer stands, which may use a rack more than needed.
Pure; `candidates` are mpijob.scheduling.placement's _Candidate objects (node, cap).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from mpijob.plural import plural

# Above this many steps of the exact programme (racks x racks to beat x nodes x nodes per
# rack) the greedy choice of racks stands: ~0.1 s of Python; only jobs over dozens of
# nodes on clusters of hundreds of racks get there.
EXACT_STEPS_MAX = 300_000


@dataclass
class Narrowed:
    candidates: list = field(default_factory=list)
    nodes: int | None = None  # the fewest nodes that hold the job (None: does not fit)
    reason: str | None = None  # why it does not fit when only a zone split would
    notes: list[str] = field(default_factory=list)
    # Racks and blocks of the chosen domain (0 where the network is unknown or one node does).
    racks: int = 0
    blocks: int = 0


def min_nodes(caps: list[int], need: int) -> int | None:
    """The fewest of these capacities (workers per node) that add up to `need`."""
    total = 0
    for count, cap in enumerate(sorted(caps, reverse=True), 1):
        total += cap
        if total >= need:
            return count
    return None


def _racks(cands: list) -> dict[tuple, list]:
    out: dict[tuple, list] = defaultdict(list)
    for c in cands:
        out[c.node.network.rack_key(c.name)].append(c)
    return out


def _prefix(members: list, m: int) -> list[int]:
    caps = sorted((c.cap for c in members), reverse=True)[:m]
    out = [0]
    for cap in caps:
        out.append(out[-1] + cap)
    return out


def fewest_racks(racks: dict[tuple, list], need: int, m: int) -> tuple[int, list[tuple]] | None:
    """(racks used, which) for `need` workers on at most m nodes, fewest racks; None if none."""
    keys = sorted(racks, key=lambda k: tuple(str(x) for x in k))
    prefixes = [_prefix(racks[k], m) for k in keys]
    # One rack that suffices: the common case, no table needed.
    singles = [k for k, p in zip(keys, prefixes, strict=True) if p[min(m, len(p) - 1)] >= need]
    if singles:
        return 1, singles
    greedy = _greedy_racks(keys, prefixes, need, m)  # an upper bound on the racks
    if greedy is None or greedy[0] <= 2:
        return greedy  # no single rack holds it, so two is the fewest
    jmax = greedy[0] - 1
    if len(keys) * jmax * m * max(len(p) - 1 for p in prefixes) > EXACT_STEPS_MAX:
        return greedy
    neg = -1
    # best[j][k]; choice[i][j][k] = nodes taken from rack i in the best (j, k) over racks <= i.
    best = [[neg] * (m + 1) for _ in range(jmax + 1)]
    best[0][0] = 0
    choice = []
    for p in prefixes:
        new = [row[:] for row in best]
        took = [[0] * (m + 1) for _ in range(jmax + 1)]
        top = len(p) - 1
        for j in range(1, jmax + 1):
            for k in range(1, m + 1):
                for t in range(1, min(top, k) + 1):
                    prev = best[j - 1][k - t]
                    if prev < 0:
                        continue
                    v = prev + p[t]
                    if v > new[j][k]:
                        new[j][k] = v
                        took[j][k] = t
        best = new
        choice.append(took)
    for j in range(2, jmax + 1):
        for k in range(j, m + 1):
            if best[j][k] >= need:
                return j, [_trace(choice, keys, j, k)]
    return greedy


def _trace(choice: list, keys: list, j: int, k: int) -> tuple:
    chosen = []
    for i in range(len(keys) - 1, -1, -1):
        t = choice[i][j][k]
        if t:
            chosen.append(keys[i])
            j, k = j - 1, k - t
    return tuple(reversed(chosen))


def _greedy_racks(keys, prefixes, need, m):
    """Add the rack that raises the union's m roomiest nodes the most, until they hold
    `need`: an upper bound on the fewest racks (exact for one and two)."""
    caps = [[p[t] - p[t - 1] for t in range(1, len(p))] for p in prefixes]
    left = list(range(len(keys)))
    chosen: list[int] = []
    top: list[int] = []
    while left:
        best_i, best_top, best_sum = None, None, -1
        for i in left:
            merged = sorted(top + caps[i], reverse=True)[:m]
            total = sum(merged)
            if total > best_sum:
                best_i, best_top, best_sum = i, merged, total
        chosen.append(best_i)
        left.remove(best_i)
        top = best_top
        if best_sum >= need:
            return len(chosen), [tuple(keys[i] for i in chosen)]
    return None


def _room(cands: list) -> int:
    return sum(c.cap for c in cands)


def _label(key: tuple) -> str:
    return f"node {key[1]}" if key[0] == "node" else f"rack {key[2]}"


def narrow(cands: list, need: int, *, cross_zone: bool = False) -> Narrowed:
    """The candidates of the best network domain, and the fewest nodes that hold `need`."""
    m_all = min_nodes([c.cap for c in cands], need)
    if m_all is None:
        return Narrowed(cands, None)
    zones: dict = defaultdict(list)
    for c in cands:
        zones[c.node.network.zone].append(c)
    groups = [cands]
    if not cross_zone and len(zones) > 1:
        fits = {z: min_nodes([c.cap for c in members], need) for z, members in zones.items()}
        fitting = [v for v in fits.values() if v is not None]
        if not fitting:
            names = ", ".join(sorted(str(z) for z in zones))
            return Narrowed([], None, reason=(
                f"no one zone holds it (zones {names}); it fits only split across zones "
                "(pass --cross-zone to allow that)"))
        m_zone = min(fitting)
        groups = [zones[z] for z in sorted(zones, key=str) if fits[z] == m_zone]
    m = min(min_nodes([c.cap for c in g], need) or m_all + 10**6 for g in groups)
    if m == 1 or not any(c.node.network.known for g in groups for c in g):
        out = [c for g in groups for c in g]
        note = _zone_note(out, len(zones), cross_zone)
        return Narrowed(out, m, notes=[note] if note else [])

    # Fewest racks, per zone.
    options = []  # (racks used, blocks used, room, name, candidates, description)
    for g in groups:
        racks = _racks(g)
        found = fewest_racks(racks, need, m)
        if found is None:
            continue
        r, sets = found
        if r == 1:
            for key in sets:
                members = racks[key]
                options.append((1, 1, _room(members), str(key), members, _label(key)))
            continue
        by_block: dict = defaultdict(dict)
        for key, members in racks.items():
            bk = members[0].node.network.block_key()
            if bk is not None:
                by_block[bk][key] = members
        placed = False
        for bk in sorted(by_block, key=str):
            in_block = fewest_racks(by_block[bk], need, m)
            if in_block is not None and in_block[0] == r:
                members = [c for key in in_block[1][0] for c in racks[key]]
                options.append((r, 1, _room(members), str(bk), members,
                                f"{plural(r, 'rack')} of block {bk[1]}"))
                placed = True
        if not placed:
            members = [c for key in sets[0] for c in racks[key]]
            blocks = len({c.node.network.block_key() or ("node", c.name) for c in members})
            options.append((r, blocks, _room(members), str(sets[0]), members,
                            f"{plural(r, 'rack')} ({', '.join(_label(k) for k in sets[0])})"))
    if not options:  # pragma: no cover - m nodes exist in some group by construction
        return Narrowed([c for g in groups for c in g], m)
    best = min(options, key=lambda o: o[:4])
    r, blocks, _, _, members, what = best
    notes = [f"network: the fewest nodes ({m}) fit under {what}"
             + ("" if r == 1 else f"; no single rack holds {plural(need, 'worker')} on {m} nodes")]
    note = _zone_note(members, len(zones), cross_zone)
    if note:
        notes.append(note)
    return Narrowed(members, m, notes=notes, racks=r, blocks=blocks)


def _zone_note(members: list, zones: int, cross_zone: bool) -> str | None:
    if zones <= 1:
        return None
    if cross_zone:
        return "network: --cross-zone: the job may span zones"
    zone = members[0].node.network.zone if members else None
    return f"network: kept in one zone ({zone})" if zone is not None else None
