"""Built-in mode, elastic (mpijob.jobspec.elastic): the rendered job turned into one that
looks after itself.

- The worker pods become one Indexed batch/v1 Job, `<job>-worker`, with completions =
  parallelism = the workers to start with. The Job controller names each pod's hostname
  `<job>-worker-<index>` in the Service's subdomain (the names the hostfile already uses),
  replaces a worker pod that dies (same index, a new pod and address), and runs more or
  fewer when `hvdk8s scale` changes completions and parallelism together (elastic Indexed
  Jobs, KEP-3715, beta since Kubernetes 1.27): pods past the new completions are deleted.
  A worker released by the launcher exits 0, its index succeeds, and it is not replaced.
- A second headless Service, `<job>-ready`, publishes only Ready workers (readiness: their
  sshd answers), so cluster DNS lists the live workers; Horovod's host discovery script
  reads it (no API access).
- The launcher runs `horovodrun` elastic over Gloo (--min-np/--max-np in slots) through
  `elastic.sh`, which waits for the minimum, then hands over to launcher.sh.

Pure: objects in, objects out.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.command import program_argv
from mpijob.k8s.render import metadata, node_affinity, pod_script
from mpijob.wellknown import GPU_RESOURCE

if TYPE_CHECKING:
    from mpijob.scheduling.placement import Placement

ELASTIC_DIR = "/etc/hvdk8s-elastic"
BENCHMARK = f"{ELASTIC_DIR}/hvd_cnn_bench.py"
# How long horovodrun waits for at least --min-np slots after a worker is lost before it
# fails the job (its --elastic-timeout): the grace period below the minimum.
GRACE_SECONDS = 600
# A worker pod may be replaced this many times over the job (each counts as a failure).
REPLACEMENTS = 1000
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def ready_service_name(job: str) -> str:
    return f"{job}-ready"


def worker_job_name(job: str) -> str:
    # The Job controller gives each pod the hostname <Job name>-<index>: the worker names.
    return names.service(job)


def slots(spec: JobSpec) -> int:
    return spec.gpus_per_worker or 1


def horovodrun_argv(spec: JobSpec) -> list[str]:
    s = slots(spec)
    if spec.runs_benchmark:  # its elastic loop (elastic.py) lies beside it, here
        program = [*program_argv(spec, script=BENCHMARK), "--elastic"]
    else:
        program = program_argv(spec)
    # Horovod finds the interfaces the hosts share by probing two of them, which a job
    # down to one worker does not have: the pod network's is eth0.
    nic = spec.network_interface if spec.host_network else "eth0"
    return ["horovodrun", "--gloo",
            "-np", str(spec.workers * s), "--min-np", str(spec.min_size * s),
            "--max-np", str(spec.max_size * s),
            "--host-discovery-script", f"{ELASTIC_DIR}/discover_hosts.sh",
            "--elastic-timeout", str(GRACE_SECONDS),
            *(["--network-interface", nic] if nic else []),
            # No --ssh-port/--ssh-identity-file: horovodrun runs `ssh` from PATH, which
            # launcher.sh makes its wrapper with the job's key, port and no host key check.
            *program]


def _config_map(spec: JobSpec, benchmark_source: str | None,
                elastic_source: str | None) -> dict:
    data = {"discover_hosts.sh": pod_script("discover_hosts.sh"),
            "elastic.sh": pod_script("elastic.sh")}
    if spec.runs_benchmark:
        if benchmark_source is None or elastic_source is None:
            raise ValueError("the elastic benchmark runs from its ConfigMap: pass both sources")
        data["hvd_cnn_bench.py"] = benchmark_source
        data["elastic.py"] = elastic_source
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(spec, f"{spec.name}-elastic"), "data": data}


def _mount_elastic(pod: dict, spec: JobSpec) -> None:
    pod["volumes"] = [*pod["volumes"], {"name": "hvdk8s-elastic", "configMap": {
        "name": f"{spec.name}-elastic", "defaultMode": 0o755}}]
    for c in pod["containers"]:
        c["volumeMounts"] = [*c["volumeMounts"], {"name": "hvdk8s-elastic",
                                                  "mountPath": ELASTIC_DIR, "readOnly": True}]


def _ready_service(spec: JobSpec) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(spec, ready_service_name(spec.name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": False,
                     "selector": {names.LABEL_JOB: spec.name,
                                  names.LABEL_ROLE: names.ROLE_WORKER},
                     "ports": [{"name": "ssh", "port": spec.ssh_port,
                                "targetPort": spec.ssh_port}]}}


def _per_worker(container: dict, spec: JobSpec) -> dict:
    """A merged pod's resources, as one worker's: one pod per worker, so that a lost pod
    is a lost worker and the discovery's slots are its GPUs."""
    c = copy.deepcopy(container)
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        if GPU_RESOURCE in res.get(part, {}):
            res[part][GPU_RESOURCE] = str(spec.gpus_per_worker)
        for key in ("cpu", "memory"):
            if key in res.get(part, {}) and not getattr(spec, key):
                # A placement's node share was for the merged pod: let --cpu/--memory or
                # nothing decide for one worker.
                del res[part][key]
        if part in res and not res[part]:
            del res[part]
    if not res:
        c.pop("resources", None)
    return c


def _worker_job(spec: JobSpec, pod: dict, nodes: list[str]) -> dict:
    pm = pod["metadata"]
    labels = {k: v for k, v in pm["labels"].items() if k != names.LABEL_INDEX}
    annotations = {k: v for k, v in (pm.get("annotations") or {}).items()
                   if k != names.ANNOTATION_GPUS}  # planned GPU indices: the kubelet picks
    body = {k: v for k, v in pod["spec"].items() if k not in ("hostname", "affinity")}
    body["containers"] = [_per_worker(c, spec) for c in body["containers"]]
    _mount_elastic(body, spec)
    if nodes:
        body["affinity"] = node_affinity(nodes, required=spec.gang == "none")
    tmeta: dict = {"labels": labels}
    if annotations:
        tmeta["annotations"] = annotations
    meta = metadata(spec, worker_job_name(spec.name), role=names.ROLE_WORKER)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "completionMode": "Indexed", "completions": spec.workers, "parallelism": spec.workers,
        "backoffLimit": REPLACEMENTS, "template": {"metadata": tmeta, "spec": body}}}


def _launcher(job: dict, spec: JobSpec) -> dict:
    job = copy.deepcopy(job)
    pod = job["spec"]["template"]["spec"]
    _mount_elastic(pod, spec)
    (c,) = pod["containers"]
    c["command"] = ["/bin/sh", f"{ELASTIC_DIR}/elastic.sh", *horovodrun_argv(spec)]
    c["env"] = [*c["env"],
                {"name": "HVDK8S_MIN_WORKERS", "value": str(spec.min_size)},
                {"name": "HVDK8S_SLOTS", "value": str(slots(spec))},
                {"name": "HVDK8S_READY_SERVICE",
                 "value": f"{ready_service_name(spec.name)}.{spec.namespace}.svc"}]
    return job


def apply_elastic(objects: list[dict], spec: JobSpec, placement: Placement | None,
                  benchmark_source: str | None = None,
                  elastic_source: str | None = None) -> list[dict]:
    """The built-in job's objects made elastic (module docstring); others pass unchanged."""
    if not spec.elastic:
        return objects
    workers = [o for o in objects if o.get("kind") == "Pod" and o["metadata"]["labels"].get(
        names.LABEL_ROLE) == names.ROLE_WORKER]
    if not workers:
        return objects
    nodes = sorted({a.node for a in placement.assignments}) if (
        placement is not None and placement.feasible) else []
    out = []
    for obj in objects:
        if obj is workers[0]:
            out += [_config_map(spec, benchmark_source, elastic_source), _ready_service(spec),
                    _worker_job(spec, obj, nodes)]
        elif obj in workers:
            continue
        elif obj.get("kind") == "Job" and obj["metadata"]["labels"].get(
                names.LABEL_ROLE) == names.ROLE_LAUNCHER:
            out.append(_launcher(obj, spec))
        else:
            out.append(obj)
    return out
