"""The topology agent's manifests: two identities, each with only what it does.

Pure rendering; `hvdk8s install agent` prints or applies them. Choices worth knowing:
- No Namespace object: the agent goes into an existing namespace (kube-system by default).
- The per-node DaemonSet (`hvdk8s-agent`), whose token sits on every GPU node where tenants
  run code, may only get and patch Nodes; RBAC cannot narrow that to "its own", so a
  ValidatingAdmissionPolicy does: a request by that ServiceAccount may change only the Node
  named in its token's node claim (`authentication.kubernetes.io/node-name`, which
  kube-apiserver puts in the user info of a pod's projected token since 1.30), and nothing
  of it but annotations. So a stolen agent token can rewrite one node's annotations.
- The start-timeout sweep (docs/cleanup.md), which needs to list pods, fail Jobs, MPIJobs
  and TrainJobs and delete workers cluster-wide, runs in one small Deployment of its own
  (`hvdk8s-start-guard`, one replica, no host path, as nobody), as the MPI Operator's broad
  role belongs to one controller, not to every node (Node Feature Discovery splits its
  per-node workers from one master the same way).
- The DaemonSet's pod requests no GPU. NVIDIA_VISIBLE_DEVICES=all with
  NVIDIA_DRIVER_CAPABILITIES=utility makes the NVIDIA container runtime mount the driver's
  NVML library and device nodes without the device plugin allocating GPUs, as
  dcgm-exporter does.
- The kubelet's pod-resources socket is owned by root and not writable by others, and
  connecting to a unix socket needs write permission, so by default the agent runs as
  UID 0, with every capability dropped, no privilege escalation and a read-only root
  filesystem. `non_root=True` runs it as nobody for clusters that open the socket to a
  group (then pass that group as `supplemental_group`).
- `permission_table` renders what each identity may do, from these manifests (docs/agent.md
  carries it; a test compares).
"""

from __future__ import annotations

import re

from mpijob.errors import SpecError
from mpijob.jobspec import names

AGENT_NAME = "hvdk8s-agent"
GUARD_NAME = "hvdk8s-start-guard"
OWN_NODE_POLICY = f"{AGENT_NAME}-own-node"
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"
RBAC_API = "rbac.authorization.k8s.io/v1"
ADMISSION_API = "admissionregistration.k8s.io/v1"
DEFAULT_NAMESPACE = "kube-system"
DEFAULT_IMAGE_REPOSITORY = "ghcr.io/hvdk8s/hvdk8s-agent"
DEFAULT_INTERVAL_SECONDS = 60
DEFAULT_PRIORITY_CLASS = "system-node-critical"
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
KUBELET_SOCKET = f"{POD_RESOURCES_DIR}/kubelet.sock"
# Set by GPU Feature Discovery / the GPU operator on nodes with NVIDIA GPUs.
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
NOBODY = 65534
# Python, grpcio and the kubernetes client: about 70 MiB resident after start.
RESOURCES = {
    "requests": {"cpu": "10m", "memory": "96Mi"},
    "limits": {"cpu": "200m", "memory": "256Mi"},
}
# The agent: read its Node's annotation back after a restart; patch: write it.
AGENT_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
# The start guard's sweep (launcher/backends/kubernetes/start_guard.py): list the hvdk8s
# pods, read the kubelet's pull errors, find each job's root and fail it (suspend, record
# why), delete a built-in job's workers; and what `hvdk8s tidy` does (cleanup.py): hand a
# started job's workers (pods, or an elastic job's worker Job) to its launcher Job (patch;
# blockOwnerDeletion needs update on jobs/finalizers where OwnerReferencesPermissionEnforcement
# is on), record a finished job's rate on its root, remove its idle pods and worker Job.
GUARD_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs/finalizers"], "verbs": ["update"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["get", "patch"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"],
     "verbs": ["get", "patch"]},
]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def default_image(version: str) -> str:
    return f"{DEFAULT_IMAGE_REPOSITORY}:{version}"


def agent_manifests(
    *,
    image: str,
    namespace: str = DEFAULT_NAMESPACE,
    interval: int = DEFAULT_INTERVAL_SECONDS,
    priority_class: str | None = DEFAULT_PRIORITY_CLASS,
    runtime_class: str | None = None,
    non_root: bool = False,
    supplemental_group: int | None = None,
) -> list[dict]:
    """The agent's identity, its own-node policy and DaemonSet, then the start guard's
    identity and Deployment, in apply order."""
    _check(namespace, image, interval, priority_class, runtime_class, supplemental_group)
    return [
        service_account(namespace),
        cluster_role(),
        cluster_role_binding(namespace),
        own_node_policy(namespace),
        own_node_policy_binding(),
        daemon_set(
            namespace=namespace,
            image=image,
            interval=interval,
            priority_class=priority_class,
            runtime_class=runtime_class,
            non_root=non_root,
            supplemental_group=supplemental_group,
        ),
        service_account(namespace, GUARD_NAME),
        cluster_role(GUARD_NAME),
        cluster_role_binding(namespace, GUARD_NAME),
        guard_deployment(namespace=namespace, image=image, interval=interval),
    ]


def labels(component: str = "topology-agent") -> dict[str, str]:
    return {
        "app.kubernetes.io/name": AGENT_NAME if component == "topology-agent" else GUARD_NAME,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "hvdk8s",
        names.LABEL_MANAGED_BY: names.MANAGED_BY,
    }


def _component(name: str) -> str:
    return "topology-agent" if name == AGENT_NAME else "start-guard"


def service_account(namespace: str, name: str = AGENT_NAME) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(_component(name))},
        # only the pods that talk to the API mount a token, each asking for it itself
        "automountServiceAccountToken": False,
    }


def cluster_role(name: str = AGENT_NAME) -> dict:
    rules = AGENT_RULES if name == AGENT_NAME else GUARD_RULES
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels(_component(name))},
        "rules": [dict(r) for r in rules],
    }


def cluster_role_binding(namespace: str, name: str = AGENT_NAME) -> dict:
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": labels(_component(name))},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def agent_user(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:{AGENT_NAME}"


def own_node_policy(namespace: str) -> dict:
    """The agent's requests may update only the Node its token was issued on, and of it only
    the annotations (RBAC's `patch` on nodes is every node, every field)."""
    claim = f"request.userInfo.extra[{NODE_NAME_CLAIM!r}]"
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": OWN_NODE_POLICY, "labels": labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["*"], "operations": ["UPDATE"],
                "resources": ["nodes", "nodes/*"]}]},
            "matchConditions": [{"name": "the-topology-agent", "expression":
                                 f"request.userInfo.username == {agent_user(namespace)!r}"}],
            "validations": [
                {"expression": "has(request.userInfo.extra) && "
                               f"{NODE_NAME_CLAIM!r} in request.userInfo.extra && "
                               f"object.metadata.name == {claim}[0]",
                 "message": "the hvdk8s agent may change only the Node it runs on"},
                # the request's JSON omits an empty subResource: reading it would be an
                # error (so a denial) on every patch of the Node itself
                {"expression": "!has(request.subResource) && object.spec == oldObject.spec && "
                               "(has(object.metadata.labels) ? object.metadata.labels : {}) == "
                               "(has(oldObject.metadata.labels) ? oldObject.metadata.labels "
                               ": {})",
                 "message": "the hvdk8s agent may change only its Node's annotations"},
            ],
        },
    }


def own_node_policy_binding() -> dict:
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": OWN_NODE_POLICY, "labels": labels()},
        "spec": {"policyName": OWN_NODE_POLICY, "validationActions": ["Deny"]},
    }


def _hardened(container: dict) -> dict:
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    return container


def guard_deployment(*, namespace: str, image: str,
                     interval: int = DEFAULT_INTERVAL_SECONDS) -> dict:
    """One replica sweeping every node's hvdk8s pods; kept off GPU nodes where it can be
    (tenants' code runs there), with no host path and as nobody."""
    selector = {"app.kubernetes.io/name": GUARD_NAME}
    container = _hardened({
        "name": "start-guard",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["hvdk8s", "agent"],
        "args": ["--sweep-only", "--interval", str(interval)],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": RESOURCES,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    })
    away_from_gpus = {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": key, "operator": "NotIn", "values": [value]}
            for key, value in GPU_NODE_SELECTOR.items()]}}]}
    pod_spec: dict = {
        "serviceAccountName": GUARD_NAME,
        "automountServiceAccountToken": True,  # it talks to the API server
        "affinity": {"nodeAffinity": away_from_gpus},
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": GUARD_NAME, "namespace": namespace,
                     "labels": labels("start-guard")},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "Recreate"},  # never two sweeping at once
            "template": {"metadata": {"labels": labels("start-guard")}, "spec": pod_spec},
        },
    }


def daemon_set(
    *,
    namespace: str,
    image: str,
    interval: int = DEFAULT_INTERVAL_SECONDS,
    priority_class: str | None = DEFAULT_PRIORITY_CLASS,
    runtime_class: str | None = None,
    non_root: bool = False,
    supplemental_group: int | None = None,
) -> dict:
    selector = {"app.kubernetes.io/name": AGENT_NAME}
    container = _hardened({
        "name": "agent",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["hvdk8s", "agent"],
        "args": ["--interval", str(interval), "--kubelet-socket", KUBELET_SOCKET],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "resources": RESOURCES,
        "volumeMounts": [
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    })
    pod_security: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if non_root:
        pod_security.update(runAsNonRoot=True, runAsUser=NOBODY, runAsGroup=NOBODY)
        if supplemental_group is not None:
            pod_security["supplementalGroups"] = [supplemental_group]
    else:
        pod_security.update(runAsUser=0, runAsGroup=0)
    pod_spec: dict = {
        "serviceAccountName": AGENT_NAME,
        "automountServiceAccountToken": True,  # it patches its Node
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "securityContext": pod_security,
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
        "volumes": [
            {"name": "pod-resources", "hostPath": {"path": POD_RESOURCES_DIR, "type": "Directory"}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        ],
    }
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": AGENT_NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels()}, "spec": pod_spec},
        },
    }


def _check(namespace, image, interval, priority_class, runtime_class, supplemental_group) -> None:
    if not (_DNS1123_LABEL.match(namespace) and len(namespace) <= 63):
        raise SpecError("namespace", f"{namespace!r} is not a valid namespace name (DNS-1123 label)")
    if not image or any(c.isspace() for c in image):
        raise SpecError("image", f"{image!r} is not an image reference")
    if not isinstance(interval, int) or interval < 1:
        raise SpecError("interval", f"must be a whole number of seconds >= 1, not {interval!r}")
    for field, value in (("priority_class", priority_class), ("runtime_class", runtime_class)):
        if value and not (_DNS1123_SUBDOMAIN.match(value) and len(value) <= 253):
            raise SpecError(field, f"{value!r} is not a valid object name (DNS-1123 subdomain)")
    if supplemental_group is not None and not 0 <= supplemental_group <= 2**31 - 1:
        raise SpecError("supplemental_group", f"must be a group id >= 0, not {supplemental_group}")


def permission_table(manifests: list[dict]) -> str:
    """What each ServiceAccount of `manifests` may do, as a Markdown table: every rule of
    every ClusterRole bound to it, and the admission policies that narrow its writes."""
    roles = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ClusterRole"}
    policies = [m for m in manifests if m["kind"] == "ValidatingAdmissionPolicy"]
    rows = ["| identity (ServiceAccount) | API group | resources | verbs | writes limited by |",
            "| --- | --- | --- | --- | --- |"]
    for binding in (m for m in manifests if m["kind"] == "ClusterRoleBinding"):
        role = roles[binding["roleRef"]["name"]]
        for subject in binding["subjects"]:
            user = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
            narrowed = [p["metadata"]["name"] for p in policies
                        if user in p["spec"]["matchConditions"][0]["expression"]]
            for rule in role["rules"]:
                group = ", ".join(f"`{g}`" if g else "core" for g in rule["apiGroups"])
                resources = ", ".join(f"`{r}`" for r in rule["resources"])
                if rule.get("resourceNames"):
                    resources += f" named {', '.join(rule['resourceNames'])}"
                verbs = ", ".join(rule["verbs"])
                writes = set(rule["verbs"]) - {"get", "list", "watch"}
                by = ", ".join(f"ValidatingAdmissionPolicy `{n}`" for n in narrowed) \
                    if writes and narrowed else "nothing: any object" if writes else "(reads)"
                rows.append(f"| `{subject['name']}` | {group} | {resources} | {verbs} | {by} |")
    return "\n".join(rows) + "\n"
