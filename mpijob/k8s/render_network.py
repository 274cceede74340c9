"""Tell the gang scheduler the network domain hvdk8s chose, so it enforces the same choice.

The snapshot marks a node position with the gang scheduler that knows its levels (a Kueue
Topology lists the level's label; Volcano HyperNodes gave it). Where the job's gang
scheduler is that one, it rewrites what it reads (mpijob.gang: Kueue's pod set topology
annotation on the MPIJob's worker template, Volcano's PodGroup networkTopology).
Pure: rewrites rendered objects (new dicts where it changes them).
"""

from __future__ import annotations

from mpijob import gang as gangs


def apply_network_topology(objects: list[dict], spec, placement) -> list[dict]:
    domain = getattr(placement, "network_domain", None) if placement is not None else None
    scheduler = gangs.get(spec.gang)
    if domain is None or scheduler is None or domain.scheduler != scheduler.name:
        return objects
    return [scheduler.with_network_topology(obj, domain) or obj for obj in objects]
