"""Volcano HyperNodes -> each node's rack and block.

A HyperNode (topology.volcano.sh/v1alpha1, cluster-scoped) is one network performance
domain, usually a switch; `spec.tier` 1 is closest to the nodes, and `spec.members` lists
Nodes (tier 1) or HyperNodes (higher tiers), each picked by a selector with `exactMatch:
{name}`, `regexMatch: {pattern}` or `labelMatch: {matchLabels}` (Volcano, "Network Topology
Aware Scheduling", https://volcano.sh/en/docs/network_topology_aware_scheduling/, and the
HyperNode CRD hypernodes.topology.volcano.sh). We read tier 1 as the rack and the tier-2
HyperNode holding it as the block. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence


def _matches(selector: Mapping, name: str, labels: Mapping[str, str]) -> bool:
    exact = selector.get("exactMatch")
    if isinstance(exact, Mapping) and exact.get("name"):
        return exact["name"] == name
    rx = selector.get("regexMatch")
    if isinstance(rx, Mapping) and rx.get("pattern"):
        try:
            return re.fullmatch(rx["pattern"], name) is not None
        except re.error:
            return False
    lm = selector.get("labelMatch")
    if isinstance(lm, Mapping):
        want = lm.get("matchLabels") or {}
        return bool(want) and all(labels.get(k) == v for k, v in want.items())
    return False


def _members(hn: Mapping, kind: str) -> list[Mapping]:
    return [m.get("selector") or {} for m in (hn.get("spec") or {}).get("members") or []
            if (m.get("type") or "Node") == kind]


def _tier(hn: Mapping) -> int | None:
    try:
        return int((hn.get("spec") or {}).get("tier"))  # type: ignore[arg-type]  # None: TypeError below
    except (TypeError, ValueError):
        return None


def positions(hypernodes: Sequence[Mapping], nodes: Mapping[str, Mapping[str, str]]) -> dict[str, dict]:
    """{node name: {"rack": tier-1 HyperNode, "block": tier-2 HyperNode}} for the nodes
    (name -> labels) that some tier-1 HyperNode holds."""
    by_name = {(h.get("metadata") or {}).get("name"): h for h in hypernodes}
    tier1 = sorted(n for n, h in by_name.items() if n and _tier(h) == 1)
    tier2 = sorted(n for n, h in by_name.items() if n and _tier(h) == 2)
    block_of: dict[str, str] = {}
    for parent in tier2:
        for sel in _members(by_name[parent], "HyperNode"):
            for child in tier1:
                if child not in block_of and _matches(sel, child, {}):
                    block_of[child] = parent
    out: dict[str, dict] = {}
    for rack in tier1:
        for sel in _members(by_name[rack], "Node"):
            for node, labels in nodes.items():
                if node not in out and _matches(sel, node, labels):
                    out[node] = {"rack": rack, "block": block_of.get(rack)}
    return out
