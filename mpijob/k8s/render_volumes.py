"""Add the job's data and pod fields to the rendered pods, in both modes.

- `--data PVC:MOUNT[:ro]`: a persistentVolumeClaim volume `data-<i>` mounted in every
  worker container, and in the launcher's when the user's own `mpirun` line runs there
  (what it runs before mpirun may read the data); the built-in launch line only starts
  mpirun, which reads nothing of it.
- `--data-dir HOSTPATH:MOUNT`: a hostPath volume `hostdir-<i>` of type Directory (the
  kubelet refuses to start the pod when the node lacks it, rather than creating an empty
  directory) mounted the same way.
- `--working-dir DIR`: the launcher's and the workers' workingDir; OpenMPI's mpirun sends
  its own directory to the ranks (mpirun(1), "Current Working Directory"), so both agree.
- `--service-account NAME`: every pod's serviceAccountName.

Pure: returns new objects; what it does not touch is returned as it came.
"""

from __future__ import annotations

from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.pod_templates import with_pod_templates
from mpijob.k8s.render import worker_pods
from mpijob.k8s.render_operator import operator_shape


def launcher_mounts_data(spec: JobSpec) -> bool:
    """The user's own launch line runs in the launcher container."""
    return spec.user_gives_mpirun


def _volumes(spec: JobSpec) -> tuple[list[dict], list[dict]]:
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


def _apply(pod_spec: dict, spec: JobSpec, container: str, with_data: bool) -> None:
    volumes, mounts = _volumes(spec)
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
    for c in pod_spec.get("containers") or []:
        if c.get("name") != container:
            continue
        if spec.working_dir:
            c["workingDir"] = spec.working_dir
        if with_data and mounts:
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), *mounts]
    if with_data and volumes:
        pod_spec["volumes"] = [*(pod_spec.get("volumes") or []), *volumes]


def _touches(spec: JobSpec) -> bool:
    return bool(spec.data or spec.data_dirs or spec.working_dir or spec.service_account)


def apply_volumes(objects: list[dict], spec: JobSpec) -> list[dict]:
    if not _touches(spec):
        return objects
    launcher_data = launcher_mounts_data(spec)

    def with_volumes(template: dict, role: str) -> dict:
        if role == names.ROLE_LAUNCHER:
            _apply(template["spec"], spec, "launcher", launcher_data)
        else:
            _apply(template["spec"], spec, "worker", True)
        return template

    return with_pod_templates(objects, with_volumes)


def data_pod_nodes(spec: JobSpec, placement, mode: str) -> tuple[list[str | None], bool]:
    """The planned node of every pod that mounts the job's claims (None: not known), and
    whether the pods are held there (required node affinity: no gang scheduler)."""
    pinned = spec.gang == "none"
    if mode == "operator":
        shape = operator_shape(spec, placement)
        nodes: list[str | None] = (list(shape.nodes) if len(shape.nodes) == shape.replicas
                                   else [None] * shape.replicas)
    else:
        nodes = [p.node for p in worker_pods(spec, placement)]
    if launcher_mounts_data(spec):
        nodes.append(None)  # the launcher goes where the default scheduler puts it
    return nodes, pinned
