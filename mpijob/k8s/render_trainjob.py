"""Trainer mode: one trainer.kubeflow.org TrainJob for Kubeflow Trainer (v2).

Trainer builds the pods: its controller reads the training runtime the TrainJob names and
makes a JobSet with the replicated jobs `node` and `launcher`, the hostfile ConfigMap and
the SSH Secret (its MPI plugin). What hvdk8s decides travels in the TrainJob:
- `trainer` (applied to the `node` job, the runtime's trainer): the image, the job's
  environment, the node count and processes per node (the placement's uniform shape, as
  operator mode's) and resourcesPerNode (each node pod's GPUs, CPU and memory);
- `runtimePatches` (one entry, manager hvdk8s.io/placement): the pods' labels, node
  affinity to the planned nodes with one node pod per node, volumes (the job's ConfigMap
  with the launch script and the benchmark), security context, tolerations and node
  selector: the only pod fields a runtime patch may carry (trainjob_types.go
  PodSpecPatch), so what needs more (DRA claims, host network, RDMA devices, Multus
  networks, pod patches) is refused with the modes that carry it.

The runtime is hvdk8s's own ClusterTrainingRuntime (`horovod_runtime`, installed by
`hvdk8s install runtime`): mlPolicy.mpi with the launcher apart (runLauncherAsNode false:
it holds no GPU, as in the other modes), nodes running sshd. A runtime's pods run its
template's image, so each image has its own runtime (pkg/runtime/framework/plugins/jobset/
builder.go Trainer sets only the trainer job's image; pkg/runtime/core/trainingruntime.go
newRuntimeInfo its resources).

Followed at Kubeflow Trainer v2.3.0 (docs/trainer.md). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import shlex

from mpijob import gang as gangs
from mpijob.errors import SpecError
from mpijob.jobspec import names
from mpijob.jobspec.decisions import Choices, Decisions
from mpijob.jobspec.spec import JobSpec, option_of
from mpijob.k8s import monitor, pod_files, trainer_progress
from mpijob.k8s.command import (
    BENCHMARK_IN_POD,
    TRAINER_STATUS_IN_POD,
    launch_argv,
    operator_sshd,
    preflight_config,
    shell_join,
    wait_then_launch,
)
from mpijob.k8s.pod_files import PodFiles
from mpijob.k8s.render import (
    CONFIG_DIR,
    CONFIG_VOLUME,
    data_volumes,
    env_list,
    launcher_mounts_data,
    launcher_resources,
    metadata,
    node_affinity,
    pod_script,
    root_annotations,
    shm_volume,
)
from mpijob.k8s.security import (
    HOME_VOLUME,
    RUN_AS_HOME,
    container_security_context,
    pod_security_context,
)
from mpijob.k8s.trainer_progress import StatusEndpoint
from mpijob.k8s.workload import Workload
from mpijob.wellknown import MPI_HOSTFILE, TRAINER_GROUP, TRAINER_LAUNCHER, TRAINER_NODE

GROUP = TRAINER_GROUP
# Trainer v2.3.0 serves v1alpha1 only (manifests/base/crds); the backend renders the
# newest version a cluster serves (launcher.backends.kubernetes.client.TRAINJOBS).
VERSION = "v1alpha1"
RUNTIME_KIND = "ClusterTrainingRuntime"
# pkg/constants/constants.go
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE, LAUNCHER = TRAINER_NODE, TRAINER_LAUNCHER
ROOT_SSH = "/root/.ssh"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
# A runtime patch's manager must be a domain-prefixed path (plugins/jobset Validate).
PATCH_MANAGER = f"{names.GROUP}/placement"
ANNOTATION_RUNTIME_IMAGE = f"{names.GROUP}/image"
LAUNCH_SCRIPT = "launch.sh"


def api_version(version: str = VERSION) -> str:
    return f"{GROUP}/{version}"


def runtime_name(spec: JobSpec) -> str:
    """hvdk8s's runtime for this job: a runtime's pods run its template's image, sshd port,
    SSH mount and launcher size, so each set of them has its own (named by their hash)."""
    key = json.dumps(_runtime_spec(spec), sort_keys=True, separators=(",", ":"))
    return f"hvdk8s-horovod-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def ssh_mount(spec: JobSpec) -> str:
    return f"{RUN_AS_HOME}/.ssh" if spec.run_as_user is not None else ROOT_SSH


def refusal(spec: JobSpec, decided: Decisions | None = None) -> SpecError | None:
    """What a TrainJob cannot carry: a runtime patch holds only some pod fields
    (trainjob_types.go PodSpecPatch), and the MPI plugin speaks OpenMPI only (mpi.go).
    `decided`: the plan's decisions, where there is a plan."""
    dra = spec.gpu_request == "dra" or (decided is not None and decided.gpu_request == "dra")
    rdma = decided is not None and decided.rdma_request is not None
    checks = (
        (spec.mpi_implementation != "OpenMPI", "mpi_implementation",
         "Kubeflow Trainer's MPI plugin runs OpenMPI only"),
        (spec.host_network, "host_network", "a TrainJob cannot put its pods on the host network"),
        (dra, "gpu_request",
         "a TrainJob's runtime patch cannot carry DRA resource claims"),
        (bool(spec.networks), "networks", "a TrainJob's runtime patch cannot carry Multus networks"),
        (spec.rdma == "on" or rdma or bool(spec.extra_resources),
         "rdma",
         "a TrainJob's runtime patch cannot carry RDMA devices"),
        (bool(spec.pod_patches), "pod_patches", "a TrainJob carries no pod patches"),
        (spec.working_dir is not None, "working_dir",
         "a TrainJob's runtime patch cannot set a container's working directory"),
    )
    for bad, field, why in checks:
        if bad:
            return SpecError(field, why, option_of(field))
    return None


def within_trainjob(spec: JobSpec) -> Choices:
    """--rdma auto and --gpu-request auto as a TrainJob can carry them (`refusal`): no RDMA
    devices, GPUs by the device plugin's count. What the user named stays, to be refused."""
    return Choices(rdma="off" if spec.rdma == "auto" else spec.rdma,
                   gpu_request="device-plugin" if spec.gpu_request == "auto" else spec.gpu_request)


def _runtime_spec(spec: JobSpec) -> dict:
    """The runtime's spec: mlPolicy.mpi; a `node` job running sshd, the trainer, so the
    TrainJob's image, environment, resources and node count go to it (plugins/jobset/
    builder.go Trainer, core/trainingruntime.go newRuntimeInfo); and a `launcher` job,
    started once every node is Ready (dependsOn), running the job's launch script from its
    ConfigMap (a runtime patch mounts it: a patch may not set a command or environment).
    Neither pod mounts a ServiceAccount token (the training program needs no API access;
    a TrainJob's patch cannot turn it back on: PodSpecPatch has no such field, so with
    --service-account the pods run as that account, without its token)."""
    sshd = {"name": NODE, "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
            "command": operator_sshd(["-p", str(spec.ssh_port)]),
            "readinessProbe": {"tcpSocket": {"port": spec.ssh_port}, "periodSeconds": 2}}
    launcher = {"name": NODE, "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
                "command": ["/bin/sh", f"{CONFIG_DIR}/{LAUNCH_SCRIPT}"],
                "resources": launcher_resources(spec),
                # the launch script's monitor marks a stall for it (mpijob.k8s.monitor)
                "readinessProbe": monitor.readiness_probe()}
    return {
        "mlPolicy": {"numNodes": 1, "mpi": {
            "numProcPerNode": 1, "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": ssh_mount(spec), "runLauncherAsNode": False}},
        "template": {"spec": {
            "network": {"publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
            "replicatedJobs": [
                # The first replicated job may not use dependsOn (JobSet's API).
                {"name": NODE, "template": {
                    "metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}},
                    "spec": {"backoffLimit": 0, "template": {"spec": {
                        "restartPolicy": "Never", "automountServiceAccountToken": False,
                        "containers": [sshd]}}}}},
                {"name": LAUNCHER, "dependsOn": [{"name": NODE, "status": "Ready"}],
                 "template": {"spec": {"backoffLimit": 0, "template": {"spec": {
                     "restartPolicy": "Never", "automountServiceAccountToken": False,
                     "containers": [launcher]}}}}},
            ]}},
    }


def horovod_runtime(spec: JobSpec) -> dict:
    """hvdk8s's ClusterTrainingRuntime for the job's image (`hvdk8s install runtime`)."""
    return {
        "apiVersion": api_version(), "kind": RUNTIME_KIND,
        "metadata": {"name": runtime_name(spec),
                     "labels": {FRAMEWORK_LABEL: "horovod",
                                names.LABEL_MANAGED_BY: names.MANAGED_BY},
                     "annotations": {ANNOTATION_RUNTIME_IMAGE: spec.image}},
        "spec": _runtime_spec(spec),
    }


def runtime_fits(runtime: dict, spec: JobSpec) -> str | None:
    """Why this ClusterTrainingRuntime does not run the job (None: it does)."""
    want = _runtime_spec(spec)
    have = runtime.get("spec") or {}
    if have.get("mlPolicy") != want["mlPolicy"]:
        return "its mlPolicy is not hvdk8s's (mpi: OpenMPI, the launcher apart)"
    if have.get("template") != want["template"]:
        return "its JobSet template is not the one hvdk8s installs for this job's image"
    return None


def install_command(spec: JobSpec, context: str | None = None) -> str:
    """`hvdk8s install runtime` with what makes this job's runtime (in `context`)."""
    words = ["hvdk8s", "install", "runtime", "--image", spec.image]
    if context is not None:
        words += ["--context", context]
    defaults = JobSpec.model_fields
    for option, field in (("--image-pull-policy", "image_pull_policy"),
                          ("--launcher-cpu", "launcher_cpu"),
                          ("--launcher-memory", "launcher_memory")):
        if getattr(spec, field) != defaults[field].default:
            words += [option, str(getattr(spec, field))]
    if spec.run_as_user is not None:
        words += ["--run-as-user", str(spec.run_as_user)]
    if spec.ssh_port != defaults["ssh_port"].default:
        words += ["--ssh-port", str(spec.ssh_port)]
    return shell_join(words)


def launch_script(spec: JobSpec, decided: Decisions, env: dict[str, str]) -> str:
    """The launcher's program: the job's environment, then the wait for every node's sshd
    and the mpirun line (the wait script: mpijob.k8s.command)."""
    lines = ["# hvdk8s: the launcher of this TrainJob (Kubeflow Trainer mode)"]
    lines += [f"export {e['name']}={shlex.quote(e['value'])}"
              for e in env_list(spec, decided, env)]
    # Trainer mounts the private key with mode 0640 (pkg/constants/constants.go
    # MPISSHPrivateKeyFileMode), and ssh refuses a key of its own user that others may read
    # ("UNPROTECTED PRIVATE KEY FILE", OpenSSH authfile.c sshkey_perm_ok): ssh and mpirun
    # get a private copy, 0600, through $HOME/.ssh/id_rsa (the wait script's `-i`).
    lines += [f"key={shlex.quote(ssh_mount(spec))}/id_rsa",
              'if [ -f "$key" ]; then',
              '  home=$(mktemp -d) && mkdir -m 700 "$home/.ssh" && cp "$key" "$home/.ssh/id_rsa" '
              '&& chmod 600 "$home/.ssh/id_rsa" && export HOME="$home"',
              "fi"]
    lines.append("exec " + shell_join(wait_then_launch(launch_argv(spec, MPI_HOSTFILE,
                                                                   decided=decided))))
    return "\n".join(lines) + "\n"


def _pod_patch(work: Workload, role: str, affinity: dict | None, files: PodFiles,
               trainer_status: StatusEndpoint | None = None) -> dict:
    """One replicated job's pod patch: only PodSpecPatch's fields (trainjob_types.go), and
    the pod's labels and annotations (PodTemplatePatch metadata). `files`: the volume of
    the job's files (its ConfigMap, or carried in annotations: mpijob.k8s.pod_files).
    `trainer_status` (the launcher's): the token and CA of Trainer's status endpoint."""
    spec = work.spec
    meta = metadata(spec, None, role=role)
    scheduler = gangs.get(spec.gang)
    if role == names.ROLE_WORKER and work.network_domain is not None and scheduler is not None:
        # Kueue's pod set topology on the node pods, as on operator mode's worker template
        meta.setdefault("annotations", {}).update(
            scheduler.topology_annotations(work.network_domain))
    if files.annotations:
        meta.setdefault("annotations", {}).update(files.annotations)
    volumes = [files.volume()]
    mounts: list[dict] = [{"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
    if role == names.ROLE_WORKER:  # NCCL's ranks of one pod share /dev/shm
        volumes.insert(0, shm_volume(spec))
        mounts.insert(0, {"name": "dshm", "mountPath": "/dev/shm"})
    if role == names.ROLE_WORKER or launcher_mounts_data(spec):
        data, data_mounts = data_volumes(spec)
        volumes += data
        mounts += data_mounts
    if trainer_status is not None and role == names.ROLE_LAUNCHER:
        volumes.append(trainer_progress.launcher_volume(spec.namespace, spec.name))
        mounts.append(trainer_progress.launcher_mount())
    pod: dict = {}
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod["tolerations"] = [t.to_k8s() for t in spec.tolerations]
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in spec.image_pull_secrets]
    if affinity and role == names.ROLE_WORKER:
        pod["affinity"] = affinity
    container: dict = {"name": NODE}
    if (ctx := pod_security_context(spec)) is not None:
        pod["securityContext"] = ctx
        volumes.append({"name": HOME_VOLUME, "emptyDir": {}})
        mounts.append({"name": HOME_VOLUME, "mountPath": RUN_AS_HOME})
        container["securityContext"] = container_security_context(spec)
    container["volumeMounts"] = mounts
    pod["volumes"] = volumes
    pod["containers"] = [container]
    template: dict = {"metadata": {"labels": meta["labels"]}, "spec": pod}
    if meta.get("annotations"):
        template["metadata"]["annotations"] = meta["annotations"]
    return {"name": NODE if role == names.ROLE_WORKER else LAUNCHER,
            "template": {"spec": {"template": template}}}


def _affinity(spec: JobSpec, nodes: tuple[str, ...]) -> dict | None:
    """The planned nodes, one node pod on each, as operator mode pins its workers."""
    if not nodes:
        return None
    # With a gang scheduler (Kueue) the planned nodes are preferred only, as operator mode's.
    affinity = node_affinity(list(nodes), required=spec.gang == "none")
    if len(set(nodes)) == len(nodes) and len(nodes) > 1:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {names.LABEL_JOB: spec.name,
                                              names.LABEL_ROLE: names.ROLE_WORKER}},
            "topologyKey": "kubernetes.io/hostname"}]}
    return affinity


def render_trainjob(work: Workload, benchmark_source: str | None, prediction: dict | None, *,
                    version: str = VERSION, managed_by: str | None = None,
                    preflight_files: dict[str, str] | None = None,
                    trainer_status: StatusEndpoint | None = None) -> list[dict]:
    """`managed_by`: spec.managedBy, the controller that runs the TrainJob (MultiKueue's
    kueue.x-k8s.io/multikueue dispatches it to a worker cluster). `trainer_status`: where
    the cluster's Trainer serves its status endpoint, its TrainJobStatus gate on: the
    launcher gets what posting there takes (mpijob.k8s.trainer_progress); None: nothing."""
    spec, placement, shape, decided = work.spec, work.placement, work.shape, work.decisions
    assert shape is not None  # a Trainer-mode workload
    if (refused := refusal(spec, decided)) is not None:  # submit refuses it first (mpijob.k8s.modes)
        raise SpecError(refused.field, f"{refused.message}; use --mode pods", refused.option)
    if work.compute_domain_nodes is not None:
        raise SpecError("workers", "the placement spans nodes of one NVLink partition, whose "
                        "ComputeDomain IMEX channel a TrainJob's runtime patch cannot claim; use "
                        "--mode pods or --mode operator", "--workers")
    worker = work.workers[0]
    launcher_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "HVDK8S_HOSTFILE": MPI_HOSTFILE, "HVDK8S_SSH_PORT": str(spec.ssh_port),
                    # Kueue may hold the nodes in its queue for long: no limit then.
                    "HVDK8S_WORKER_WAIT_SECONDS": "0" if spec.gang != "none" else "600",
                    **monitor.env(spec, prediction)}
    if spec.run_as_user is not None:
        launcher_env["HOME"] = RUN_AS_HOME
    if trainer_status is not None:  # exported: a patch may not set the `node` container's env
        launcher_env.update(trainer_progress.launcher_env(trainer_status, spec.namespace, spec.name))
    node_env = {"HOME": RUN_AS_HOME} if spec.run_as_user is not None else {}
    trainer: dict = {"image": spec.image, "env": env_list(spec, decided, node_env),
                     "numNodes": shape.replicas, "numProcPerNode": shape.slots}
    if resources := worker.resources.to_k8s():
        trainer["resourcesPerNode"] = resources
    affinity = _affinity(spec, shape.nodes)
    data = _files(spec, decided, launcher_env, benchmark_source, preflight_files)
    # MultiKueue copies only the TrainJob to the worker cluster: the pods carry their files
    files = (pod_files.carried(spec, CONFIG_VOLUME, data) if managed_by else
             pod_files.from_config_map(CONFIG_VOLUME, names.config(spec.name)))
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [_pod_patch(work, names.ROLE_WORKER, affinity, files),
                           _pod_patch(work, names.ROLE_LAUNCHER, None, files,
                                      trainer_status)]}}}}
    meta = metadata(spec, spec.name,
                    extra_annotations=root_annotations(spec, decided, placement, prediction))
    meta["labels"][names.LABEL_MODE] = "trainjob"
    if (scheduler := gangs.get(spec.gang)) is not None and spec.queue:
        meta["labels"].update(scheduler.trainjob_labels(spec.queue))  # Kueue's TrainJob integration
    job_spec: dict = {
        "runtimeRef": {"name": runtime_name(spec), "apiGroup": GROUP, "kind": RUNTIME_KIND},
        "trainer": trainer,
        "runtimePatches": [patch],
    }
    if managed_by:
        job_spec["managedBy"] = managed_by
    if spec.run_policy.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = spec.run_policy.active_deadline_seconds
    root = {"apiVersion": api_version(version), "kind": "TrainJob", "metadata": meta,
            "spec": job_spec}
    if files.annotations:
        return [root]
    return [root, {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": metadata(spec, names.config(spec.name)), "data": data}]


def _files(spec: JobSpec, decided: Decisions, launcher_env: dict[str, str],
           benchmark_source: str | None,
           preflight_files: dict[str, str] | None) -> dict[str, str]:
    """The files under CONFIG_DIR: the launch script, the status poster, the launcher's
    monitor (which calls the poster), the benchmark and the preflight."""
    status_poster = TRAINER_STATUS_IN_POD.rsplit("/", 1)[1]
    # Trainer's status endpoint is there to post to where its TrainJobStatus gate is on
    data = {LAUNCH_SCRIPT: launch_script(spec, decided, launcher_env),
            status_poster: pod_script(status_poster), **monitor.config()}
    if spec.runs_benchmark:
        if benchmark_source is None:
            raise ValueError("the built-in benchmark runs from a ConfigMap: pass its source")
        data[BENCHMARK_IN_POD.rsplit("/", 1)[1]] = benchmark_source
    data.update(preflight_config(spec, preflight_files, decided=decided))
    return data
