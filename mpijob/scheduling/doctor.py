"""`hvdk8s doctor`: what a cluster offers and what hvdk8s will do there (pure: facts in,
findings out; launcher/backends/kubernetes/cluster_reads.py gathers the facts).

Every finding says what it changes for a job and how to fix it. A job can be submitted when
no finding is a failure: the API answers and the caller may do what built-in mode does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpijob import gang as gangs
from mpijob.findings import FAIL, INFO, OK, WARN, Finding
from mpijob.scheduling import rdma
from mpijob.scheduling.dra_devices import DRIVER as DRA_DRIVER
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, parse_annotation
from mpijob.wellknown import GPU_PRODUCT_LABEL, GPU_RESOURCE, MULTUS_RESOURCE_ANNOTATION

OPERATOR_INSTALL = ("kubectl apply --server-side -f https://raw.githubusercontent.com/kubeflow/"
                    "mpi-operator/master/deploy/v2beta1/mpi-operator.yaml")

# (verb, resource, group, subresource, needed by built-in mode, what a denial changes)
PERMISSIONS: tuple[tuple[str, str, str, str, bool, str], ...] = (
    ("create", "jobs", "batch", "", True, "submit cannot create the launcher Job"),
    ("patch", "jobs", "batch", "", True, "submit cannot start the launcher once workers run"),
    ("get", "jobs", "batch", "", True, "get/wait cannot read the job"),
    ("list", "jobs", "batch", "", True, "list cannot show jobs"),
    ("delete", "jobs", "batch", "", True, "delete and rollback cannot remove the job"),
    ("create", "pods", "", "", True, "submit cannot create worker pods"),
    ("list", "pods", "", "", True, "status, get and wait cannot see the pods"),
    ("watch", "pods", "", "", False, "wait polls instead of watching"),
    ("delete", "pods", "", "", True, "idle workers cannot be released after the job"),
    ("get", "pods", "", "log", True, "logs cannot be read"),
    ("create", "configmaps", "", "", True, "submit cannot create the hostfile ConfigMap"),
    ("create", "secrets", "", "", True, "submit cannot create the SSH key Secret"),
    ("create", "services", "", "", True, "submit cannot create the workers' Service"),
    ("deletecollection", "configmaps", "", "", True, "delete leaves ConfigMaps behind"),
    ("list", "events", "", "", False, "unscheduled workers are reported without the "
                                      "scheduler's reasons"),
    ("list", "nodes", "", "", False, "no cluster snapshot: placement is left to the scheduler "
                                     "and no throughput is predicted"),
)
OPERATOR_PERMISSIONS = (("create", "mpijobs", "kubeflow.org", "", "--mode operator cannot "
                                                                   "create MPIJobs"),)


@dataclass
class Facts:
    """What launcher/backends/kubernetes/cluster_reads.py read from the cluster; None means it could not tell."""

    server: str
    namespace: str
    version: str | None = None
    version_error: str | None = None
    version_status: int | None = None  # the HTTP status of the failed /version (0: no answer)
    # (verb, resource, group, subresource) -> allowed (None: the review itself failed)
    permissions: dict[tuple[str, str, str, str], bool | None] = field(default_factory=dict)
    nodes: list[dict] | None = None  # None: nodes could not be listed
    pods: list[dict] | None = None  # pods of all namespaces, for the agent's freshness
    groups: set[str] = field(default_factory=set)
    mpijob_versions: tuple[str, ...] = ()  # kubeflow.org versions serving mpijobs
    trainer_versions: tuple[str, ...] = ()  # trainer.kubeflow.org versions serving trainjobs
    trainer_runtimes: list[dict] | None = None  # ClusterTrainingRuntimes (None: not readable)
    trainer_status_gate: bool | None = None  # its config's TrainJobStatus (None: unreadable)
    operator_deployment: dict | None = None  # the mpi-operator Deployment, when readable
    # `install agent`'s hvdk8s-start-guard Deployment ({}: none; None: not readable)
    start_guard: dict | None = None
    kueue_config: dict | None = None  # parsed controller_manager_config.yaml, when readable
    kueue_config_error: str | None = None
    served: set[str] = field(default_factory=set)  # "<apiVersion>/<plural>" of gang detect kinds
    dra_versions: tuple[str, ...] = ()
    dra_gpu_slices: int | None = None  # ResourceSlices of the NVIDIA GPU DRA driver
    namespace_labels: dict | None = None  # the job namespace's labels (None: not readable)
    quotas: list[dict] | None = None  # its ResourceQuotas (None: not readable)
    # The namespace's NetworkAttachmentDefinitions (None: not served or not readable).
    nads: list[dict] | None = None
    # NIC DRA drivers: driver -> (devices published, nodes), and DeviceClass -> driver.
    nic_slices: dict[str, tuple[int, int]] = field(default_factory=dict)
    nic_classes: dict[str, str] = field(default_factory=dict)



# The agent's image is not published (images/README.md): the fix names the build and the
# --image to give, never a default that would not pull on any node.
INSTALL_AGENT = ("hvdk8s install agent --image REF (a DaemonSet reading NVML; build REF with "
                 "bash images/build.sh agent and push it where the nodes pull from)")

def _gpus(node: dict) -> int:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    try:
        return int(str(alloc.get(GPU_RESOURCE, "0")))
    except ValueError:
        return 0


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _names(nodes: list[dict], limit: int = 3) -> str:
    names = sorted(n["metadata"]["name"] for n in nodes)
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit
                                       else "")


def operator_gang_flag(deployment: dict | None) -> str | None:
    """The MPI Operator's --gang-scheduling value from its Deployment's args ('' when
    absent); cmd/mpi-operator/app/options/options.go defines the flag."""
    if deployment is None:
        return None
    for c in ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "containers") or []:
        args = [*(c.get("command") or []), *(c.get("args") or [])]
        for i, a in enumerate(args):
            for prefix in ("--gang-scheduling=", "-gang-scheduling="):
                if a.startswith(prefix):
                    return a[len(prefix):]
            if a in ("--gang-scheduling", "-gang-scheduling") and i + 1 < len(args):
                return args[i + 1]
    return ""


def _image_tag(deployment: dict) -> str:
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers") or []
    image = containers[0].get("image", "") if containers else ""
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"


# --- the checks ---------------------------------------------------------------------------------
def _api(f: Facts) -> list[Finding]:
    if f.version is None and f.version_status == 401:
        return [Finding("api server", FAIL, f"{f.server} answers but rejects this kubeconfig's "
                        f"credentials (HTTP 401 Unauthorized): {f.version_error}",
                        "nothing can be submitted", "log in again or renew the token of the "
                        "kubeconfig context (kubectl get ns checks it)")]
    if f.version is None:
        return [Finding("api server", FAIL, f"{f.server} does not answer: {f.version_error}",
                        "nothing can be submitted", "check the kubeconfig context and that the "
                        "cluster is reachable (kubectl version)")]
    return [Finding("api server", OK, f"{f.server}: Kubernetes {f.version}")]


def _permissions(f: Facts) -> list[Finding]:
    out, granted = [], 0
    checks = [(v, r, g, s, need, eff) for v, r, g, s, need, eff in PERMISSIONS]
    if f.mpijob_versions:
        checks += [(v, r, g, s, False, eff) for v, r, g, s, eff in OPERATOR_PERMISSIONS]
    for verb, res, group, sub, needed, effect in checks:
        allowed = f.permissions.get((verb, res, group, sub))
        what = f"{res}/{sub}" if sub else (f"{res}.{group}" if group else res)
        scope = "cluster-wide" if res == "nodes" else f"in namespace {f.namespace}"
        if allowed:
            granted += 1
            continue
        if allowed is None:
            out.append(Finding("permissions", WARN, f"could not ask whether you may {verb} "
                               f"{what} {scope}", effect,
                               "allow create on selfsubjectaccessreviews.authorization.k8s.io"))
            continue
        out.append(Finding("permissions", FAIL if needed else WARN,
                           f"you may not {verb} {what} {scope}", effect,
                           f"ask for a {'ClusterRole' if res == 'nodes' else 'Role'} granting "
                           f"{verb} on {what} (check: kubectl auth can-i {verb} {what}"
                           f"{'' if res == 'nodes' else ' -n ' + f.namespace})"))
    if not out:
        out.append(Finding("permissions", OK, f"all {granted} permissions hvdk8s uses are "
                           f"granted in namespace {f.namespace}"))
    return out


def _gpu_nodes(f: Facts) -> list[Finding]:
    if f.nodes is None:
        return [Finding("gpu nodes", WARN, "nodes cannot be listed", "no GPU inventory: "
                        "placement is left to the scheduler", "grant list on nodes")]
    gpu_nodes = [n for n in f.nodes if _gpus(n)]
    if not gpu_nodes:
        return [Finding("gpu nodes", WARN, f"none of {len(f.nodes)} nodes offers {GPU_RESOURCE}",
                        "only --gpus 0 jobs can run", "install the NVIDIA device plugin "
                        "(or the NVIDIA GPU Operator) on the GPU nodes")]
    out = [Finding("gpu nodes", OK, f"{len(gpu_nodes)} of {len(f.nodes)} nodes offer "
                   f"{sum(map(_gpus, gpu_nodes))} {GPU_RESOURCE} (NVIDIA device plugin)")]
    models: dict[str, int] = {}
    unlabeled = []
    for n in gpu_nodes:
        product = _labels(n).get(GPU_PRODUCT_LABEL)
        if product:
            models[product] = models.get(product, 0) + 1
        else:
            unlabeled.append(n)
    if models:
        out.append(Finding("gpu models", OK, ", ".join(f"{m} x{c} nodes" if c > 1 else m
                                                       for m, c in sorted(models.items()))
                           + " (GPU Feature Discovery labels)"))
    if unlabeled:
        out.append(Finding("gpu models", WARN, f"no {GPU_PRODUCT_LABEL} label on {_names(unlabeled)}",
                           "GPU model unknown there: without the topology agent placement "
                           "assumes PCIe-only links and throughput is not predicted",
                           "install GPU Feature Discovery (part of the NVIDIA GPU Operator)"))
    out += _agent(f, gpu_nodes)
    out += _unattended(f)
    return out


def _unattended(f: Facts) -> list[Finding]:
    """The start guard (`install agent`'s one-replica Deployment) is what fails a job whose
    pods never start while no hvdk8s command runs (docs/cleanup.md)."""
    guard = f.start_guard
    if guard is None:
        return [Finding("unattended cleanup", INFO, "Deployments cannot be listed",
                        "whether a job whose pods never start is failed with no hvdk8s "
                        "command running is unknown")]
    if ((guard.get("status") or {}).get("availableReplicas") or 0) >= 1:
        return [Finding("unattended cleanup", OK, "the start guard fails jobs whose pods miss "
                        "--start-timeout, with no hvdk8s command running")]
    why = "not available" if guard else "not installed"
    return [Finding("unattended cleanup", WARN, f"the start guard is {why}",
                    "a job whose pods never start (image pull, config error) keeps its "
                    "GPUs until someone runs hvdk8s tidy or delete",
                    INSTALL_AGENT)]


PSA_PREFIX = "pod-security.kubernetes.io/"
PSA_NEEDS = {
    "privileged": "no restriction: every option works",
    "baseline": "--host-network is refused (hostNetwork, hostPort); everything else works",
    "restricted": "pods must run as non-root: submit with --run-as-user UID (a uid the image "
                  "serves); --host-network is refused",
}


def _admission(f: Facts) -> list[Finding]:
    """The namespace's Pod Security levels and each ResourceQuota's headroom."""
    out = []
    if f.namespace_labels is None:
        out.append(Finding("pod security", INFO, f"namespace {f.namespace} cannot be read",
                           "Pod Security levels unknown: submit dry-runs the pods first "
                           "and names any refusal"))
    else:
        levels = {m: f.namespace_labels.get(PSA_PREFIX + m) for m in ("enforce", "warn", "audit")}
        shown = ", ".join(f"{m}={v or '-'}" for m, v in levels.items())
        enforce = levels["enforce"]
        if enforce is None:
            out.append(Finding("pod security", INFO, f"{shown} (no enforce label: the cluster's "
                               "default level applies, privileged unless its admin set one)",
                               "submit dry-runs the pods first and names any refusal"))
        else:
            out.append(Finding("pod security", INFO if enforce != "privileged" else OK,
                               shown, PSA_NEEDS.get(enforce, PSA_NEEDS["restricted"])))
    if f.quotas is None:
        out.append(Finding("quota", INFO, f"ResourceQuotas of {f.namespace} cannot be listed",
                           "a job is checked against them pod by pod only"))
    for q in f.quotas or []:
        status = q.get("status") or {}
        hard = status.get("hard") or (q.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        parts = ", ".join(f"{k} {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()))
        needs = [k for k in hard if k.startswith(("requests.cpu", "requests.memory", "limits.",
                                                  "cpu", "memory"))]
        out.append(Finding("quota", INFO, f"ResourceQuota {q['metadata']['name']}: {parts} "
                           "(used/hard)",
                           "jobs that need more than the headroom are refused before "
                           "anything is created" + (
                               "; every container must state " + ", ".join(sorted(needs))
                               + " (hvdk8s sets them: --cpu, --memory)" if needs else "")))
    return out


def _agent(f: Facts, gpu_nodes: list[dict]) -> list[Finding]:
    """The topology agent's annotation: present, readable, and fresh (its `allocated` agrees
    with the GPU pods the API shows on the node; docs/agent.md: `updated` is the time of
    the last change, not a heartbeat, so agreement is the test, not age)."""
    missing, unreadable, stale = [], [], []
    for n in gpu_nodes:
        text = ((n.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_TOPOLOGY)
        if not text:
            missing.append(n)
            continue
        try:
            _, _, meta = parse_annotation(text)
        except ValueError:
            unreadable.append(n)
            continue
        if f.pods is not None:
            on_node = {f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                       for p in f.pods if (p.get("spec") or {}).get("nodeName") ==
                       n["metadata"]["name"] and _pod_gpus(p)
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
            if set(meta.get("allocated") or {}) != on_node:
                stale.append(n)
    out = []
    if missing:
        out.append(Finding("topology agent", INFO if len(missing) < len(gpu_nodes) else WARN,
                           f"no {ANNOTATION_TOPOLOGY} annotation on {_names(missing)}",
                           "placement uses presets from GPU Feature Discovery labels and "
                           "guesses which GPU indices are taken",
                           INSTALL_AGENT))
    if unreadable:
        out.append(Finding("topology agent", WARN, f"unreadable {ANNOTATION_TOPOLOGY} on "
                           f"{_names(unreadable)}", "those nodes are planned from presets",
                           "upgrade the agent to this hvdk8s version: " + INSTALL_AGENT))
    if stale:
        out.append(Finding("topology agent", WARN, f"stale {ANNOTATION_TOPOLOGY} on "
                           f"{_names(stale)}: its GPU pods differ from the API's",
                           "placement may pick GPUs that are taken (the job then waits for "
                           "the device plugin's choice)",
                           "check the agent (kubectl -n kube-system logs ds/hvdk8s-agent)"))
    if not out:
        out.append(Finding("topology agent", OK, f"fresh {ANNOTATION_TOPOLOGY} on all "
                           f"{len(gpu_nodes)} GPU nodes" + ("" if f.pods is not None else
                                                            " (freshness not checked: pods "
                                                            "cannot be listed)")))
    return out


def _pod_gpus(pod: dict) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
            GPU_RESOURCE)
        try:
            total += int(str(value or 0))
        except ValueError:
            pass
    return total


def _operator(f: Facts) -> list[Finding]:
    if "v2beta1" not in f.mpijob_versions:
        if f.mpijob_versions:
            return [Finding("mpi operator", WARN, "MPIJob served only as kubeflow.org/"
                            f"{'/'.join(f.mpijob_versions)} (the training operator's)",
                            "--mode operator needs kubeflow.org/v2beta1; built-in mode works",
                            "install MPI Operator v2: " + OPERATOR_INSTALL)]
        return [Finding("mpi operator", INFO, "no MPIJob CRD", "--mode operator is refused; "
                        "built-in mode (--mode pods) needs no operator",
                        OPERATOR_INSTALL)]
    dep = f.operator_deployment
    if dep is None:
        return [Finding("mpi operator", OK, "MPIJob kubeflow.org/v2beta1 served (operator "
                        "deployment not readable: version and --gang-scheduling unknown)")]
    flag = operator_gang_flag(dep)
    where = f"{dep['metadata'].get('namespace')}/{dep['metadata']['name']}"
    return [Finding("mpi operator", OK, f"MPIJob kubeflow.org/v2beta1 served; {where} runs "
                    f"{_image_tag(dep)}" + (f" with --gang-scheduling={flag}" if flag else
                                            " without --gang-scheduling"))]


def _trainer(f: Facts) -> list[Finding]:
    """Kubeflow Trainer (--mode trainjob) and its runtimes."""
    out = []
    if not f.trainer_versions:
        out.append(Finding("trainer", INFO, "no Kubeflow Trainer (no trainer.kubeflow.org "
                           "TrainJob CRD)", "--mode trainjob is refused"))
    else:
        api = f"TrainJob trainer.kubeflow.org/{f.trainer_versions[0]} served"
        runtimes = f.trainer_runtimes
        if runtimes is None:
            out.append(Finding("trainer", OK, f"Kubeflow Trainer: {api} (ClusterTrainingRuntimes "
                               "not readable)"))
        else:
            mpi = sorted(r["metadata"]["name"] for r in runtimes
                         if ((r.get("spec") or {}).get("mlPolicy") or {}).get("mpi") is not None)
            ours = [r for r in runtimes if _labels(r).get("app.kubernetes.io/managed-by") == "hvdk8s"]
            images = sorted((r["metadata"].get("annotations") or {}).get("hvdk8s.io/image", "?")
                             for r in ours)
            out.append(Finding(
                "trainer", OK if ours else WARN,
                f"Kubeflow Trainer: {api}; {len(runtimes)} ClusterTrainingRuntime(s), with MPI: "
                f"{', '.join(mpi) or 'none'}",
                f"--mode trainjob runs images {', '.join(images)}" if ours else
                "--mode trainjob needs hvdk8s's runtime for the job's image",
                "" if ours else "hvdk8s install runtime --image IMG (--dry-run shows it)"))
    if f.trainer_versions and f.trainer_status_gate is not None:
        out.append(Finding(
            "trainer status", INFO, "Kubeflow Trainer's TrainJobStatus feature gate is "
            + ("on in its config" if f.trainer_status_gate else "off (its config)"),
            "hvdk8s's TrainJob launchers post their progress to status.trainerStatus"
            if f.trainer_status_gate
            else "TrainJobs show progress from the launcher's log only"))
    # What --mode auto takes depends on the job (mpijob.k8s.modes): `doctor` asks it for
    # the design-card command (launcher.cli.doctor).
    return out


def _gang(f: Facts) -> list[Finding]:
    flag = operator_gang_flag(f.operator_deployment)
    has_operator = "v2beta1" in f.mpijob_versions
    def served(kind) -> bool:
        return f"{kind.api_version}/{kind.plural}" in f.served

    out = [finding for s in gangs.SCHEDULERS.values() if s.installed(f.groups, served)
           for finding in s.doctor(flag, has_operator, f)]
    if (picked := gangs.installed(f.groups, served)) is not None:
        out.append(Finding("gang", INFO, f"--gang uses {picked.title}",
                           "--gang-scheduler NAME picks another of those installed"))
    if not out:
        out.append(Finding("gang scheduler", INFO, "no " + gangs.listed(),
                           "--gang uses hvdk8s's own all-or-nothing check (the job is rolled "
                           "back if not every worker is scheduled in --schedule-timeout)",
                           "install Volcano or scheduler-plugins to queue jobs instead"))
    return out


def _dra(f: Facts) -> list[Finding]:
    """DRA (mpijob/k8s/dra.py): with resource.k8s.io/v1 and the NVIDIA GPU driver's
    ResourceSlices, workers claim exactly the planned GPUs by UUID."""
    plugin = "GPUs are requested as nvidia.com/gpu through the device plugin"
    if not f.dra_versions:
        return [Finding("dra", INFO, "no resource.k8s.io API (Dynamic Resource Allocation)",
                        plugin)]
    served = "resource.k8s.io served: " + ", ".join(f.dra_versions)
    if "v1" not in f.dra_versions:
        return [Finding("dra", INFO, served, plugin + " (hvdk8s claims GPUs through "
                        "resource.k8s.io/v1, Kubernetes 1.34+)")]
    if f.dra_gpu_slices is None:
        return [Finding("dra", INFO, served + "; ResourceSlices not readable",
                        "--gpu-request auto cannot tell whether a GPU DRA driver runs",
                        "allow list on resourceslices.resource.k8s.io")]
    if not f.dra_gpu_slices:
        return [Finding("dra", INFO, served + f"; no {DRA_DRIVER} ResourceSlices", plugin,
                        "install NVIDIA's DRA driver for GPUs to have each worker get exactly "
                        "the planned GPUs")]
    return [Finding("dra", OK, served + f"; {f.dra_gpu_slices} {DRA_DRIVER} ResourceSlices",
                    "--gpu-request auto: each worker pod claims exactly the planned GPUs by "
                    "UUID")]


# API groups of the components that give pods RDMA or secondary networks: the NVIDIA Network
# Operator (NicClusterPolicy, mellanox.com/v1alpha1), the SR-IOV Network Operator
# (sriovnetwork.openshift.io/v1) and Multus' NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1).
NETWORK_GROUPS = (("mellanox.com", "NVIDIA Network Operator"),
                  ("sriovnetwork.openshift.io", "SR-IOV Network Operator"),
                  ("k8s.cni.cncf.io", "Multus NetworkAttachmentDefinitions"))


def _rdma(f: Facts) -> list[Finding]:
    """RDMA device resources per node (mpijob/scheduling/rdma.py) and the operators behind them."""
    installed = [what for group, what in NETWORK_GROUPS if group in f.groups]
    found = "; ".join(installed) + " installed" if installed else ""
    if f.nodes is None:
        return []
    offers = {}
    for node in f.nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        res = rdma.from_allocatable(alloc)
        if res:
            offers[node["metadata"]["name"]] = ", ".join(f"{r.name} {r.allocatable}" for r in res)
    if not offers:
        return [Finding("rdma", INFO, "no node advertises RDMA devices"
                        + (f" ({found})" if found else ""),
                        "jobs across nodes use TCP over the pod network (NCCL sockets, ~0.6 of "
                        "line rate)", "install the NVIDIA Network Operator's RDMA shared device "
                        "plugin or an SR-IOV device plugin to give pods RDMA")]
    listed = "; ".join(f"{n}: {r}" for n, r in sorted(offers.items())[:5])
    more = f" (+{len(offers) - 5} more nodes)" if len(offers) > 5 else ""
    return [Finding("rdma", OK, f"{len(offers)} node(s) advertise RDMA devices: {listed}{more}"
                    + (f"; {found}" if found else ""),
                    "--rdma auto requests them for jobs whose planned nodes all offer them")]


def _networks(f: Facts) -> list[Finding]:
    """Multus NetworkAttachmentDefinitions of the namespace, with the resource each names."""
    if "k8s.cni.cncf.io" not in f.groups:
        return [Finding("networks", INFO, "no NetworkAttachmentDefinitions served (Multus is "
                        "not installed)", "--network is refused; pods get the pod network only")]
    if f.nads is None:
        return [Finding("networks", WARN, f"NetworkAttachmentDefinitions in {f.namespace} "
                        "cannot be listed", "--network cannot be checked before submitting",
                        "ask your cluster admin for list access to network-attachment-definitions")]
    if not f.nads:
        return [Finding("networks", INFO, f"no NetworkAttachmentDefinitions in {f.namespace}",
                        "--network has nothing to name here",
                        "kubectl get network-attachment-definitions -A")]
    listed = ", ".join(
        f"{n['metadata']['name']} ("
        + (((n['metadata'].get('annotations') or {}).get(MULTUS_RESOURCE_ANNOTATION)) or "no resource")
        + ")" for n in sorted(f.nads, key=lambda n: n["metadata"]["name"]))
    return [Finding("networks", OK, f"NetworkAttachmentDefinitions in {f.namespace}: {listed}",
                    "--network NAD attaches one to the worker pods, which request its resource")]


def _nic_dra(f: Facts) -> list[Finding]:
    """NIC DRA drivers (mpijob.scheduling.dra_devices.NIC_DRIVERS): their slices and DeviceClasses."""
    if not f.nic_slices and not f.nic_classes:
        return []
    parts = []
    for driver in sorted(set(f.nic_slices) | set(f.nic_classes.values())):
        devices, nodes = f.nic_slices.get(driver, (0, 0))
        classes = sorted(c for c, d in f.nic_classes.items() if d == driver)
        parts.append(f"{driver}: {devices} NIC(s) on {nodes} node(s)"
                     + (f", DeviceClass {', '.join(classes)}" if classes else ", no DeviceClass"))
    published = any(n for n, _ in f.nic_slices.values())
    return [Finding("nic dra", OK if published else INFO, "NIC DRA drivers: " + "; ".join(parts),
                    "with GPUs through DRA, each GPU's claim takes the NIC under its PCIe root"
                    if published else "no NICs published: no GPU-NIC pairing")]


def assess(facts: Facts) -> list[Finding]:
    findings = _api(facts)
    if facts.version is None:
        return findings
    return [*findings, *_permissions(facts), *_gpu_nodes(facts), *_operator(facts),
            *_trainer(facts), *_gang(facts), *_dra(facts), *_admission(facts), *_rdma(facts),
            *_networks(facts), *_nic_dra(facts)]


def can_submit(findings: list[Finding]) -> bool:
    return not any(f.status == FAIL for f in findings)
