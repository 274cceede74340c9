"""Where a node sits in the data-centre network: zone, block (spine switch), rack (leaf switch).

Two nodes in one rack talk through one leaf switch at the NICs' full speed; nodes in
different racks cross the leaf uplinks to the spine, which are usually oversubscribed (the
rack's servers can send more than its uplinks carry). A multi-node allreduce therefore wants
its nodes under as few switches as possible: same rack, then same block, never across zones.

Where the position comes from (the first that is set wins):
- a cluster file's `network: {zone, block, rack, oversubscription}` per node;
- node labels, by configurable keys (`LabelKeys`). The defaults are the conventions in use:
  Kueue topology-aware scheduling's example levels `cloud.provider.com/topology-block` and
  `cloud.provider.com/topology-rack` (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/),
  NVIDIA Topograph's `network.topology.nvidia.com/spine` / `leaf`
  (https://docs.nvidia.com/topograph/engines/kubernetes.md), and the well-known
  `topology.kubernetes.io/zone`;
- Volcano HyperNodes (`topology.volcano.sh/v1alpha1`): a tier-1 HyperNode is a leaf switch
  (rack), the tier-2 HyperNode holding it is a block (https://volcano.sh/en/docs/network_topology_aware_scheduling/).
  Resolved by `launcher.backends.kubernetes.snapshot` into the same position.

Oversubscription default 3 (3:1): the usual leaf design, e.g. 48 x 10 GbE server ports over
4 x 40 GbE spine uplinks = 480:160 (IBM, "Converged Networking: Over-Subscription Ratio",
https://mikenovahunter.medium.com/converged-networking-over-subscription-ratio-f1c74348a5f3;
the ratio is server bandwidth / uplink bandwidth per leaf, VMware Validated Design 4.0,
"Oversubscription in the leaf layer"). Leaf-spine fabrics are built from 1:1 to 3:1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_OVERSUBSCRIPTION = 3.0
LEVELS = ("zone", "block", "rack")


@dataclass(frozen=True)
class NetworkPosition:
    zone: str | None = None
    block: str | None = None
    rack: str | None = None
    # Server bandwidth : uplink bandwidth of this node's leaf switch (1 = non-blocking).
    oversubscription: float = DEFAULT_OVERSUBSCRIPTION
    # The node label keys that gave the rack and block (None when not from labels).
    rack_label: str | None = None
    block_label: str | None = None
    # The gang scheduler that knows these levels (its mpijob.gang name): Kueue or KAI (a
    # Topology object of theirs lists the labels), Volcano (from HyperNodes: rack = tier 1,
    # block = tier 2); and the name of that Topology object, which KAI's constraint names.
    scheduler: str | None = None
    topology: str | None = None

    @property
    def known(self) -> bool:
        return self.rack is not None or self.block is not None

    def rack_key(self, node: str) -> tuple:
        """Identifies the leaf switch; a node of unknown rack is a switch of its own."""
        if self.rack is None:
            return ("node", node)
        return (self.zone, self.block, self.rack)

    def block_key(self) -> tuple | None:
        return None if self.block is None else (self.zone, self.block)

    def describe(self) -> str:
        parts = [f"{level} {getattr(self, level)}" for level in ("rack", "block", "zone")
                 if getattr(self, level) is not None]
        return ", ".join(parts) or "position unknown"


UNKNOWN = NetworkPosition()


@dataclass(frozen=True)
class LabelKeys:
    """Node label keys of each level, the first present wins."""

    zone: tuple[str, ...] = ("topology.kubernetes.io/zone",)
    block: tuple[str, ...] = ("cloud.provider.com/topology-block", "network.topology.nvidia.com/spine")
    rack: tuple[str, ...] = ("cloud.provider.com/topology-rack", "network.topology.nvidia.com/leaf")


DEFAULT_LABEL_KEYS = LabelKeys()


def parse_label_keys(text: str) -> LabelKeys:
    """'rack=example.com/tor,block=example.com/spine' -> LabelKeys (unnamed levels keep
    their defaults). Raises ValueError naming what is wrong."""
    given: dict[str, tuple[str, ...]] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        level, eq, key = part.partition("=")
        level = level.strip()
        if not eq or level not in LEVELS or not key.strip():
            raise ValueError(f"{part!r}: expected LEVEL=LABEL_KEY with LEVEL one of {', '.join(LEVELS)}")
        given[level] = given.get(level, ()) + (key.strip(),)
    return LabelKeys(**{**DEFAULT_LABEL_KEYS.__dict__, **given})


def position_from_labels(labels: Mapping[str, str], keys: LabelKeys = DEFAULT_LABEL_KEYS,
                         oversubscription: float = DEFAULT_OVERSUBSCRIPTION) -> NetworkPosition:
    def first(candidates: tuple[str, ...]) -> str | None:
        for k in candidates:
            v = labels.get(k)
            if v:
                return v
        return None

    return NetworkPosition(zone=first(keys.zone), block=first(keys.block), rack=first(keys.rack),
                           oversubscription=oversubscription,
                           rack_label=label_key_for("rack", labels, keys),
                           block_label=label_key_for("block", labels, keys))


def label_key_for(level: str, labels: Mapping[str, str], keys: LabelKeys = DEFAULT_LABEL_KEYS) -> str | None:
    """The label key that gave `level` on a node with `labels` (what a gang scheduler
    must be told to keep the pods under)."""
    for k in getattr(keys, level):
        if labels.get(k):
            return k
    return None


def span(positions: list[tuple[str, NetworkPosition]]) -> dict[str, int]:
    """How many racks, blocks and zones the given (node, position) pairs touch."""
    racks = {p.rack_key(n) for n, p in positions}
    blocks = {p.block_key() or ("node", n) for n, p in positions}
    zones = {p.zone for _, p in positions}
    return {"racks": len(racks), "blocks": len(blocks), "zones": len(zones)}


@dataclass(frozen=True)
class Domain:
    """The smallest network domain holding a placement's nodes, for a gang scheduler."""

    level: str  # "rack" or "block"
    label: str | None  # the node label key of that level, when every node has the same
    scheduler: str | None  # the gang scheduler when every node's position names the same
    topology: str | None = None  # its Topology object, when every position names the same
    # For a block: the rack label key, the level inside it a scheduler may prefer.
    inner_label: str | None = None

    @property
    def volcano_tier(self) -> int:
        return 1 if self.level == "rack" else 2


def domain_of(positions: list[NetworkPosition]) -> Domain | None:
    if not positions:
        return None
    schedulers = {(p.scheduler, p.topology) for p in positions}
    scheduler, topology = schedulers.pop() if len(schedulers) == 1 else (None, None)
    for level in ("rack", "block"):
        values = {(p.zone, p.block, p.rack) if level == "rack" else (p.zone, p.block) for p in positions}
        if len(values) == 1 and getattr(positions[0], level) is not None:
            labels = {getattr(p, f"{level}_label") for p in positions}
            label = labels.pop() if len(labels) == 1 else None
            inner = {p.rack_label for p in positions} if level == "block" else set()
            return Domain(level, label, scheduler, topology,
                          inner.pop() if len(inner) == 1 else None)
    return None
