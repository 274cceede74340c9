"""Give a job's workers the IMEX channel of a ComputeDomain (mpijob.k8s.computedomain).

Where the placement says the job gets one (several nodes of one NVLink partition, on a
cluster that serves ComputeDomains: mpijob.scheduling.placement), the objects gain the
job's ComputeDomain, sized to its nodes (one worker pod per node), right after the root, so
the root owns it and deleting the job deletes it. Every worker pod (built-in mode) or the
MPIJob's worker template (operator mode) claims the channel through the template the
driver names after the domain, next to any GPU claims (mpijob.k8s.render_dra), and gets
required pod affinity on `nvidia.com/gpu.clique`, so a rescheduled or gang-placed worker
stays in the partition. The launcher claims nothing: it runs no GPU code.
Pure: returns new objects.
"""

from __future__ import annotations

import copy

from mpijob.jobspec import names
from mpijob.k8s.computedomain import CLAIM, channel_template_name, clique_affinity, compute_domain


def _claim_channel(pod_spec: dict, job: str) -> None:
    pod_spec["resourceClaims"] = [*(pod_spec.get("resourceClaims") or []),
                                  {"name": CLAIM, "resourceClaimTemplateName": channel_template_name(job)}]
    for c in pod_spec.get("containers") or []:
        res = c.setdefault("resources", {})
        res["claims"] = [*(res.get("claims") or []), {"name": CLAIM}]
    affinity = pod_spec.setdefault("affinity", {})
    affinity["podAffinity"] = clique_affinity(job)


def apply_compute_domain(objects: list[dict], spec, placement) -> list[dict]:
    if placement is None or not getattr(placement, "compute_domain", False):
        return objects
    out: list[dict] = []
    for obj in objects:
        kind = obj.get("kind")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if kind == "Pod" and labels.get(names.LABEL_ROLE) == names.ROLE_WORKER:
            obj = copy.deepcopy(obj)
            _claim_channel(obj["spec"], spec.name)
        elif kind == "MPIJob":
            obj = copy.deepcopy(obj)
            _claim_channel(obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"], spec.name)
        out.append(obj)
    out.insert(1, compute_domain(spec.name, spec.namespace, placement.nodes_used))
    return out
