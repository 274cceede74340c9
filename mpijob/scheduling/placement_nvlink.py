"""Narrow a packed placement's candidates to NVLink partitions (mpijob.scheduling.nvlink).

Applies only where some candidate node is in a multi-node NVLink partition; a node without
one is a partition of its own (NVLink ends at the node). Order of preference, before the
network rules of mpijob.scheduling.placement_network:
1. A job that fits in one partition goes into one: among the partitions that hold it, the
   one that needs the fewest nodes, then the one with the least room left (best fit: the
   roomier partitions stay whole for the next job), then by name. A small job is never
   split across partitions while one holds it, even when the split would use fewer nodes:
   across partitions its GPUs meet on the network.
2. A job larger than every partition takes the fewest partitions (the roomiest first is
   exact for the count: rooms add up); among the sets of that many partitions, the network
   rules decide (fewest nodes, one zone, fewest racks, one block; placement_network.narrow
   on each set), then the least room, then the names. Past EXACT_SETS_MAX sets the
   roomiest partitions stand.
Pure; `candidates` are mpijob.scheduling.placement's _Candidate objects (node, cap).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from itertools import combinations
from math import comb

from mpijob.plural import plural
from mpijob.scheduling.nvlink import short
from mpijob.scheduling.placement_network import min_nodes, narrow

# Sets of partitions compared one by one for a job larger than a partition.
EXACT_SETS_MAX = 2_000


@dataclass
class Partitioned:
    candidates: list = field(default_factory=list)
    partitions: int = 0  # partitions used
    domain: str | None = None  # the one multi-node partition holding the job, if one does
    notes: list[str] = field(default_factory=list)


def partition_key(cand) -> tuple:
    domain = cand.node.nvlink_domain
    return ("nvlink", domain) if domain else ("node", cand.name)


def _label(key: tuple) -> str:
    return f"NVLink partition {short(key[1])}" if key[0] == "nvlink" else f"node {key[1]}"


def narrow_partitions(cands: list, need: int, *, cross_zone: bool = False) -> Partitioned | None:
    """The candidates of the best partition(s); None where no partition tier applies or
    the job does not fit at all (the caller's rules then say why)."""
    if not any(c.node.nvlink_domain for c in cands):
        return None
    groups: dict[tuple, list] = defaultdict(list)
    for c in cands:
        groups[partition_key(c)].append(c)
    room = {k: sum(c.cap for c in members) for k, members in groups.items()}
    fewest: dict[tuple, int] = {}
    for key in groups:
        m = min_nodes([c.cap for c in groups[key]], need)
        if m is not None:
            fewest[key] = m
    if fewest:
        best = min(fewest, key=lambda k: (fewest[k], room[k], str(k)))
        domain = best[1] if best[0] == "nvlink" else None
        return Partitioned(groups[best], 1, domain, [
            f"NVLink: fits in one partition: {_label(best)} on {plural(fewest[best], 'node')}"
            + (f" (of {len(fewest)} that hold it)" if len(fewest) > 1 else "")])
    order = sorted(groups, key=lambda k: (-room[k], str(k)))
    k = min_nodes([room[key] for key in order], need)  # rooms add up like node capacities
    if k is None:
        return None
    chosen = _best_set(groups, room, order, k, need, cross_zone)
    if chosen is None:
        return None
    members = [c for key in chosen for c in groups[key]]
    return Partitioned(members, k, None, [
        f"NVLink: no partition holds {plural(need, 'worker')}; the fewest that do: "
        f"{k} ({', '.join(_label(key) for key in chosen)})"])


def _best_set(groups: dict, room: dict, order: list, k: int, need: int,
              cross_zone: bool) -> tuple | None:
    if comb(len(order), k) > EXACT_SETS_MAX:
        return tuple(order[:k])
    best, best_rank = None, None
    for keys in combinations(sorted(order, key=str), k):
        if sum(room[x] for x in keys) < need:
            continue
        members = [c for x in keys for c in groups[x]]
        result = narrow(members, need, cross_zone=cross_zone)
        if result.nodes is None:
            continue
        rank = (result.nodes, result.racks, result.blocks, sum(room[x] for x in keys),
                tuple(str(x) for x in keys))
        if best_rank is None or rank < best_rank:
            best, best_rank = keys, rank
    return best


def split_in_two(cluster, placement):
    """What-if for `plan --compare`: the same pods with their second half moved to free
    nodes of another NVLink partition (same GPU count per pod, lowest free GPUs), or None
    where the placement is not inside one partition or no other partition has the room.
    Selectors and taints are not re-checked: it prices the split, it is not a plan."""
    domain = placement.nvlink_domain
    if not placement.feasible or not domain or placement.nodes_used < 2:
        return None
    keep_n = len(placement.assignments) // 2
    keep, move = placement.assignments[:keep_n], placement.assignments[keep_n:]
    others: dict[str, list] = defaultdict(list)
    for node in cluster.nodes:
        if node.ready and node.nvlink_domain and node.nvlink_domain != domain:
            others[node.nvlink_domain].append(node)
    for other in sorted(others):
        free = sorted(others[other], key=lambda n: (-len(n.free_gpus), n.name))
        if len(free) < len(move):
            continue
        moved = []
        for a, node in zip(move, free, strict=False):
            if len(node.free_gpus) < len(a.gpus):
                break
            moved.append(replace(a, node=node.name, gpus=node.free_gpus[:len(a.gpus)],
                                 device_uuids=()))
        if len(moved) == len(move):
            return replace(placement, policy=f"{placement.policy}, 2 NVLink partitions",
                           assignments=tuple(keep) + tuple(moved), nvlink_domain=None,
                           compute_domain=False, network_domain=None, explanation=(
                               f"what-if: the same pods over 2 NVLink partitions ({short(domain)} "
                               f"and {short(other)}): their GPUs meet on the network",))
    return None
