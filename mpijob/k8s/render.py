"""What the builders share: names, labels, scheduling fields, volumes, the fields every
pod and container of the job ends with, and owner references.

The Kubernetes backend's rendering (launcher.backends.kubernetes.rendering) picks the
builder (`render_pods`, `render_operator` or `render_trainjob`); they, and the gang objects
of `mpijob.k8s.gang`, build on this module, which imports none of them.

Pure: the SSH keys, the benchmark source and the root's uid come in as arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from mpijob.jobspec import names
from mpijob.jobspec.decisions import Decisions, record
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.security import (
    HOME_VOLUME,
    RUN_AS_HOME,
    container_security_context,
    pod_security_context,
)

if TYPE_CHECKING:  # placement is only a type here
    from mpijob.scheduling.placement import Placement

CONFIG_DIR = "/etc/hvdk8s"
CONFIG_VOLUME = "hvdk8s-config"  # the volume of the files under CONFIG_DIR
SSH_DIR = "/etc/hvdk8s-ssh"


@dataclass(frozen=True)
class SSHKeys:
    private_key: str  # OpenSSH PEM
    public_key: str  # "ssh-ed25519 AAAA... comment"


def pod_script(name: str) -> str:
    return resources.files("mpijob.k8s.podscripts").joinpath(name).read_text()


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


def metadata(spec: JobSpec, name: str | None, *, role: str | None = None,
             index: int | None = None, extra_annotations: dict | None = None) -> dict:
    """An object's metadata; `name` None: a pod template's (labels and annotations only)."""
    labels = {**spec.labels, **names.job_labels(spec.name)}
    if role:
        labels[names.LABEL_ROLE] = role
    if index is not None:
        labels[names.LABEL_INDEX] = str(index)
    meta: dict = ({"name": name, "namespace": spec.namespace, "labels": labels}
                  if name is not None else {"labels": labels})
    annotations = {**spec.annotations, **(extra_annotations or {})}
    if annotations:
        meta["annotations"] = annotations
    return meta


def root_annotations(spec: JobSpec, decided: Decisions, placement: Placement | None,
                     prediction: dict | None) -> dict:
    """What `get` and the experiment runner read back: the spec with the plan's decisions
    (mpijob.jobspec.decisions.record), placement and prediction."""
    out = {names.ANNOTATION_SPEC: json.dumps(record(spec, decided), sort_keys=True,
                                             separators=(",", ":"))}
    if placement is not None and placement.feasible:
        out[names.ANNOTATION_PLACEMENT] = json.dumps(
            [{"node": a.node, "gpus": list(a.gpus)} for a in placement.assignments],
            separators=(",", ":"))
    if prediction is not None:
        out[names.ANNOTATION_PREDICTION] = json.dumps(prediction, sort_keys=True,
                                                      separators=(",", ":"))
    return out


def env_list(spec: JobSpec, decided: Decisions, extra: dict[str, str] | None = None) -> list[dict]:
    merged = {**decided.job_env(spec), **(extra or {})}
    return [{"name": k, "value": v} for k, v in merged.items()]


def pod_common(spec: JobSpec, *, gang: bool = True) -> dict:
    """Scheduling fields every pod of the job shares; the launcher's (gang False) leaves
    the scheduler to the cluster's default: it starts after the gang is placed."""
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
    if gang and spec.effective_scheduler_name:
        pod["schedulerName"] = spec.effective_scheduler_name
    return pod


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


def data_volumes(spec: JobSpec) -> tuple[list[dict], list[dict]]:
    """(volumes, mounts) of the job's data:
    - `--data PVC:MOUNT[:ro]`: a persistentVolumeClaim volume `data-<i>`;
    - `--data-dir HOSTPATH:MOUNT`: a hostPath volume `hostdir-<i>` of type Directory (the
      kubelet refuses to start the pod when the node lacks it, rather than creating an
      empty directory)."""
    volumes: list[dict] = []
    mounts: list[dict] = []
    for i, d in enumerate(spec.data):
        name = f"data-{i}"
        claim: dict = {"claimName": d.claim}
        if d.read_only:
            claim["readOnly"] = True
        volumes.append({"name": name, "persistentVolumeClaim": claim})
        mounts.append({"name": name, "mountPath": d.mount, **({"readOnly": True} if d.read_only else {})})
    for i, h in enumerate(spec.data_dirs):
        name = f"hostdir-{i}"
        volumes.append({"name": name, "hostPath": {"path": h.path, "type": "Directory"}})
        mounts.append({"name": name, "mountPath": h.mount, **({"readOnly": True} if h.read_only else {})})
    return volumes, mounts


def launcher_mounts_data(spec: JobSpec) -> bool:
    """The user's own launch line runs in the launcher container, and what it runs before
    mpirun may read the data; the built-in launch line only starts mpirun."""
    return spec.user_gives_mpirun


def finish_container(spec: JobSpec, container: dict, *, data: bool,
                     ipc_lock: bool = False) -> dict:
    """What every container of the job ends with: the run-as home (mpijob.k8s.security),
    the data mounts, its security context (IPC_LOCK where NCCL pins RDMA buffers) and
    `--working-dir` (OpenMPI's mpirun sends its own directory to the ranks, mpirun(1)
    "Current Working Directory", so launcher and workers agree)."""
    c = dict(container)
    mounts = list(c.get("volumeMounts") or [])
    if spec.run_as_user is not None:
        c["env"] = [*(c.get("env") or []), {"name": "HOME", "value": RUN_AS_HOME}]
        mounts.append({"name": HOME_VOLUME, "mountPath": RUN_AS_HOME})
    if data:
        mounts += data_volumes(spec)[1]
    c["volumeMounts"] = mounts
    if (ctx := container_security_context(spec, ipc_lock=ipc_lock)) is not None:
        c["securityContext"] = ctx
    if spec.working_dir:
        c["workingDir"] = spec.working_dir
    return c


def finish_pod(spec: JobSpec, body: dict, *, data: bool, claims: Sequence[dict] = ()) -> dict:
    """What every pod spec of the job ends with: the run-as home volume, the data volumes,
    no service account token unless one is asked for (CIS Kubernetes Benchmark 5.1.6: the
    training program needs no API access), the pod's security context, its resource
    claims and `--service-account`."""
    out = dict(body)
    volumes = list(out.get("volumes") or [])
    if spec.run_as_user is not None:
        volumes.append({"name": HOME_VOLUME, "emptyDir": {}})
    if data:
        volumes += data_volumes(spec)[0]
    out["volumes"] = volumes
    if not spec.service_account:
        out["automountServiceAccountToken"] = False
    if (ctx := pod_security_context(spec)) is not None:
        out["securityContext"] = ctx
    if claims:
        out["resourceClaims"] = list(claims)
    if spec.service_account:
        out["serviceAccountName"] = spec.service_account
    return out
