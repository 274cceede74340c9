"""The Kubeflow MPI Operator v2 controller (kubeflow.org/v2beta1 MPIJob), as a control loop.

A model of github.com/kubeflow/mpi-operator at v0.8.2 (commit caa3c47). Each behaviour cites
the file and function it follows; abbreviations used below:
  ctl  = pkg/controller/mpi_job_controller.go
  st   = pkg/controller/mpi_job_controller_status.go
  pg   = pkg/controller/podgroup.go
  def  = pkg/apis/kubeflow/v2beta1/default.go      (SetDefaults_MPIJob)
  val  = pkg/apis/kubeflow/validation/validation.go (ValidateMPIJob)
  opts = cmd/mpi-operator/app/options/options.go    (--gang-scheduling, --cluster-domain)

What it creates for MPIJob J in namespace N (ctl syncHandler):
  Service J (headless, selects launcher and workers), ConfigMap J-config (hostfile,
  discover_hosts.sh), Secret J-ssh (kubernetes.io/ssh-auth, ECDSA P-521), when not suspended
  the PodGroup J (only with --gang-scheduling) and Pods J-worker-0..n-1, and the launcher Job
  J-launcher: at once (launcherCreationPolicy AtStartup, the default) or once every worker
  is Ready (WaitForWorkersReady). runPolicy.suspend keeps workers away and the launcher Job
  suspended; unsuspending resumes the launcher Job straight away.

`operator_objects()` / `completed_pods()` are the pure part: what the controller would
create for an MPIJob, with no API server, so a test can run the operator's pods for real.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from decimal import Decimal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from . import errors, events
from .controller import Loop
from .podutil import get_condition
from .quantity import fmt, parse_quantity
from .util import deepcopy, now_rfc3339

API_VERSION = "kubeflow.org/v2beta1"
KEY = "kubeflow.org/mpijobs"
COMPONENT = "mpi-job-controller"  # ctl: controllerAgentName
# ctl const block: names, mount paths and volumes of the objects the controller makes.
CONFIG_SUFFIX, SSH_SUFFIX, LAUNCHER_SUFFIX, WORKER_SUFFIX = "-config", "-ssh", "-launcher", "-worker"
CONFIG_VOLUME, CONFIG_MOUNT = "mpi-job-config", "/etc/mpi"
SSH_VOLUME, ROOT_SSH = "ssh-auth", "/root/.ssh"
HOSTFILE, DISCOVER_HOSTS = "hostfile", "discover_hosts.sh"
# pkg/apis/kubeflow/v2beta1/constants.go: labels on every pod.
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
OPERATOR_NAME = "mpi-operator"
# pkg/apis/kubeflow/v2beta1/types.go: runPolicy.managedBy values.
KUBEFLOW_CONTROLLER = "kubeflow.org/mpi-operator"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# opts: the two --gang-scheduling values with their own PodGroup kinds; any other non-empty
# value means scheduler-plugins with that scheduler name (ctl NewMPIJobControllerWithClock).
VOLCANO, SCHEDULER_PLUGINS = "volcano", "scheduler-plugins"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"   # volcano KubeGroupNameAnnotationKey
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # volcano QueueNameAnnotationKey
PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"       # scheduler-plugins PodGroupLabel
PODGROUP_KEYS = {VOLCANO: ("scheduling.volcano.sh/podgroups", "scheduling.volcano.sh/v1beta1"),
                 SCHEDULER_PLUGINS: ("scheduling.x-k8s.io/podgroups",
                                     "scheduling.x-k8s.io/v1alpha1")}
# ctl var block: environment the controller appends to the first container.
OMPI_ENV = [("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            ("OMPI_MCA_orte_default_hostfile", f"{CONFIG_MOUNT}/{HOSTFILE}"),
            ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10")]
INTEL_ENV = [("I_MPI_HYDRA_HOST_FILE", f"{CONFIG_MOUNT}/{HOSTFILE}"),
             ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10")]
MPICH_ENV = [("HYDRA_HOST_FILE", f"{CONFIG_MOUNT}/{HOSTFILE}"),
             ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10")]
# ctl: reasons (st const block) and the message of a name clash (MessageResourceExists).
RESOURCE_EXISTS = "Resource %r of Kind %r already exists and is not managed by MPIJob"


# --- defaults and validation ----------------------------------------------------------------
def defaulted(mpijob: dict) -> dict:
    """A copy with def SetDefaults_MPIJob applied (the controller defaults every sync)."""
    job = deepcopy(mpijob)
    spec = job.setdefault("spec", {})
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    spec.setdefault("slotsPerWorker", 1)
    spec["sshAuthMountPath"] = spec.get("sshAuthMountPath") or ROOT_SSH
    spec["mpiImplementation"] = spec.get("mpiImplementation") or "OpenMPI"
    spec["launcherCreationPolicy"] = spec.get("launcherCreationPolicy") or "AtStartup"
    replicas = spec.get("mpiReplicaSpecs") or {}
    # def setDefaultsTypeLauncher / setDefaultsTypeWorker
    for rtype, policy, count in (("Launcher", "OnFailure", 1), ("Worker", "Never", 0)):
        if replicas.get(rtype) is not None:
            replicas[rtype]["restartPolicy"] = replicas[rtype].get("restartPolicy") or policy
            replicas[rtype].setdefault("replicas", count)
    return job


def _dns1035(value: str) -> bool:
    return len(value) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", value) is not None


def validate(job: dict) -> list[str]:
    """val ValidateMPIJob on a defaulted MPIJob: field errors, empty when valid."""
    spec, errs = job["spec"], []
    workers = _workers(job)
    longest = f"{job['metadata']['name']}-worker-{max(workers, 1) - 1}"  # validateMPIJobName
    if not _dns1035(longest):
        errs.append(f"metadata.name: Invalid value: {job['metadata']['name']!r}: will not able "
                    f"to create pod and service with invalid DNS label {longest!r}")
    replicas = spec.get("mpiReplicaSpecs")
    if not replicas:
        errs.append("spec.mpiReplicaSpecs: Required value: must have replica specs")
    else:
        launcher = replicas.get("Launcher")
        if launcher is None:
            errs.append("spec.mpiReplicaSpecs[Launcher]: Required value: must have Launcher "
                        "replica spec")
        for rtype, rs in (("Launcher", launcher), ("Worker", replicas.get("Worker"))):
            if rs is None:
                continue
            path = f"spec.mpiReplicaSpecs[{rtype}]"
            if rs.get("restartPolicy") not in ("Never", "OnFailure"):  # validateReplicaSpec
                errs.append(f"{path}.restartPolicy: Unsupported value: {rs.get('restartPolicy')!r}")
            if not ((rs.get("template") or {}).get("spec") or {}).get("containers"):
                errs.append(f"{path}.template.spec.containers: Required value: must define at "
                            "least one container")
            if rtype == "Launcher" and rs.get("replicas") != 1:
                errs.append(f"{path}.replicas: Invalid value: {rs.get('replicas')}: must be 1")
            if rtype == "Worker" and rs.get("replicas", 0) <= 0:
                errs.append(f"{path}.replicas: Invalid value: {rs.get('replicas')}: must be "
                            "greater than or equal to 1")
    if (spec.get("slotsPerWorker") or 0) < 0:
        errs.append("spec.slotsPerWorker: Invalid value: must be greater than or equal to 0")
    run = spec["runPolicy"]
    if run.get("cleanPodPolicy") not in ("None", "Running", "All"):  # validateRunPolicy
        errs.append(f"spec.runPolicy.cleanPodPolicy: Unsupported value: {run['cleanPodPolicy']!r}")
    if run.get("managedBy") not in (None, KUBEFLOW_CONTROLLER, MULTIKUEUE_CONTROLLER):
        errs.append(f"spec.runPolicy.managedBy: Unsupported value: {run['managedBy']!r}")
    if spec["mpiImplementation"] not in ("OpenMPI", "Intel", "MPICH"):
        errs.append(f"spec.mpiImplementation: Unsupported value: {spec['mpiImplementation']!r}")
    return errs


# --- the objects, as the controller builds them -------------------------------------------------
def _workers(job: dict) -> int:
    """ctl workerReplicas."""
    w = (job["spec"].get("mpiReplicaSpecs") or {}).get("Worker")
    return int(w.get("replicas") or 0) if w else 0


def _suspended(job: dict) -> bool:
    """ctl isMPIJobSuspended."""
    return bool(job["spec"]["runPolicy"].get("suspend"))


def _launcher_as_worker(job: dict) -> bool:
    return bool(job["spec"].get("runLauncherAsWorker"))


def _controller_ref(job: dict) -> dict:
    """metav1.NewControllerRef(mpiJob, ...): every object the controller creates has it."""
    m = job["metadata"]
    return {"apiVersion": API_VERSION, "kind": "MPIJob", "name": m["name"],
            "uid": m.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def _meta(job: dict, name: str) -> dict:
    return {"name": name, "namespace": job["metadata"]["namespace"],
            "labels": {"app": job["metadata"]["name"]},
            "ownerReferences": [_controller_ref(job)]}


def _host(job: dict, pod: str, cluster_domain: str) -> str:
    """ctl newConfigMap: '<pod>.<job>.<namespace>.svc[.<cluster-domain>]'."""
    m = job["metadata"]
    return f"{pod}.{m['name']}.{m['namespace']}.svc" + (f".{cluster_domain}"
                                                         if cluster_domain else "")


def worker_name(job: dict, index: int) -> str:
    return f"{job['metadata']['name']}{WORKER_SUFFIX}-{index}"  # ctl workerName


def new_config_map(job: dict, running_workers: list[str], cluster_domain: str = "") -> dict:
    """ctl newConfigMap + updateDiscoverHostsInConfigMap: the hostfile lists every worker
    (and the launcher with runLauncherAsWorker); discover_hosts.sh only the Running ones."""
    slots = job["spec"]["slotsPerWorker"]
    impl = job["spec"]["mpiImplementation"]
    hosts = ([job["metadata"]["name"] + LAUNCHER_SUFFIX] if _launcher_as_worker(job) else []) + \
        [worker_name(job, i) for i in range(_workers(job))]
    line = "{} slots={}\n" if impl == "OpenMPI" else "{}:{}\n"
    hostfile = "".join(line.format(_host(job, h, cluster_domain), slots) for h in hosts)
    discover = "#!/bin/sh\n" + "".join(
        f"echo {_host(job, h, cluster_domain)}\n"
        for h in ([job["metadata"]["name"] + LAUNCHER_SUFFIX] if _launcher_as_worker(job) else [])
        + sorted(running_workers))
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": _meta(job, job["metadata"]["name"] + CONFIG_SUFFIX),
          "data": {HOSTFILE: hostfile, DISCOVER_HOSTS: discover}}
    return cm


def new_service(job: dict) -> dict:
    """ctl newJobService/newService: headless, named like the job, selecting all its pods."""
    name = job["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(job, name),
            "spec": {"clusterIP": "None",
                     "selector": {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: name},
                     "publishNotReadyAddresses": _launcher_as_worker(job)}}


def ssh_key_pair() -> tuple[str, str]:
    """ctl newSSHAuthSecret: an ECDSA P-521 key, SEC1 PEM private, authorized_keys public."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode() + "\n"
    return private, public


def new_ssh_secret(job: dict, keys: tuple[str, str] | None = None) -> dict:
    private, public = keys or ssh_key_pair()
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731 - Secret data is base64
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": _meta(job, job["metadata"]["name"] + SSH_SUFFIX),
            "type": "kubernetes.io/ssh-auth",
            "data": {"ssh-privatekey": b64(private), "ssh-publickey": b64(public)}}


def _add_env(container: dict, pairs) -> None:
    container.setdefault("env", []).extend({"name": k, "value": v} for k, v in pairs)


def _setup_ssh(spec: dict, job: dict) -> None:
    """ctl setupSSHOnPod: the Secret as id_rsa, id_rsa.pub and authorized_keys, 0600 only
    when mounted at /root/.ssh."""
    mount = job["spec"]["sshAuthMountPath"]
    secret = {"secretName": job["metadata"]["name"] + SSH_SUFFIX, "items": [
        {"key": "ssh-privatekey", "path": "id_rsa"},
        {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"}]}
    if mount == ROOT_SSH:
        secret["defaultMode"] = 0o600
    spec.setdefault("volumes", []).append({"name": SSH_VOLUME, "secret": secret})
    spec["containers"][0].setdefault("volumeMounts", []).append(
        {"name": SSH_VOLUME, "mountPath": mount})


def _gang_decorate(template: dict, job: dict, gang: str | None, scheduler_name: str | None):
    """pg VolcanoCtrl/SchedulerPluginsCtrl.decoratePodTemplateSpec: only with
    --gang-scheduling; overwrites the template's schedulerName."""
    if not gang:
        return
    name = job["metadata"]["name"]
    meta = template.setdefault("metadata", {})
    if gang == VOLCANO:
        template["spec"]["schedulerName"] = VOLCANO
        meta.setdefault("annotations", {})[VOLCANO_GROUP_ANNOTATION] = name
    else:
        template["spec"]["schedulerName"] = scheduler_name or gang
        meta.setdefault("labels", {})[PLUGINS_GROUP_LABEL] = name


def _restart_policy(template: dict, replica: dict) -> None:
    """ctl setRestartPolicy: the replica's policy wins; ExitCode means Never for the pod."""
    policy = replica.get("restartPolicy")
    template["spec"]["restartPolicy"] = "Never" if policy == "ExitCode" else policy


def _default_labels(name: str, role: str) -> dict:
    """ctl defaultLabels."""
    return {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: name, JOB_ROLE_LABEL: role}


def new_worker(job: dict, index: int, gang: str | None = None,
               scheduler_name: str | None = None) -> dict:
    """ctl newWorker."""
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    replica = job["spec"]["mpiReplicaSpecs"]["Worker"]
    tmpl = deepcopy(replica.get("template") or {})
    tmpl.setdefault("metadata", {})
    labels = tmpl["metadata"].setdefault("labels", {})
    labels.update(_default_labels(name, "worker"))
    # ctl workerReplicaIndexLabel: padded by one when the launcher is also a worker.
    labels[REPLICA_INDEX_LABEL] = str(index + 1 if _launcher_as_worker(job) else index)
    spec = tmpl.setdefault("spec", {})
    spec["hostname"] = worker_name(job, index)
    spec["subdomain"] = name  # matches the Service's name
    if spec.get("hostNetwork"):
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    search = f"{name}.{ns}.svc.cluster.local"  # for Intel MPI / MPICH reaching the launcher
    spec.setdefault("dnsConfig", {}).setdefault("searches", []).append(search)
    _restart_policy(tmpl, replica)
    c = spec["containers"][0]
    if not c.get("command") and not c.get("args"):
        c["command"] = ["/usr/sbin/sshd", "-De"]
    _add_env(c, [("K_MPI_JOB_ROLE", "worker")])
    _setup_ssh(spec, job)
    _gang_decorate(tmpl, job, gang, scheduler_name)
    meta = {"name": worker_name(job, index), "namespace": ns, "labels": tmpl["metadata"]["labels"],
            "ownerReferences": [_controller_ref(job)]}
    if tmpl["metadata"].get("annotations"):
        meta["annotations"] = tmpl["metadata"]["annotations"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def new_launcher_template(job: dict, gang: str | None = None,
                          scheduler_name: str | None = None) -> dict:
    """ctl newLauncherPodTemplate."""
    name = job["metadata"]["name"]
    replica = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    tmpl = deepcopy(replica.get("template") or {})
    tmpl.setdefault("metadata", {}).setdefault("labels", {}).update(
        _default_labels(name, "launcher"))
    spec = tmpl.setdefault("spec", {})
    _gang_decorate(tmpl, job, gang, scheduler_name)
    if _launcher_as_worker(job):
        tmpl["metadata"]["labels"][REPLICA_INDEX_LABEL] = "0"
    spec["hostname"] = name + LAUNCHER_SUFFIX
    spec["subdomain"] = name
    if spec.get("hostNetwork"):
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    c = spec["containers"][0]
    _add_env(c, [("K_MPI_JOB_ROLE", "launcher")])
    impl, slots = job["spec"]["mpiImplementation"], str(job["spec"]["slotsPerWorker"])
    if impl == "OpenMPI":
        _add_env(c, [*OMPI_ENV, ("OMPI_MCA_orte_set_default_slots", slots)])
    elif impl == "Intel":
        _add_env(c, [*INTEL_ENV, ("I_MPI_PERHOST", slots)])
    else:
        _add_env(c, MPICH_ENV)
    if not _launcher_as_worker(job):
        # Blanked so a launcher cannot grab GPUs through the container runtime.
        c["env"].extend([{"name": "NVIDIA_VISIBLE_DEVICES"},
                         {"name": "NVIDIA_DRIVER_CAPABILITIES"}])
    _setup_ssh(spec, job)
    _restart_policy(tmpl, replica)
    spec.setdefault("volumes", []).append({"name": CONFIG_VOLUME, "configMap": {
        "name": name + CONFIG_SUFFIX,
        "items": [{"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444},
                  {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": 0o555}]}})
    c.setdefault("volumeMounts", []).append({"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT})
    meta = {"labels": tmpl["metadata"]["labels"], "ownerReferences": [_controller_ref(job)]}
    if tmpl["metadata"].get("annotations"):
        meta["annotations"] = tmpl["metadata"]["annotations"]
    return {"metadata": meta, "spec": spec}


def new_launcher_job(job: dict, gang: str | None = None,
                     scheduler_name: str | None = None) -> dict:
    """ctl newLauncherJob: runPolicy's limits, podReplacementPolicy Failed, suspended with
    the MPIJob."""
    run = job["spec"]["runPolicy"]
    spec: dict = {"template": new_launcher_template(job, gang, scheduler_name),
                  "podReplacementPolicy": "Failed"}
    for src, dst in (("ttlSecondsAfterFinished", "ttlSecondsAfterFinished"),
                     ("activeDeadlineSeconds", "activeDeadlineSeconds"),
                     ("backoffLimit", "backoffLimit")):
        if run.get(src) is not None:
            spec[dst] = run[src]
    if _suspended(job):
        spec["suspend"] = True
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _meta(job, job["metadata"]["name"] + LAUNCHER_SUFFIX), "spec": spec}


def min_available(job: dict) -> int:
    """pg calculateMinAvailable: schedulingPolicy.minAvailable, else workers + 1."""
    policy = job["spec"]["runPolicy"].get("schedulingPolicy") or {}
    if policy.get("minAvailable") is not None:
        return int(policy["minAvailable"])
    return _workers(job) + 1


def _container_resources(template: dict) -> dict[str, Decimal]:
    """pg addResources for one replica: requests, limits where no request."""
    out: dict[str, Decimal] = {}
    for c in (template.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        merged = dict(res.get("requests") or {})
        for k, v in (res.get("limits") or {}).items():
            merged.setdefault(k, v)
        for k, v in merged.items():
            out[k] = out.get(k, Decimal(0)) + parse_quantity(v)
    return out


def min_resources(job: dict, priorities: dict[str, int] | None = None) -> dict | None:
    """pg calculatePGMinResources/calPGMinResource: schedulingPolicy.minResources, else the
    requests of the launcher and as many workers as fit in minAvailable (a lower-priority
    replica type is cut first; on a tie the workers)."""
    policy = job["spec"]["runPolicy"].get("schedulingPolicy") or {}
    if policy.get("minResources") is not None:
        return dict(policy["minResources"])
    minimum = min_available(job)
    if minimum == 0:
        return None
    replicas = job["spec"]["mpiReplicaSpecs"]
    prio = priorities or {}

    def priority(rtype):
        pc = (replicas[rtype].get("template") or {}).get("spec", {}).get("priorityClassName")
        return prio.get(pc, 0) if pc else 0

    order = sorted(replicas, key=priority, reverse=True)
    counts = {r: int(replicas[r].get("replicas") or 0) for r in order}
    if sum(counts.values()) > minimum and len(order) > 1:
        cut = "Worker" if priority(order[0]) == priority(order[1]) else order[1]
        counts[cut] = minimum - 1
    total: dict[str, Decimal] = {}
    for r in order:
        for k, v in _container_resources(replicas[r].get("template") or {}).items():
            total[k] = total.get(k, Decimal(0)) + v * counts[r]
    return {k: fmt(v) for k, v in total.items()}


def new_pod_group(job: dict, gang: str, priorities: dict[str, int] | None = None) -> dict:
    """pg VolcanoCtrl.newPodGroup / SchedulerPluginsCtrl.newPodGroup: named like the job."""
    m, run = job["metadata"], job["spec"]["runPolicy"]
    policy = run.get("schedulingPolicy") or {}
    spec: dict = {"minMember": min_available(job)}
    res = min_resources(job, priorities)
    if gang == VOLCANO:
        queue = policy.get("queue") or (m.get("annotations") or {}).get(VOLCANO_QUEUE_ANNOTATION)
        if queue:
            spec["queue"] = queue
        pc = _priority_class_name(job)
        if pc:
            spec["priorityClassName"] = pc
    else:
        spec["scheduleTimeoutSeconds"] = int(policy.get("scheduleTimeoutSeconds") or 0)
    if res:
        spec["minResources"] = res
    return {"apiVersion": PODGROUP_KEYS[_gang_kind(gang)][1], "kind": "PodGroup",
            "metadata": {"name": m["name"], "namespace": m["namespace"],
                         "ownerReferences": [_controller_ref(job)]}, "spec": spec}


def _priority_class_name(job: dict) -> str:
    """pg calculatePriorityClassName: schedulingPolicy, else launcher's, else worker's."""
    policy = job["spec"]["runPolicy"].get("schedulingPolicy") or {}
    if policy.get("priorityClass"):
        return policy["priorityClass"]
    for rtype in ("Launcher", "Worker"):
        rs = job["spec"]["mpiReplicaSpecs"].get(rtype)
        pc = rs and ((rs.get("template") or {}).get("spec") or {}).get("priorityClassName")
        if pc:
            return pc
    return ""


def _gang_kind(gang: str) -> str:
    return VOLCANO if gang == VOLCANO else SCHEDULER_PLUGINS


@dataclass
class OperatorObjects:
    """What the controller creates for one MPIJob (not suspended)."""
    service: dict
    config_map: dict
    secret: dict
    workers: list[dict]
    launcher_job: dict
    pod_group: dict | None = None
    errors: list[str] = field(default_factory=list)


def operator_objects(mpijob: dict, *, gang_scheduling: str | None = None,
                     running_workers: list[str] | None = None, cluster_domain: str = "",
                     ssh_keys: tuple[str, str] | None = None) -> OperatorObjects:
    """Pure: the objects the operator (started with `--gang-scheduling=gang_scheduling`)
    creates for this MPIJob, as its syncHandler would, without an API server.
    gang_scheduling: None, 'volcano', or a scheduler-plugins scheduler name."""
    job = defaulted(mpijob)
    job["metadata"].setdefault("namespace", "default")
    kind = _gang_kind(gang_scheduling) if gang_scheduling else None
    sched = gang_scheduling if kind == SCHEDULER_PLUGINS else None
    return OperatorObjects(
        service=new_service(job),
        config_map=new_config_map(job, running_workers or [], cluster_domain),
        secret=new_ssh_secret(job, ssh_keys),
        workers=[new_worker(job, i, kind, sched) for i in range(_workers(job))],
        launcher_job=new_launcher_job(job, kind, sched),
        pod_group=new_pod_group(job, kind) if kind else None,
        errors=validate(job))


def completed_pods(mpijob: dict, **kwargs) -> list[dict]:
    """Pure: the launcher pod (as the Job controller stamps it from the launcher Job's
    template; generateName '<job>-launcher-') followed by the worker pods, each complete with
    what the operator adds (hostname/subdomain, env, ~/.ssh and /etc/mpi volumes)."""
    objs = operator_objects(mpijob, **kwargs)
    job = objs.launcher_job
    tmpl = deepcopy(job["spec"]["template"])
    meta = {"generateName": job["metadata"]["name"] + "-",
            "namespace": job["metadata"]["namespace"],
            "labels": {**tmpl["metadata"]["labels"],
                       "batch.kubernetes.io/job-name": job["metadata"]["name"],
                       "job-name": job["metadata"]["name"]},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                 "name": job["metadata"]["name"], "uid": "",
                                 "controller": True, "blockOwnerDeletion": True}]}
    if tmpl["metadata"].get("annotations"):
        meta["annotations"] = tmpl["metadata"]["annotations"]
    launcher = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}
    return [launcher, *objs.workers]


# --- the control loop ---------------------------------------------------------------------------
def _set_condition(status: dict, ctype: str, value: str, reason: str, message: str) -> bool:
    """st setCondition + filterOutCondition: no-op when status and reason are unchanged;
    Succeeded/Failed turn Running (and an older Failed) False."""
    conds = status.get("conditions") or []
    cur = next((c for c in conds if c["type"] == ctype), None)
    if cur and cur["status"] == value and cur.get("reason") == reason:
        return False
    now = now_rfc3339()
    new = {"type": ctype, "status": value, "reason": reason, "message": message,
           "lastUpdateTime": now,
           "lastTransitionTime": cur["lastTransitionTime"] if cur and cur["status"] == value
           else now}
    kept = []
    for c in conds:
        if c["type"] == ctype:
            continue
        if ctype in ("Failed", "Succeeded") and c["type"] in ("Running", "Failed"):
            c = {**c, "status": "False"}
        kept.append(c)
    status["conditions"] = [*kept, new]
    return True


def _has(status: dict, ctype: str) -> bool:
    return any(c["type"] == ctype and c["status"] == "True" for c in status.get("conditions") or [])


def _finished(status: dict) -> bool:
    return _has(status, "Succeeded") or _has(status, "Failed")


def _controlled_by(obj: dict, owner: dict) -> bool:
    uid = owner["metadata"]["uid"]
    return any(r.get("uid") == uid and r.get("controller")
               for r in obj["metadata"].get("ownerReferences") or [])


def _ready(pod: dict) -> bool:
    c = get_condition(pod, "Ready")
    return bool(c) and c.get("status") == "True"


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


class _Requeue(Exception):
    """The real controller returns an error and retries with backoff; we retry next tick."""


class MPIOperator(Loop):
    """The operator deployment. gang_scheduling mirrors its --gang-scheduling flag: None
    (the default install), 'volcano', or a scheduler-plugins scheduler name."""

    name = "mpi-operator"

    def __init__(self, store, registry, objects, tick: float = 0.02,
                 gang_scheduling: str | None = None, cluster_domain: str = ""):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects
        self.gang_scheduling = gang_scheduling or None
        self.cluster_domain = cluster_domain
        self._reported: dict[str, set[str]] = {}  # job uid -> event keys already recorded

    @property
    def gang(self) -> str | None:
        return _gang_kind(self.gang_scheduling) if self.gang_scheduling else None

    @property
    def scheduler_name(self) -> str | None:
        return self.gang_scheduling if self.gang == SCHEDULER_PLUGINS else None

    def _step(self) -> None:
        jobs = self.store.items(KEY)
        live = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            try:
                self._sync(job)
            except (_Requeue, errors.ApiError):
                pass  # ctl processNextWorkItem: AddRateLimited, i.e. try again later
        for uid in [u for u in self._reported if u not in live]:
            del self._reported[uid]

    # -- helpers over the store ------------------------------------------------------------------
    def _rt(self, key: str):
        rt = self.registry.by_key(key)
        if rt is None:
            raise _Requeue(f"{key} is not served")
        return rt

    def _event(self, job: dict, etype: str, reason: str, message: str, once: bool = True):
        key = f"{reason}:{message}"
        seen = self._reported.setdefault(job["metadata"]["uid"], set())
        if once and key in seen:
            return  # client-go's recorder aggregates repeats into one Event
        seen.add(key)
        events.record(self.store, job, etype, reason, message, COMPONENT)

    def _get_owned(self, job: dict, key: str, name: str, kind: str) -> dict | None:
        """ctl getOrCreate*: an object of that name not controlled by the MPIJob stops the
        sync with an ErrResourceExists event."""
        obj = self.store.get(key, job["metadata"]["namespace"], name)
        if obj is not None and not _controlled_by(obj, job):
            self._event(job, "Warning", "ErrResourceExists", RESOURCE_EXISTS % (name, kind))
            raise _Requeue(name)
        return obj

    def _create(self, key: str, obj: dict) -> dict:
        return self.objects.create(self._rt(key), obj, obj["metadata"].get("namespace"))

    # -- ctl syncHandler -------------------------------------------------------------------------
    def _sync(self, stored: dict) -> None:
        job = defaulted(stored)
        m = job["metadata"]
        ns, name = m["namespace"], m["name"]
        manager = job["spec"]["runPolicy"].get("managedBy")
        if manager and manager != KUBEFLOW_CONTROLLER:
            return  # managedByExternalController: MultiKueue drives it
        if m.get("deletionTimestamp"):
            return
        problems = validate(job)
        if problems:
            self._event(job, "Warning", "ValidationError",
                        f"Found validation errors: {', '.join(problems)}"[:1024])
            return  # not requeued
        status = deepcopy(job.get("status") or {})
        old_status = deepcopy(status)
        if not status.get("conditions"):
            msg = f"MPIJob {ns}/{name} is created."
            _set_condition(status, "Created", "True", "MPIJobCreated", msg)
            self._event(job, "Normal", "MPIJobCreated", msg)
        if _finished(status) and status.get("completionTime"):
            if job["spec"]["runPolicy"]["cleanPodPolicy"] in ("All", "Running"):
                self._clean_up_workers(job, status)
                self._write_status(job, old_status, status)
            return
        if not status.get("startTime") and not _suspended(job):
            status["startTime"] = now_rfc3339()
        launcher = self._get_owned(job, "batch/jobs", name + LAUNCHER_SUFFIX, "Job")
        workers: list[dict] = []
        done = launcher is not None and self._job_finished(launcher) is not None
        if not done:
            self._service(job)
            self._config_map(job)
            self._secret(job)
            if not _suspended(job):
                if self.gang:
                    self._pod_group(job)
                workers = self._get_or_create_workers(job)
            if launcher is None:
                policy = job["spec"]["launcherCreationPolicy"]
                if policy == "AtStartup" or sum(map(_ready, workers)) == len(workers):
                    try:
                        launcher = self._create("batch/jobs", new_launcher_job(
                            job, self.gang, self.scheduler_name))
                    except errors.ApiError as e:
                        self._event(job, "Warning", "MPIJobFailed",
                                    f"launcher pod created failed: {e.message}")
                        raise
        if launcher is not None:
            launcher = self._sync_launcher_suspend(job, launcher)
        if _suspended(job):
            self._clean_up_workers(job, status)
        self._update_status(job, status, launcher, workers)
        self._write_status(job, old_status, status)

    def _job_finished(self, launcher: dict) -> str | None:
        for t in ("Complete", "Failed"):
            c = get_condition(launcher, t)
            if c and c.get("status") == "True":
                return t
        return None

    def _service(self, job: dict) -> None:
        """ctl getOrCreateService: selector and publishNotReadyAddresses are kept in sync."""
        want = new_service(job)
        svc = self._get_owned(job, "/services", want["metadata"]["name"], "Service")
        if svc is None:
            self._create("/services", want)
        elif (svc["spec"].get("selector") != want["spec"]["selector"]
              or bool(svc["spec"].get("publishNotReadyAddresses"))
              != want["spec"]["publishNotReadyAddresses"]):
            def edit(s):
                s["spec"]["selector"] = want["spec"]["selector"]
                s["spec"]["publishNotReadyAddresses"] = want["spec"]["publishNotReadyAddresses"]
            self.store.mutate("/services", job["metadata"]["namespace"],
                              svc["metadata"]["name"], edit)

    def _config_map(self, job: dict) -> None:
        """ctl getOrCreateConfigMap: rewritten whenever its data differs (new Running pods)."""
        m = job["metadata"]
        running = [p["metadata"]["name"] for p in self._worker_pods(job) if _phase(p) == "Running"]
        want = new_config_map(job, running, self.cluster_domain)
        cm = self._get_owned(job, "/configmaps", want["metadata"]["name"], "ConfigMap")
        if cm is None:
            self._create("/configmaps", want)
        elif cm.get("data") != want["data"]:
            self.store.mutate("/configmaps", m["namespace"], cm["metadata"]["name"],
                              lambda c: c.__setitem__("data", want["data"]))

    def _secret(self, job: dict) -> None:
        """ctl getOrCreateSSHAuthSecret: created once; only its key set is checked later."""
        name = job["metadata"]["name"] + SSH_SUFFIX
        if self._get_owned(job, "/secrets", name, "Secret") is None:
            self._create("/secrets", new_ssh_secret(job))

    def _pod_group(self, job: dict) -> None:
        """ctl getOrCreatePodGroups (only when the operator runs with --gang-scheduling)."""
        key, _ = PODGROUP_KEYS[self.gang]
        want = new_pod_group(job, self.gang_scheduling)
        pg = self._get_owned(job, key, want["metadata"]["name"], "PodGroup")
        if pg is None:
            self._create(key, want)
        elif pg.get("spec") != want["spec"]:
            self.store.mutate(key, job["metadata"]["namespace"], pg["metadata"]["name"],
                              lambda p: p.__setitem__("spec", want["spec"]))

    def _worker_pods(self, job: dict) -> list[dict]:
        """ctl workerSelector: pods with the worker's default labels."""
        want = _default_labels(job["metadata"]["name"], "worker")
        return [p for p in self.store.items("/pods", job["metadata"]["namespace"])
                if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())]

    def _get_or_create_workers(self, job: dict) -> list[dict]:
        """ctl getOrCreateWorker: scale down extra indexes, create the missing ones."""
        replicas = _workers(job)
        ns = job["metadata"]["namespace"]
        for p in self._worker_pods(job):
            idx = (p["metadata"].get("labels") or {}).get(REPLICA_INDEX_LABEL)
            if idx is not None and idx.isdigit() and int(idx) >= replicas:
                self._delete_pod(ns, p["metadata"]["name"])
        out = []
        for i in range(replicas):
            pod = self.store.get("/pods", ns, worker_name(job, i))
            if pod is None:
                try:
                    pod = self._create("/pods", new_worker(job, i, self.gang,
                                                           self.scheduler_name))
                except errors.ApiError as e:
                    self._event(job, "Warning", "MPIJobFailed",
                                f"worker pod created failed: {e.message}")
                    raise
            if not _controlled_by(pod, job):
                self._event(job, "Warning", "ErrResourceExists",
                            RESOURCE_EXISTS % (pod["metadata"]["name"], "Pod"))
                raise _Requeue(pod["metadata"]["name"])
            out.append(pod)
        return out

    def _delete_pod(self, ns: str, name: str) -> None:
        try:
            self.objects.delete(self._rt("/pods"), ns, name)
        except errors.ApiError as e:
            if e.code != 404:
                raise

    def _sync_launcher_suspend(self, job: dict, launcher: dict) -> dict:
        """ctl syncHandler: the launcher Job follows runPolicy.suspend. Unsuspending clears
        its startTime and copies the template's scheduling directives (Kueue may have
        injected some) -- and resumes it at once, workers Ready or not."""
        ns, name = job["metadata"]["namespace"], launcher["metadata"]["name"]
        suspended = bool(launcher["spec"].get("suspend"))
        if not _suspended(job) and suspended:
            desired = new_launcher_template(job, self.gang, self.scheduler_name)

            def resume(j):
                (j.get("status") or {}).pop("startTime", None)
                t = j["spec"]["template"]
                md = t.setdefault("metadata", {})
                md["labels"] = {**(md.get("labels") or {}), **desired["metadata"]["labels"]}
                if desired["metadata"].get("annotations"):
                    md["annotations"] = {**(md.get("annotations") or {}),
                                         **desired["metadata"]["annotations"]}
                for k in ("nodeSelector", "tolerations", "schedulingGates"):
                    if desired["spec"].get(k) is not None:
                        t["spec"][k] = desired["spec"][k]
                    else:
                        t["spec"].pop(k, None)
                j["spec"]["suspend"] = False
            return self.store.mutate("batch/jobs", ns, name, resume) or launcher
        if _suspended(job) and not suspended:
            return self.store.mutate("batch/jobs", ns, name,
                                     lambda j: j["spec"].__setitem__("suspend", True)) or launcher
        return launcher

    def _clean_up_workers(self, job: dict, status: dict) -> None:
        """ctl cleanUpWorkerPods/deleteWorkerPods: with cleanPodPolicy Running only pods that
        are Pending or Running go; the PodGroup goes too."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        running_only = job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
        for i in range(_workers(job)):
            pod = self.store.get("/pods", ns, f"{name}{WORKER_SUFFIX}-{i}")
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if not _controlled_by(pod, job):
                self._event(job, "Warning", "ErrResourceExists",
                            RESOURCE_EXISTS % (pod["metadata"]["name"], "Pod"))
                raise _Requeue(pod["metadata"]["name"])
            if running_only and _phase(pod) not in ("Running", "Pending"):
                continue
            self._delete_pod(ns, pod["metadata"]["name"])
        status.setdefault("replicaStatuses", {})["Worker"] = {}
        if self.gang:
            key, _ = PODGROUP_KEYS[self.gang]
            pg = self.store.get(key, ns, name)
            if pg is not None and _controlled_by(pg, job):
                try:
                    self.objects.delete(self._rt(key), ns, name)
                except errors.ApiError as e:
                    if e.code != 404:
                        raise

    def _launcher_pods(self, launcher: dict) -> list[dict]:
        uid, ns = launcher["metadata"]["uid"], launcher["metadata"]["namespace"]
        out = []
        for key, pns, pname in self.store.dependents(uid):
            if key == "/pods" and pns == ns:
                p = self.store.get(key, pns, pname)
                if p is not None and _controlled_by(p, launcher):
                    out.append(p)
        return out

    def _update_status(self, job: dict, status: dict, launcher: dict | None,
                       workers: list[dict]) -> None:
        """ctl updateMPIJobStatus."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        if _suspended(job):
            if _set_condition(status, "Suspended", "True", "MPIJobSuspended", "MPIJob suspended"):
                self._event(job, "Normal", "MPIJobSuspended", "MPIJob suspended", once=False)
        elif any(c["type"] == "Suspended" for c in status.get("conditions") or []):
            if _set_condition(status, "Suspended", "False", "MPIJobResumed", "MPIJob resumed"):
                self._event(job, "Normal", "MPIJobResumed", "MPIJob resumed", once=False)
                status["startTime"] = now_rfc3339()
        replicas = status.setdefault("replicaStatuses", {})
        launcher_running = 0
        if launcher is not None:
            pods = self._launcher_pods(launcher)
            launcher_running = sum(1 for p in pods if _phase(p) == "Running")
            ls: dict = {}
            if (launcher.get("status") or {}).get("failed"):
                ls["failed"] = launcher["status"]["failed"]
            outcome = self._job_finished(launcher)
            if outcome == "Complete":
                ls["succeeded"] = 1
                msg = f"MPIJob {ns}/{name} successfully completed."
                self._event(job, "Normal", "MPIJobSucceeded", msg)
                status.setdefault("completionTime", (launcher.get("status") or {}).get(
                    "completionTime") or now_rfc3339())
                _set_condition(status, "Succeeded", "True", "MPIJobSucceeded", msg)
            elif outcome == "Failed":
                self._failed(job, status, launcher, pods)
            elif launcher_running:
                ls["active"] = launcher_running
            replicas["Launcher"] = ls
        running = evicted = 0
        ws: dict = {}
        for p in workers:
            phase = _phase(p)
            if phase == "Failed":
                ws["failed"] = ws.get("failed", 0) + 1
                evicted += (p.get("status") or {}).get("reason") == "Evicted"
            elif phase == "Succeeded":
                ws["succeeded"] = ws.get("succeeded", 0) + 1
            elif phase == "Running":
                running += 1
                ws["active"] = ws.get("active", 0) + 1
        replicas["Worker"] = ws
        if evicted:
            msg = f"{evicted}/{len(workers)} workers are evicted"
            _set_condition(status, "Failed", "True", "MPIJobEvicted", msg)
            self._event(job, "Warning", "MPIJobEvicted", msg)
        if _suspended(job):
            _set_condition(status, "Running", "False", "MPIJobSuspended",
                           f"MPIJob {ns}/{name} is suspended.")
        elif _finished(status):
            if not any(c["type"] == "Running" for c in status.get("conditions") or []):
                _set_condition(status, "Running", "False", "MPIJobRunning",
                               f"MPIJob {ns}/{name} is finished but Running condition was "
                               "never set.")
        elif launcher is not None and launcher_running >= 1 and running == len(workers):
            msg = f"MPIJob {ns}/{name} is running."
            _set_condition(status, "Running", "True", "MPIJobRunning", msg)
            self._event(job, "Normal", "MPIJobRunning", f"MPIJob {ns}/{name} is running")

    def _failed(self, job: dict, status: dict, launcher: dict, pods: list[dict]) -> None:
        """ctl updateMPIJobFailedStatus: the launcher Job's reason; on BackoffLimitExceeded
        with the last failed launcher pod's reason and message appended."""
        cond = get_condition(launcher, "Failed") or {}
        reason = cond.get("reason") or "MPIJobFailed"
        msg = cond.get("message") or (f"MPIJob {job['metadata']['namespace']}/"
                                      f"{job['metadata']['name']} has failed")
        if reason == "BackoffLimitExceeded":
            failed = [p for p in pods if _phase(p) == "Failed"]
            if failed:
                last = max(failed, key=lambda p: p["metadata"].get("creationTimestamp") or "")
                reason += "/" + ((last.get("status") or {}).get("reason") or "")
                msg = (msg + ": " + ((last.get("status") or {}).get("message") or ""))[:1024]
        self._event(job, "Warning", reason, msg)
        status.setdefault("completionTime", now_rfc3339())
        _set_condition(status, "Failed", "True", reason, msg)

    def _write_status(self, job: dict, old: dict, new: dict) -> None:
        """ctl doUpdateJobStatus: only when something changed."""
        if new == old:
            return
        uid = job["metadata"]["uid"]
        self.store.mutate(KEY, job["metadata"]["namespace"], job["metadata"]["name"],
                          lambda j: j.__setitem__("status", new)
                          if j["metadata"]["uid"] == uid else False)
