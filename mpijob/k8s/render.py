"""What the two renderers share: names, labels, resources, volumes and owner references.

`mpijob.k8s.manifests.render` picks the renderer (`render_pods` or `render_operator`); both, and
the gang objects of `mpijob.k8s.gang`, build on this module, which imports none of them.

Pure: the SSH keys, the benchmark source and the root's uid come in as arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from mpijob.jobspec import names
from mpijob.jobspec.quantity import scale_quantity
from mpijob.jobspec.spec import JobSpec
from mpijob.jobspec.worker_share import add_bytes, pod_defaults
from mpijob.wellknown import GPU_RESOURCE

if TYPE_CHECKING:  # placement is only a type here
    from mpijob.scheduling.placement import Placement

CONFIG_DIR = "/etc/hvdk8s"
SSH_DIR = "/etc/hvdk8s-ssh"


@dataclass(frozen=True)
class SSHKeys:
    private_key: str  # OpenSSH PEM
    public_key: str  # "ssh-ed25519 AAAA... comment"


@dataclass(frozen=True)
class WorkerPod:
    """One worker pod: where it goes, its GPUs and how many MPI slots it offers."""

    index: int
    node: str | None
    gpus: tuple[int, ...]
    gpu_count: int
    workers: int  # request workers merged into this pod (scales cpu/memory)

    @property
    def slots(self) -> int:
        return self.gpu_count or self.workers


def pod_script(name: str) -> str:
    return resources.files("mpijob.k8s.podscripts").joinpath(name).read_text()


def worker_pods(spec: JobSpec, placement: Placement | None) -> list[WorkerPod]:
    """The pod shape: one pod per placement assignment, or `workers` uniform pods."""
    if placement is None or not placement.feasible:
        return [
            WorkerPod(i, None, (), spec.gpus_per_worker, 1) for i in range(spec.workers)
        ]
    return [
        WorkerPod(i, a.node, tuple(a.gpus), len(a.gpus) if spec.gpus_per_worker else 0, a.workers)
        for i, a in enumerate(placement.assignments)
    ]


def owner_reference(root: dict, uid: str) -> dict:
    return {
        "apiVersion": root["apiVersion"],
        "kind": root["kind"],
        "name": root["metadata"]["name"],
        "uid": uid,
        "controller": False,
        "blockOwnerDeletion": True,
    }


def with_owner(objects: list[dict], root_uid: str, unowned: tuple[str, ...] = ()) -> list[dict]:
    """Every object after the first (the root) gets an ownerReference to the root, but for
    kinds in `unowned` (a gang scheduler's, mpijob.gang.GangScheduler.unowned_kinds)."""
    root, rest = objects[0], objects[1:]
    ref = owner_reference(root, root_uid)
    out = [root]
    for obj in rest:
        if obj.get("kind") not in unowned:
            obj = {**obj, "metadata": {**obj["metadata"], "ownerReferences": [ref]}}
        out.append(obj)
    return out


# --- pieces shared by both modes ---------------------------------------------------


def metadata(spec: JobSpec, name: str, *, role: str | None = None, index: int | None = None,
             extra_annotations: dict | None = None) -> dict:
    labels = {**spec.labels, **names.job_labels(spec.name)}
    if role:
        labels[names.LABEL_ROLE] = role
    if index is not None:
        labels[names.LABEL_INDEX] = str(index)
    meta: dict = {"name": name, "namespace": spec.namespace, "labels": labels}
    annotations = {**spec.annotations, **(extra_annotations or {})}
    if annotations:
        meta["annotations"] = annotations
    return meta


def root_annotations(spec: JobSpec, placement: Placement | None, prediction: dict | None) -> dict:
    """What `get` and the experiment runner read back: the spec, placement and prediction."""
    out = {names.ANNOTATION_SPEC: json.dumps(spec.model_dump(mode="json"), sort_keys=True,
                                             separators=(",", ":"))}
    if placement is not None and placement.feasible:
        out[names.ANNOTATION_PLACEMENT] = json.dumps(
            [{"node": a.node, "gpus": list(a.gpus)} for a in placement.assignments],
            separators=(",", ":"))
    if prediction is not None:
        out[names.ANNOTATION_PREDICTION] = json.dumps(prediction, sort_keys=True,
                                                      separators=(",", ":"))
    return out


def env_list(spec: JobSpec, extra: dict[str, str] | None = None) -> list[dict]:
    merged = {**spec.job_env, **(extra or {})}
    return [{"name": k, "value": v} for k, v in merged.items()]


def pod_common(spec: JobSpec) -> dict:
    """Scheduling fields every pod of the job shares."""
    pod: dict = {"enableServiceLinks": False}
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod["tolerations"] = [t.to_k8s() for t in spec.tolerations]
    if spec.priority_class:
        pod["priorityClassName"] = spec.priority_class
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in spec.image_pull_secrets]
    if spec.host_network:
        pod["hostNetwork"] = True
        # Keep cluster DNS (worker hostnames) working on the host network.
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    if spec.effective_scheduler_name:
        pod["schedulerName"] = spec.effective_scheduler_name
    return pod


def worker_requests(spec: JobSpec, pod: WorkerPod) -> tuple[str | None, str | None]:
    """(cpu, memory) the worker pod requests: --cpu/--memory per worker, else the plan's
    share of its node (mpijob.jobspec.worker_share); None where neither gives one."""
    cpu = scale_quantity(spec.cpu, pod.workers) if spec.cpu else None
    memory = scale_quantity(spec.memory, pod.workers) if spec.memory else None
    default = pod_defaults(spec.worker_shares, pod.node, pod.slots)
    if default is not None:
        cpu = cpu or default[0]
        memory = memory or default[1]
    return cpu, memory


def worker_resources(spec: JobSpec, pod: WorkerPod) -> dict:
    requests: dict = {}
    limits: dict = {}
    cpu, memory = worker_requests(spec, pod)
    if cpu:
        # A limit too, so a quota on limits.cpu admits the pod; equal to the request, the
        # share the plan gave it.
        requests["cpu"] = limits["cpu"] = cpu
    if memory:
        # /dev/shm is a Memory-backed emptyDir, charged to the pod's memory cgroup: the
        # limit is the request plus its sizeLimit, so a full /dev/shm does not OOM-kill
        # the ranks (kubernetes.io/docs/concepts/storage/volumes/#emptydir).
        requests["memory"] = memory
        limits["memory"] = add_bytes(memory, spec.shm_size)
    if pod.gpu_count:
        # Extended resources: the limit is what counts; the request must equal it.
        limits[GPU_RESOURCE] = requests[GPU_RESOURCE] = str(pod.gpu_count)
    out = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def launcher_resources(spec: JobSpec) -> dict:
    # The launcher only runs mpirun: no GPU, so it never takes one from a worker. Limits
    # too, so a quota on limits.cpu/limits.memory admits it; it writes nothing to /dev/shm.
    return {
        "requests": {"cpu": spec.launcher_cpu, "memory": spec.launcher_memory},
        "limits": {"cpu": spec.launcher_cpu, "memory": spec.launcher_memory},
    }


def node_affinity(nodes: list[str], *, required: bool = True) -> dict:
    """Pin to the planned nodes; with a gang scheduler only prefer them (required=False):
    the gang scheduler places the group when it fits, and a plan gone stale (a planned node
    filled up meanwhile) must not starve the job in its queue."""
    # matchFields on metadata.name pins to nodes without relying on a hostname label.
    term = {"matchFields": [{"key": "metadata.name", "operator": "In",
                             "values": sorted(set(nodes))}]}
    if not required:
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": term}]}}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}


def shm_volume(spec: JobSpec) -> dict:
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}}
