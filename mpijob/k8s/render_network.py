"""Tell the gang scheduler the network domain hvdk8s chose, so it enforces the same choice.

- Kueue topology-aware scheduling: the pod template annotation
  `kueue.x-k8s.io/podset-required-topology: <node label of the level>` makes Kueue admit the
  pod set only inside one domain of that level (Kueue docs, "Run Workloads with
  Topology-Aware Scheduling", https://kueue.sigs.k8s.io/docs/tasks/run/topology_aware_scheduling/;
  `podset-preferred-topology` is the soft form). Emitted when the level's label is one a
  Kueue Topology object lists (the snapshot marks such positions `scheduler="kueue"`).
- Volcano network-topology-aware scheduling: `spec.networkTopology: {mode: hard,
  highestTierAllowed: N}` on the PodGroup keeps the whole group inside one HyperNode of
  tier <= N (Volcano docs, "Network Topology Aware Scheduling",
  https://volcano.sh/en/docs/network_topology_aware_scheduling/, section "Network Topology
  Constraints"). Emitted when the positions came from HyperNodes (`scheduler="volcano"`):
  tier 1 for one rack, 2 for one block. In operator mode the MPI operator makes the PodGroup
  from `runPolicy.schedulingPolicy`, which has no such field: not emitted there.
Pure: rewrites rendered objects (new dicts where it changes them).
"""

from __future__ import annotations

import copy

from mpijob.jobspec import names

KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
VOLCANO_PODGROUP = "scheduling.volcano.sh/v1beta1"


def _is_worker_pod(obj: dict) -> bool:
    return (obj.get("kind") == "Pod"
            and (obj.get("metadata") or {}).get("labels", {}).get(names.LABEL_ROLE) == names.ROLE_WORKER)


def apply_network_topology(objects: list[dict], spec, placement) -> list[dict]:
    domain = getattr(placement, "network_domain", None) if placement is not None else None
    if domain is None or spec.gang not in ("kueue", "volcano") or domain.scheduler != spec.gang:
        return objects
    out = []
    for obj in objects:
        if spec.gang == "kueue" and domain.label:
            if _is_worker_pod(obj):
                obj = copy.deepcopy(obj)
                obj["metadata"].setdefault("annotations", {})[KUEUE_REQUIRED_TOPOLOGY] = domain.label
            elif obj.get("kind") == "MPIJob":
                obj = copy.deepcopy(obj)
                meta = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"].setdefault("metadata", {})
                meta.setdefault("annotations", {})[KUEUE_REQUIRED_TOPOLOGY] = domain.label
        if (spec.gang == "volcano" and obj.get("kind") == "PodGroup"
                and obj.get("apiVersion") == VOLCANO_PODGROUP):
            obj = copy.deepcopy(obj)
            obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": domain.volcano_tier}
        out.append(obj)
    return out
