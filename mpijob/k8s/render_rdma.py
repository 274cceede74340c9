"""The worker pods' RDMA devices and other extended resources, and IPC_LOCK.

A rewrite of rendered objects (both modes), so the renderers stay as they are:
- `spec.rdma_request` (decided by the plan, mpijob.scheduling.rdma): the resource, one per
  worker pod for a shared HCA or one per GPU for SR-IOV VFs, and the IPC_LOCK capability
  (NCCL registers its buffers with ibv_reg_mr, which pins memory past the default memlock
  limit; the Network Operator's RDMA examples add IPC_LOCK for the same reason). NCCL's
  settings (NCCL_IB_HCA ...) are in the job's environment (JobSpec.job_env), which mpirun
  forwards to every rank.
  NICs paired with the GPUs through DRA (`rdma_request.nic_driver`) are in the GPU claim
  (mpijob.k8s.render_dra), not resources: those pods get IPC_LOCK only.
- `spec.extra_resources`: --extra-resource NAME=N, on every worker pod.
Extended resources are requested as limits and requests alike: the API server requires
them equal (k8s.io/kubernetes pkg/apis/core/validation: "must be equal to ... limit" for
resources that cannot be overcommitted).
Pure: new dicts where it changes them.
"""

from __future__ import annotations

import copy

from mpijob.jobspec import names
from mpijob.wellknown import GPU_RESOURCE

IPC_LOCK = "IPC_LOCK"


def is_worker_pod(obj: dict) -> bool:
    return (obj.get("kind") == "Pod"
            and (obj.get("metadata") or {}).get("labels", {}).get(names.LABEL_ROLE) == names.ROLE_WORKER)


def _pod_gpus(pod_meta: dict, container: dict, fallback: int) -> int:
    listed = (pod_meta.get("annotations") or {}).get(names.ANNOTATION_GPUS)
    if listed:
        return len(listed.split(","))
    limit = ((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
    return int(limit) if limit else fallback


def worker_devices(spec, gpus: int) -> dict[str, str]:
    """Extended resources one worker pod with `gpus` GPUs requests besides its GPUs."""
    out = {name: str(count) for name, count in spec.extra_resources.items()}
    req = spec.rdma_request
    if req is not None and req.nic_driver is None:
        out[req.resource] = str(max(1, gpus) if req.per_gpu else 1)
    return out


def _patch_container(spec, container: dict, gpus: int) -> None:
    devices = worker_devices(spec, gpus)
    if devices:
        res = container.setdefault("resources", {})
        res.setdefault("limits", {}).update(devices)
        res.setdefault("requests", {}).update(devices)
    if spec.rdma_request is not None:
        caps = container.setdefault("securityContext", {}).setdefault("capabilities", {})
        added = caps.setdefault("add", [])
        if IPC_LOCK not in added:
            added.append(IPC_LOCK)


def apply_rdma(objects: list[dict], spec) -> list[dict]:
    if spec.rdma_request is None and not spec.extra_resources:
        return objects
    out = []
    for obj in objects:
        if is_worker_pod(obj):
            obj = copy.deepcopy(obj)
            for c in obj["spec"]["containers"]:
                _patch_container(spec, c, _pod_gpus(obj["metadata"], c, spec.gpus_per_worker))
        elif obj.get("kind") == "MPIJob":
            obj = copy.deepcopy(obj)
            worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]
            slots = obj["spec"].get("slotsPerWorker") or spec.gpus_per_worker
            for c in worker["template"]["spec"]["containers"]:
                _patch_container(spec, c, slots if spec.gpus_per_worker else 0)
        out.append(obj)
    return out
