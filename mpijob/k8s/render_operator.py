"""Operator mode: one kubeflow.org/v2beta1 MPIJob for the Kubeflow MPI Operator.

Defaults avoid the operator's known traps: cleanPodPolicy Running (idle workers otherwise
keep their GPUs after the launcher ends), launcherCreationPolicy WaitForWorkersReady (the
launcher otherwise starts mpirun before workers resolve), a launcher without GPUs, and
slotsPerWorker equal to each worker pod's GPUs.
"""

from __future__ import annotations

from mpijob import gang as gangs
from mpijob.jobspec import names
from mpijob.jobspec.quantity import scale_quantity
from mpijob.k8s import monitor, pod_files
from mpijob.k8s.command import (
    BENCHMARK_IN_POD,
    launch_argv,
    operator_sshd,
    preflight_config,
    wait_then_launch,
)
from mpijob.k8s.computedomain import clique_affinity, compute_domain
from mpijob.k8s.pod_files import PodFiles
from mpijob.k8s.podpatch import patched_template
from mpijob.k8s.render import (
    CONFIG_DIR,
    CONFIG_VOLUME,
    env_list,
    finish_container,
    finish_pod,
    launcher_mounts_data,
    launcher_resources,
    metadata,
    node_affinity,
    pod_common,
    root_annotations,
    shm_volume,
)
from mpijob.k8s.security import ssh_auth_mount_path
from mpijob.k8s.workload import Workload
from mpijob.wellknown import MPI_HOSTFILE, MULTUS_NETWORKS_ANNOTATION

API_VERSION = "kubeflow.org/v2beta1"


def _container(work: Workload, name: str, command: list[str], resources: dict,
               files: PodFiles | None, extra_env: dict | None = None) -> dict:
    spec = work.spec
    mounts: list[dict] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if files is not None:
        mounts.append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True})
    c: dict = {"name": name, "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
         "command": command, "env": env_list(spec, work.decisions, extra_env), "volumeMounts": mounts}
    if resources:
        c["resources"] = resources
    return c


def _template(work: Workload, role: str, container: dict, files: PodFiles | None,
              affinity: dict | None, gang: bool) -> dict:
    """The launcher's (gang False) or the workers' pod template, whole."""
    spec = work.spec
    worker = role == names.ROLE_WORKER
    data = worker or launcher_mounts_data(spec)
    meta = metadata(spec, None, role=role)
    scheduler = gangs.get(spec.gang)
    if gang and scheduler is not None:
        meta["labels"].update(scheduler.operator_labels(spec.queue))
    if worker:
        annotations = {}
        if work.network_domain is not None and scheduler is not None:
            annotations.update(scheduler.topology_annotations(work.network_domain))
        if work.networks:  # Multus attaches the networks this annotation lists
            annotations[MULTUS_NETWORKS_ANNOTATION] = ",".join(work.networks)
        if annotations:
            meta["annotations"] = annotations
    volumes = [shm_volume(spec)]
    if files is not None:
        volumes.append(files.volume())
        if files.annotations:
            meta.setdefault("annotations", {}).update(files.annotations)
    container = finish_container(spec, container, data=data, ipc_lock=worker and work.ipc_lock)
    body = {**pod_common(spec, gang=gang), "containers": [container], "volumes": volumes}
    if affinity:
        body["affinity"] = affinity
    claims = work.pod_claims(work.workers[0]) if worker else []
    return patched_template(spec, {"metadata": meta, "spec": finish_pod(
        spec, body, data=data, claims=claims)}, role, "operator")


def gang_scheduling_policy(replicas: int, requests: dict[str, str]) -> dict:
    """The PodGroup the operator makes: the workers only, never the launcher.

    Unset, the operator's calculateMinAvailable gives `workers + 1`, and
    calPGMinResource then sums the launcher and `minAvailable - 1` workers. With
    launcherCreationPolicy WaitForWorkersReady the launcher is created only once every
    worker is Ready (syncHandler: `countReadyWorkerPods(worker) == len(worker)`), so a gang
    that counts it never completes: a deadlock. minMember = workers can exist at once, and
    minResources = what the workers request (the operator's sum would count the launcher in
    place of one worker, short of one worker's GPUs). Source: github.com/kubeflow/mpi-operator
    pkg/controller/podgroup.go (calculateMinAvailable, calPGMinResource) and
    mpi_job_controller.go (syncHandler).
    """
    policy: dict = {"minAvailable": replicas}
    if requests:
        policy["minResources"] = {k: scale_quantity(v, replicas) for k, v in requests.items()}
    return policy


def render_operator(work: Workload, benchmark_source: str | None,
                    prediction: dict | None, managed_by: str | None = None,
                    preflight_files: dict[str, str] | None = None) -> list[dict]:
    """`managed_by`: runPolicy.managedBy, the controller that runs the MPIJob (MultiKueue's
    kueue.x-k8s.io/multikueue dispatches it to a worker cluster, so the pods carry their
    files instead of a ConfigMap: mpijob.k8s.pod_files)."""
    spec, placement, shape, decided = work.spec, work.placement, work.shape, work.decisions
    assert shape is not None  # an operator-mode workload
    # the launcher's monitor runs from the job's files, so there always are some
    data = {**preflight_config(spec, preflight_files, decided=decided), **monitor.config()}
    if spec.runs_benchmark:
        if benchmark_source is None:
            raise ValueError("the built-in benchmark runs from a ConfigMap: pass its source")
        data = {BENCHMARK_IN_POD.rsplit("/", 1)[1]: benchmark_source, **data}
    files = (pod_files.carried(spec, CONFIG_VOLUME, data) if managed_by else
             pod_files.from_config_map(CONFIG_VOLUME, names.operator_benchmark(spec.name)))
    worker = work.workers[0]
    launcher_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "HVDK8S_HOSTFILE": MPI_HOSTFILE,
                    # A gang scheduler may hold the workers in its queue for long: no limit.
                    "HVDK8S_WORKER_WAIT_SECONDS": "0" if spec.gang != "none" else "600",
                    **monitor.env(spec, prediction)}
    # One port, the job's, on both ends: the worker's sshd gets it on its command line (it
    # beats the image's sshd_config Port) and the launcher's wait and mpirun get it from
    # HVDK8S_SSH_PORT (mpijob.k8s.command.OPERATOR_WAIT_SCRIPT), whatever the image says.
    sshd_args: list[str] = ["-p", str(decided.ssh_port)]
    launcher_env["HVDK8S_SSH_PORT"] = str(decided.ssh_port)
    if spec.host_network:
        # Port 22 is the node's own sshd: the job's port is mpijob.jobspec.ssh_port's. The
        # operator appends OMPI_MCA_plm_rsh_args to the env, overriding ours, so the
        # port also goes on the mpirun line, which beats the env (mpi_job_controller.go
        # ompiEnvVars; OpenMPI MCA precedence).
        rsh_args = (f"-p {decided.ssh_port} -o ConnectionAttempts=10 -o StrictHostKeyChecking=no "
                    "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
    else:
        rsh_args = None
    launch = launch_argv(spec, MPI_HOSTFILE, rsh_args=rsh_args, decided=decided)
    launcher = monitor.with_monitor(spec, _container(
        work, "launcher", wait_then_launch(launch), launcher_resources(spec), files,
        launcher_env))
    worker_container = _container(work, "worker", operator_sshd(sshd_args),
                                  worker.resources.to_k8s(), files)
    if spec.host_network:  # declared, so the scheduler keeps a second job's sshd off it
        worker_container["ports"] = [{"name": "ssh", "containerPort": decided.ssh_port}]
    # backoffLimit always set: unset, the launcher Job's default of 6 retries mpirun six
    # times while the workers hold their GPUs; 0 as in built-in mode.
    backoff = spec.run_policy.backoff_limit if spec.run_policy.backoff_limit is not None else 0
    run_policy: dict = {"cleanPodPolicy": spec.run_policy.clean_pod_policy,
                        "backoffLimit": backoff}
    for key, value in (("ttlSecondsAfterFinished", spec.run_policy.ttl_seconds_after_finished),
                       ("activeDeadlineSeconds", spec.run_policy.active_deadline_seconds)):
        if value is not None:
            run_policy[key] = value
    if managed_by:  # kueue.x-k8s.io/multikueue: Kueue dispatches it to a worker cluster
        run_policy["managedBy"] = managed_by
    scheduler = gangs.get(spec.gang)
    own = None if scheduler is None else scheduler.operator_scheduling_policy(shape.replicas)
    if own is not None:  # a scheduler that reads it without the operator's PodGroup
        run_policy["schedulingPolicy"] = own
    else:
        # Set whatever --gang asks: an operator run with --gang-scheduling makes a PodGroup
        # for every MPIJob, and without this one it counts the launcher (see
        # gang_scheduling_policy). Only the PodGroup code reads it: harmless where none.
        scheduling = gang_scheduling_policy(shape.replicas, worker.resources.requests)
        if scheduler is not None and scheduler.operator_podgroup:
            if spec.queue:
                scheduling["queue"] = spec.queue
            if spec.priority_class:
                scheduling["priorityClass"] = spec.priority_class
        run_policy["schedulingPolicy"] = scheduling
    affinity = node_affinity(list(shape.nodes), required=spec.gang == "none") if shape.nodes else None
    if affinity and len(set(shape.nodes)) == len(shape.nodes) and shape.replicas > 1:
        # One worker pod per chosen node, as the placement decided.
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {names.LABEL_JOB: spec.name,
                                              names.LABEL_ROLE: names.ROLE_WORKER}},
            "topologyKey": "kubernetes.io/hostname"}]}
    if affinity and work.compute_domain_nodes is not None:
        affinity["podAffinity"] = clique_affinity(spec.name)
    annotations = root_annotations(spec, decided, placement, prediction)
    if work.network_domain is not None and scheduler is not None:
        annotations.update(scheduler.root_topology_annotations(work.network_domain))
    meta = metadata(spec, spec.name, extra_annotations=annotations)
    meta["labels"][names.LABEL_MODE] = "operator"
    if scheduler is not None:
        meta["labels"].update(scheduler.operator_labels(spec.queue))
    mpijob = {
        "apiVersion": API_VERSION,
        "kind": "MPIJob",
        "metadata": meta,
        "spec": {
            "slotsPerWorker": shape.slots,
            "mpiImplementation": spec.mpi_implementation,
            "launcherCreationPolicy": "WaitForWorkersReady",
            **({"sshAuthMountPath": path} if (path := ssh_auth_mount_path(spec)) else {}),
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                # Never: a failed launcher pod stays, Failed, with its log (the preflight's
                # verdict, mpirun's error) for `get`. OnFailure restarts it in place, so it is
                # still active when the Job fails, and the Job controller deletes active pods
                # then (job_controller.go syncJob: deleteActivePods), log and all.
                "Launcher": {"replicas": 1, "restartPolicy": "Never",
                             "template": _template(work, names.ROLE_LAUNCHER, launcher, files,
                                                   None, gang=False)},
                "Worker": {"replicas": shape.replicas, "restartPolicy": "Never",
                           "template": _template(work, names.ROLE_WORKER, worker_container,
                                                 files, affinity, gang=True)},
            },
        },
    }
    objects = [mpijob]
    if work.compute_domain_nodes is not None:  # owned by the root, so deleted with the job
        objects.append(compute_domain(spec.name, spec.namespace, work.compute_domain_nodes))
    if worker.gpu_claim is not None:
        objects.append(worker.gpu_claim.template_object(spec.namespace, names.job_labels(spec.name)))
    if files is not None and not files.annotations:
        objects.append({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(spec, names.operator_benchmark(spec.name)),
            "data": data,
        })
    return objects
