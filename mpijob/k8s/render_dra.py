"""Rewrite rendered worker pods to take their GPUs through DRA claims (mpijob.k8s.dra).

Per worker pod (built-in mode) one ResourceClaimTemplate `<pod>-gpus` selecting exactly
the pod's planned GPUs; the pod lists it in `spec.resourceClaims` and its container in
`resources.claims`, and asks no `nvidia.com/gpu`. Operator mode: one template
`<job>-worker-gpus` for the MPIJob's worker template, selecting every planned GPU of the
job (UUIDs are unique, so each node-pinned pod gets its own node's planned GPUs).
Where the plan paired the GPUs with DRA NICs (`spec.rdma_request.nic_driver`), each claim
asks, per GPU, for the NIC under its PCIe root (mpijob.k8s.dra.paired_request).
Pure: returns new objects, the templates before the pods that use them.
"""

from __future__ import annotations

import copy

from mpijob.jobspec import names
from mpijob.k8s.dra import REQUEST, claim_template
from mpijob.wellknown import GPU_RESOURCE


def _strip_gpu_and_claim(pod_spec: dict) -> int:
    """Drop nvidia.com/gpu from the worker container and point it at the claim; the count."""
    count = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            amount = (res.get(part) or {}).pop(GPU_RESOURCE, None)
            if amount is not None:
                count = max(count, int(amount))
            if part in res and not res[part]:
                del res[part]
        if count:
            res["claims"] = [{"name": REQUEST}]
            c["resources"] = res
    return count


def apply_dra(objects: list[dict], spec, placement) -> list[dict]:
    if getattr(spec, "gpu_request", "device-plugin") != "dra" or not spec.gpus_per_worker:
        return objects
    assignments = list(placement.assignments) if placement is not None and placement.feasible else []
    labels = names.job_labels(spec.name)
    rdma = getattr(spec, "rdma_request", None)
    nic_driver = rdma.nic_driver if rdma is not None else None
    out: list[dict] = []
    worker_index = 0
    for obj in objects:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind == "Pod" and meta.get("labels", {}).get(names.LABEL_ROLE) == names.ROLE_WORKER:
            obj = copy.deepcopy(obj)
            count = _strip_gpu_and_claim(obj["spec"])
            if count:
                a = assignments[worker_index] if worker_index < len(assignments) else None
                uuids = list(a.device_uuids) if a is not None else []
                template = f"{meta['name']}-gpus"
                out.append(claim_template(template, meta.get("namespace", spec.namespace),
                                          labels, count, uuids, nic_driver))
                obj["spec"]["resourceClaims"] = [{"name": REQUEST, "resourceClaimTemplateName": template}]
            worker_index += 1
        elif kind == "MPIJob":
            obj = copy.deepcopy(obj)
            pod_spec = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
            count = _strip_gpu_and_claim(pod_spec)
            if count:
                uuids = [u for a in assignments for u in a.device_uuids]
                template = f"{spec.name}-worker-gpus"
                out.append(claim_template(template, spec.namespace, labels, count, uuids,
                                          nic_driver))
                pod_spec["resourceClaims"] = [{"name": REQUEST, "resourceClaimTemplateName": template}]
            out.insert(0, obj)  # the MPIJob stays the root (first object)
            continue
        out.append(obj)
    return out
