"""What each pod template of a set of objects may do on its node and in the API: the
ServiceAccount token it mounts, privilege, host paths, host namespaces, added capabilities.
Pure; the tests run it over every mode and install command, docs/pod-security.md carries
its table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class PodRights:
    where: str  # "Kind/name: path to the pod spec"
    token: bool  # a token for the API server is mounted (automount, or projected for it)
    service_account: str
    privileged: bool
    host_paths: tuple[str, ...]
    host_namespaces: tuple[str, ...]  # hostNetwork, hostPID, hostIPC set
    capabilities: tuple[str, ...]  # added to any container
    runs_as_root: bool  # no runAsNonRoot/runAsUser != 0 at pod or every container
    # projected ServiceAccount tokens for another audience than the API server's
    other_audiences: tuple[str, ...] = ()

    def row(self, label: str) -> str:
        def listed(values) -> str:
            return ", ".join(f"`{v}`" for v in values) or "none"
        token = f"yes (`{self.service_account}`)" if self.token else "no"
        if self.other_audiences:
            token += f"; for {listed(self.other_audiences)} only"
        return (f"| {label} | {token} "
                f"| {'yes' if self.privileged else 'no'} | {listed(self.host_paths)} "
                f"| {listed(self.host_namespaces)} | {listed(self.capabilities)} |")


TABLE_HEAD = ("| pod template | ServiceAccount token | privileged | host paths "
              "| host namespaces | capabilities added |\n| --- | --- | --- | --- | --- | --- |")


def pod_specs(obj, path: str = "") -> Iterator[tuple[str, dict]]:
    """(path, pod spec) for every pod spec in `obj`, at any depth (a Pod, a Job's template,
    an MPIJob's replicas, a JobSet's or a runtime's replicated jobs, a DaemonSet's)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield path or ".", obj
            return
        for key, value in obj.items():
            yield from pod_specs(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            name = value.get("name") if isinstance(value, dict) else None
            yield from pod_specs(value, f"{path}[{name if name else i}]")


# What the API server takes a token for: none named (the kubelet asks for the API server's
# own), or its default --api-audiences, the --service-account-issuer kubeadm sets. A
# cluster may set another issuer URL; an audience hvdk8s names is not a URL.
API_AUDIENCES = ("", "https://kubernetes.default.svc.cluster.local",
                 "https://kubernetes.default.svc")


def projected_audiences(spec: dict) -> list[str]:
    """The audience of each projected ServiceAccount token ("" where none is named: the
    kubelet's TokenRequest then takes the API server's own, pkg/volume/projected)."""
    return [(s["serviceAccountToken"].get("audience") or "")
            for v in spec.get("volumes") or []
            for s in (v.get("projected") or {}).get("sources") or []
            if "serviceAccountToken" in s]


def rights(where: str, spec: dict) -> PodRights:
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    contexts = [c.get("securityContext") or {} for c in containers]
    pod_ctx = spec.get("securityContext") or {}
    added = sorted({cap for ctx in contexts
                    for cap in (ctx.get("capabilities") or {}).get("add") or []})
    non_root = pod_ctx.get("runAsNonRoot") or (pod_ctx.get("runAsUser") or 0) != 0
    return PodRights(
        where=where,
        token=(spec.get("automountServiceAccountToken") is not False
               or bool(set(API_AUDIENCES) & set(projected_audiences(spec)))),
        service_account=spec.get("serviceAccountName") or "default",
        privileged=any(ctx.get("privileged") for ctx in contexts),
        host_paths=tuple(v["hostPath"]["path"] for v in spec.get("volumes") or []
                         if "hostPath" in v),
        host_namespaces=tuple(k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)),
        capabilities=tuple(added),
        runs_as_root=not non_root,
        other_audiences=tuple(a for a in projected_audiences(spec) if a not in API_AUDIENCES),
    )


def audit(objects: list[dict]) -> list[PodRights]:
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        for path, spec in pod_specs(obj.get("spec") or {}, ".spec"):
            out.append(rights(f"{obj.get('kind')}/{meta.get('name')}: {path}", spec))
    return out
