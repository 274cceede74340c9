"""Built-in mode: launcher Job (the root), the ComputeDomain where the job gets one, ConfigMap,
SSH Secret, headless Service, the gang's objects, the start gate (mpijob.k8s.start_gate), and
per worker its GPU claim template (DRA) and its Pod, or for an elastic job the worker Indexed
Job and its objects (mpijob.k8s.render_elastic): each object built whole here, from the job's
Workload."""

from __future__ import annotations

from mpijob import gang as gangs
from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s import monitor, render_elastic, start_gate
from mpijob.k8s.command import BENCHMARK_IN_POD, hostfile_text, launch_argv, preflight_config
from mpijob.k8s.computedomain import clique_affinity, compute_domain
from mpijob.k8s.gang import gang_objects, gang_pod_metadata
from mpijob.k8s.podpatch import patched_template
from mpijob.k8s.render import (
    CONFIG_DIR,
    SSH_DIR,
    SSHKeys,
    env_list,
    finish_container,
    finish_pod,
    launcher_mounts_data,
    launcher_resources,
    metadata,
    node_affinity,
    pod_common,
    pod_script,
    root_annotations,
    shm_volume,
)
from mpijob.k8s.workload import WorkerPod, Workload
from mpijob.wellknown import MULTUS_NETWORKS_ANNOTATION

HOSTFILE = f"{CONFIG_DIR}/hostfile"


def worker_host(spec: JobSpec, pod: WorkerPod) -> str:
    # <pod>.<service>.<namespace>.svc resolves through the headless Service.
    return f"{names.worker(spec.name, pod.index)}.{names.service(spec.name)}.{spec.namespace}.svc"


def _volumes(spec: JobSpec) -> tuple[list[dict], list[dict]]:
    """The job's ConfigMap, SSH key and /dev/shm; an elastic job's scripts too."""
    volumes: list[dict] = [
        {"name": "hvdk8s-config", "configMap": {"name": names.config(spec.name), "defaultMode": 0o755}},
        # Readable by any uid so non-root images work; the scripts copy the key to a 0600 file.
        {"name": "hvdk8s-ssh", "secret": {"secretName": names.ssh_secret(spec.name), "defaultMode": 0o444}},
        shm_volume(spec),
    ]
    mounts: list[dict] = [
        {"name": "hvdk8s-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "hvdk8s-ssh", "mountPath": SSH_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    if spec.elastic:
        volumes.append(render_elastic.volume(spec))
        mounts.append(render_elastic.MOUNT)
    return volumes, mounts


def _config_map(work: Workload, benchmark_source: str | None,
                preflight_files: dict[str, str] | None) -> dict:
    spec, pods = work.spec, work.workers
    data = {
        "hostfile": hostfile_text(spec, [(worker_host(spec, p), p.slots) for p in pods]),
        "launcher.sh": pod_script("launcher.sh"),
        "worker.sh": pod_script("worker.sh"),
        **monitor.config(),
    }
    if spec.runs_benchmark:
        if benchmark_source is None:
            raise ValueError("the built-in benchmark runs from the ConfigMap: pass its source")
        data[BENCHMARK_IN_POD.rsplit("/", 1)[1]] = benchmark_source
    data.update(preflight_config(spec, preflight_files, decided=work.decisions))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(spec, names.config(spec.name)), "data": data}


def _secret(spec: JobSpec, ssh: SSHKeys) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": metadata(spec, names.ssh_secret(spec.name)),
        "stringData": {"ssh-privatekey": ssh.private_key, "ssh-publickey": ssh.public_key},
    }


def _service(spec: JobSpec, ssh_port: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec, names.service(spec.name)),
        "spec": {
            "clusterIP": "None",
            # Workers must resolve before they are Ready: the launcher polls them itself.
            "publishNotReadyAddresses": True,
            # The launcher too: Hydra's proxies on the workers call mpiexec back by the
            # launcher's hostname, which must resolve; the MPI Operator's Service does
            # the same.
            "selector": {names.LABEL_JOB: spec.name},
            "ports": [{"name": "ssh", "port": ssh_port, "targetPort": ssh_port}],
        },
    }


_OPENMPI_ENV = {
    # OpenMPI cuts hostfile names at the first dot and would `ssh demo-worker-0`, which
    # cluster DNS does not answer; the MPI Operator sets the same.
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    # Only the launcher holds the SSH key: no worker-to-worker ssh (tree spawn) on large
    # jobs, where the routing tree puts workers under workers and their ssh would fail.
    "OMPI_MCA_plm_rsh_no_tree_spawn": "true",
}


def _dns_config(spec: JobSpec) -> dict:
    """The workers' Service domain as a search domain, as the MPI Operator v2 gives its pods
    (pkg/controller/mpi_job_controller.go): a short worker name, as OpenMPI or a user's
    script may use, resolves too."""
    return {"searches": [f"{names.service(spec.name)}.{spec.namespace}.svc.cluster.local"]}


def _worker_template(work: Workload, pod: WorkerPod, gang_meta: dict, *,
                     elastic: bool = False) -> dict:
    """A worker pod's metadata and spec: one placed pod's, or (`elastic`) the worker Job's
    template, whose pods the Job controller names <job>-worker-<index> and which may run
    on any planned node."""
    spec, port = work.spec, work.decisions.ssh_port
    volumes, mounts = _volumes(spec)
    # planned GPU indices; an elastic worker's are the kubelet's to pick
    annotations = {names.ANNOTATION_GPUS: ",".join(map(str, pod.gpus))} if pod.gpus else {}
    annotations.update(gang_meta.get("annotations", {}))
    if work.network_domain is not None and (scheduler := gangs.get(spec.gang)) is not None:
        annotations.update(scheduler.topology_annotations(work.network_domain))
    if work.networks:  # Multus attaches the networks this annotation lists
        annotations[MULTUS_NETWORKS_ANNOTATION] = ",".join(work.networks)
    meta = (metadata(spec, None, role=names.ROLE_WORKER, extra_annotations=annotations)
            if elastic else
            metadata(spec, names.worker(spec.name, pod.index), role=names.ROLE_WORKER,
                     index=pod.index, extra_annotations=annotations))
    meta["labels"].update(gang_meta.get("labels", {}))
    container = {
        "name": "worker",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["/bin/sh", f"{CONFIG_DIR}/worker.sh"],
        "env": env_list(spec, work.decisions, {"HVDK8S_SSH_PORT": str(port),
                                               "HVDK8S_SSH_DIR": SSH_DIR}),
        "ports": [{"name": "ssh", "containerPort": port}],
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 2},
        "volumeMounts": mounts,
    }
    resources = pod.resources.to_k8s()
    if resources:
        container["resources"] = resources
    body = {
        **pod_common(spec),
        **({} if elastic else {"hostname": names.worker(spec.name, pod.index)}),
        "subdomain": names.service(spec.name),
        "dnsConfig": _dns_config(spec),
        # A worker that ends (released by the launcher, or failed) must not come back.
        "restartPolicy": "Never",
        "containers": [finish_container(spec, container, data=True, ipc_lock=work.ipc_lock)],
        "volumes": volumes,
        **gang_meta.get("spec", {}),
    }
    if elastic and work.placement is not None and work.placement.feasible:
        # Only preferred: `hvdk8s scale` places the workers that join on the cluster as it
        # is then, other nodes included (launcher.backends.kubernetes.elastic).
        body["affinity"] = node_affinity(sorted({a.node for a in work.placement.assignments}),
                                         required=False)
    elif pod.node:
        body["affinity"] = node_affinity([pod.node], required=spec.gang == "none")
        if work.compute_domain_nodes is not None:
            body["affinity"]["podAffinity"] = clique_affinity(spec.name)
    return patched_template(spec, {"metadata": meta, "spec": finish_pod(
        spec, body, data=True, claims=work.pod_claims(pod))}, names.ROLE_WORKER, work.mode)


def _worker_pod(work: Workload, pod: WorkerPod, gang_meta: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", **_worker_template(work, pod, gang_meta)}


def _launcher_job(work: Workload, prediction: dict | None) -> dict:
    spec, decided = work.spec, work.decisions
    volumes, mounts = _volumes(spec)
    data = launcher_mounts_data(spec)
    policy = spec.run_policy
    backoff = policy.backoff_limit if policy.backoff_limit is not None else 0
    env = env_list(spec, decided, {
        "HVDK8S_SSH_PORT": str(decided.ssh_port),
        "HVDK8S_SSH_DIR": SSH_DIR,
        "HVDK8S_HOSTFILE": HOSTFILE,
        "HVDK8S_CLEAN_POD_POLICY": policy.clean_pod_policy,
        # A retried launcher needs its workers: release them on failure only on the last try.
        "HVDK8S_RELEASE_ON_FAILURE": "1" if backoff == 0 else "0",
        # hvdk8s resumes the launcher once the workers are scheduled, so 10 minutes covers
        # image pulls; a gang scheduler may release the launcher while workers still queue.
        "HVDK8S_WORKER_WAIT_SECONDS": "0" if spec.gang != "none" else "600",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        # NVIDIA images expose every GPU of the node to a container that asked for none;
        # the launcher needs none (the MPI Operator clears it the same way).
        "NVIDIA_VISIBLE_DEVICES": "",
        **(_OPENMPI_ENV if spec.mpi_implementation == "OpenMPI" else {}),
        **monitor.env(spec, prediction),
    })
    if spec.elastic:
        env = [*env, *render_elastic.launcher_env(spec)]
    container = monitor.with_monitor(spec, {
        "name": "launcher",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": (render_elastic.launcher_command(spec, decided) if spec.elastic else
                    ["/bin/sh", f"{CONFIG_DIR}/launcher.sh",
                     *launch_argv(spec, HOSTFILE, decided=decided)]),
        "env": env,
        "resources": launcher_resources(spec),
        "volumeMounts": mounts,
    })
    pod_meta = metadata(spec, None, role=names.ROLE_LAUNCHER)
    launcher_pod = pod_common(spec, gang=False)
    job_spec: dict = {
        # Created suspended: the backend starts it once every worker is scheduled.
        "suspend": True,
        "backoffLimit": backoff,
        "template": patched_template(spec, {
            "metadata": pod_meta,
            "spec": finish_pod(spec, {
                **launcher_pod,
                # A name the workers can resolve (`<job>-launcher` in the Service's
                # domain) instead of the Job controller's `<job>-launcher-xxxxx`.
                "hostname": names.launcher(spec.name), "subdomain": names.service(spec.name),
                "dnsConfig": _dns_config(spec), "restartPolicy": "Never",
                "containers": [finish_container(spec, container, data=data)],
                "volumes": volumes}, data=data),
        }, names.ROLE_LAUNCHER, "pods"),
    }
    if policy.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    meta = metadata(spec, names.launcher(spec.name), role=names.ROLE_LAUNCHER,
                    extra_annotations=root_annotations(spec, decided, work.placement, prediction))
    meta["labels"][names.LABEL_MODE] = "pods"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


def render_pods(work: Workload, ssh: SSHKeys, benchmark_source: str | None,
                prediction: dict | None, elastic_source: str | None = None,
                gate_deadline: int | None = None,
                preflight_files: dict[str, str] | None = None) -> list[dict]:
    spec, pods, decided = work.spec, list(work.workers), work.decisions
    gang_meta = gang_pod_metadata(work)
    objects = [_launcher_job(work, prediction)]
    if work.compute_domain_nodes is not None:  # owned by the root, so deleted with the job
        objects.append(compute_domain(spec.name, spec.namespace, work.compute_domain_nodes))
    objects += [
        _config_map(work, benchmark_source, preflight_files),
        _secret(spec, ssh),
        _service(spec, decided.ssh_port),
    ]
    objects += gang_objects(work)
    labels = names.job_labels(spec.name)
    # The gate comes right before the first worker object: the workers are created owned
    # by its pod, so it must exist first.
    gate = ([start_gate.gate_job(spec, gate_deadline, ssh_port=decided.ssh_port)]
            if start_gate.applies(spec) else [])
    if work.elastic_worker is not None:
        worker = work.elastic_worker
        objects += [render_elastic.config_map(spec, benchmark_source, elastic_source),
                    render_elastic.ready_service(spec, decided.ssh_port)]
        if worker.gpu_claim is not None:
            objects.append(worker.gpu_claim.template_object(spec.namespace, labels))
        return [*objects, *gate, render_elastic.worker_job(
            spec, _worker_template(work, worker, gang_meta, elastic=True))]
    for p in pods:
        if p.gpu_claim is not None:  # the template before the pod that claims from it
            objects.append(p.gpu_claim.template_object(spec.namespace, labels))
        objects += [*gate, _worker_pod(work, p, gang_meta)]
        gate = []
    return objects + gate
