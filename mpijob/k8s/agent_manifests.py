"""The topology agent's manifests: ServiceAccount, ClusterRole, ClusterRoleBinding, DaemonSet.

Pure rendering; `hvdk8s install agent` prints or applies them. Choices worth knowing:
- No Namespace object: the agent goes into an existing namespace (kube-system by default).
- RBAC is least privilege: get and patch on nodes, nothing else. RBAC cannot narrow that
  to "the agent's own node", so every agent could patch any node's annotations.
- The pod requests no GPU. NVIDIA_VISIBLE_DEVICES=all with NVIDIA_DRIVER_CAPABILITIES=utility
  makes the NVIDIA container runtime mount the driver's NVML library and device nodes
  without the device plugin allocating GPUs, as dcgm-exporter does.
- The kubelet's pod-resources socket is owned by root and not writable by others, and
  connecting to a unix socket needs write permission, so by default the agent runs as
  UID 0, with every capability dropped, no privilege escalation and a read-only root
  filesystem. `non_root=True` runs it as nobody for clusters that open the socket to a
  group (then pass that group as `supplemental_group`).
"""

from __future__ import annotations

import re

from mpijob.errors import SpecError
from mpijob.jobspec import names

AGENT_NAME = "hvdk8s-agent"
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

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def default_image(version: str) -> str:
    return f"{DEFAULT_IMAGE_REPOSITORY}:{version}"


def labels() -> dict[str, str]:
    return {
        "app.kubernetes.io/name": AGENT_NAME,
        "app.kubernetes.io/component": "topology-agent",
        "app.kubernetes.io/part-of": "hvdk8s",
        names.LABEL_MANAGED_BY: names.MANAGED_BY,
    }


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
    """ServiceAccount, ClusterRole, ClusterRoleBinding and DaemonSet, in apply order."""
    _check(namespace, image, interval, priority_class, runtime_class, supplemental_group)
    return [
        service_account(namespace),
        cluster_role(),
        cluster_role_binding(namespace),
        daemon_set(
            namespace=namespace,
            image=image,
            interval=interval,
            priority_class=priority_class,
            runtime_class=runtime_class,
            non_root=non_root,
            supplemental_group=supplemental_group,
        ),
    ]


def service_account(namespace: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": AGENT_NAME, "namespace": namespace, "labels": labels()},
    }


def cluster_role() -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": AGENT_NAME, "labels": labels()},
        # get: read the annotation back after a restart; patch: write it.
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                  # The start-timeout sweep (docs/cleanup.md): read the hvdk8s pods on its
                  # node, fail their job (suspend it, record why) and delete its workers.
                  {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
                  {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch"]},
                  {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"],
                   "verbs": ["get", "patch"]}],
    }


def cluster_role_binding(namespace: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": AGENT_NAME, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": namespace}],
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
    container = {
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
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod_security: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if non_root:
        pod_security.update(runAsNonRoot=True, runAsUser=NOBODY, runAsGroup=NOBODY)
        if supplemental_group is not None:
            pod_security["supplementalGroups"] = [supplemental_group]
    else:
        pod_security.update(runAsUser=0, runAsGroup=0)
    pod_spec: dict = {
        "serviceAccountName": AGENT_NAME,
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
