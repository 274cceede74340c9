"""Before anything is created: does every object the job's pods name exist?

A pod that names a missing ServiceAccount is refused at create by the ServiceAccount
admission plugin with a 403 ("error looking up service account"), which reads like a
permissions problem; a missing PriorityClass is refused by the Priority plugin, a missing
RuntimeClass by RuntimeClass admission; a missing Secret or ConfigMap is not refused at
all: the pod waits in ContainerCreating (volumes) or CreateContainerConfigError (env), its
GPUs held. So each reference is read (kubernetes/plugin/pkg/admission/serviceaccount,
priority, runtimeclass; kubelet's volume manager for the rest), and a missing one refused
naming the option that set it. What RBAC keeps from being read is left to the server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from launcher.backends.kubernetes.client import CONFIGMAP, SECRET, ApiError, Kind
from launcher.errors import UsageError

SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses",
                      namespaced=False)
RUNTIME_CLASS = Kind("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", namespaced=False)


@dataclass(frozen=True)
class Reference:
    kind: Kind
    name: str
    option: str  # the option that sets it, or where in the pod it is


def pod_references(pod_spec: dict) -> Iterator[Reference]:
    """What a pod spec names that must exist before its pod can run (optional ones left out)."""
    if sa := pod_spec.get("serviceAccountName"):
        yield Reference(SERVICE_ACCOUNT, sa, "--service-account")
    if pc := pod_spec.get("priorityClassName"):
        yield Reference(PRIORITY_CLASS, pc, "--priority")
    if rc := pod_spec.get("runtimeClassName"):
        yield Reference(RUNTIME_CLASS, rc, "runtimeClassName (--pod-patch)")
    for s in pod_spec.get("imagePullSecrets") or []:
        if s.get("name"):
            yield Reference(SECRET, s["name"], "--image-pull-secret")
    for v in pod_spec.get("volumes") or []:
        secret, cm = v.get("secret") or {}, v.get("configMap") or {}
        if secret.get("secretName") and not secret.get("optional"):
            yield Reference(SECRET, secret["secretName"], f"volume {v.get('name')}")
        if cm.get("name") and not cm.get("optional"):
            yield Reference(CONFIGMAP, cm["name"], f"volume {v.get('name')}")
    for c in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        for e in c.get("envFrom") or []:
            for key, kind in (("secretRef", SECRET), ("configMapRef", CONFIGMAP)):
                ref = e.get(key) or {}
                if ref.get("name") and not ref.get("optional"):
                    yield Reference(kind, ref["name"], f"container {c.get('name')} envFrom")
        for e in c.get("env") or []:
            source = e.get("valueFrom") or {}
            for key, kind in (("secretKeyRef", SECRET), ("configMapKeyRef", CONFIGMAP)):
                ref = source.get(key) or {}
                if ref.get("name") and not ref.get("optional"):
                    yield Reference(kind, ref["name"],
                                    f"container {c.get('name')} env {e.get('name')}")


def check_references(client, spec, pods: Sequence[dict], made: Sequence[dict]) -> None:
    """Refuse (exit 2, nothing created) a job whose pods name an object that is missing.
    `made`: the job's own objects (its ConfigMap and Secret), which exist once created."""
    own = {(o.get("kind"), o["metadata"]["name"]) for o in made}
    seen: set[tuple[str, str]] = set()
    for pod in pods:
        for ref in pod_references(pod.get("spec") or {}):
            key = (ref.kind.kind, ref.name)
            if key in own or key in seen:
                continue
            seen.add(key)
            if "/" in ref.kind.api_version and not client.serves(ref.kind):
                continue  # the API is not served: the server says what it makes of it
            try:
                found = client.get(ref.kind, ref.name,
                                   spec.namespace if ref.kind.namespaced else None)
            except ApiError as exc:
                if exc.status in (403, 404):  # not readable (RBAC) or not served
                    continue
                raise
            if found is None:
                where = f" in namespace {spec.namespace}" if ref.kind.namespaced else ""
                listing = (f"kubectl get {ref.kind.plural}"
                           + (f" -n {spec.namespace}" if ref.kind.namespaced else ""))
                raise UsageError(
                    f"{ref.option} {ref.name}: no {ref.kind.kind} {ref.name}{where} "
                    f"({listing}); pod {pod['metadata'].get('name')} names it (nothing was "
                    "created)")
