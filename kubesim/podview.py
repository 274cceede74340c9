"""A container as its program sees it: its environment, the files the kubelet writes into
its projected volumes, and the cluster's Service names, so code of hvdk8s's pods can run
here on what a pod would hold.

The kubelet's projected volume (kubernetes pkg/volume/projected/projected.go collectData):
- a `serviceAccountToken` source is a token the kubelet requests for the pod's
  ServiceAccount, bound to the pod, of the source's audience (the API server's where it
  names none) and expirationSeconds (3600 by default), at the source's path
  (pkg/kubelet/token/token_manager.go, TokenRequest); here `issue` makes it, None where
  this model has no issuer for that audience (the file is then absent);
- a `configMap` source writes its items (every key where it names none); a ConfigMap that
  is missing fails the mount unless the source is `optional`, which writes nothing
  (collectData; the failed mount holds the pod in ContainerCreating: kubelet.py).

Where it differs: the files go to a folder here, and the container's variables that name a
path under a projected mount name the same path under that folder; a URL of a Service the
model serves (`resolve`) names its address on this machine, as the cluster's DNS and the
Service's port would reach it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .store import Store

# (namespace, pod, audience, expirationSeconds) -> a token, None without an issuer for it
Issuer = Callable[[str, str, str, int], "str | None"]


def projected_files(store: Store, pod: dict, volume: dict, issue: Issuer) -> dict[str, str]:
    """collectData: the files of one projected volume, by path in the volume."""
    m = pod["metadata"]
    out: dict[str, str] = {}
    for source in (volume.get("projected") or {}).get("sources") or []:
        if (sat := source.get("serviceAccountToken")) is not None:
            token = issue(m["namespace"], m["name"], sat.get("audience") or "",
                          int(sat.get("expirationSeconds") or 3600))
            if token is not None:
                out[sat["path"]] = token
        elif (ref := source.get("configMap")) is not None:
            cm = store.get("/configmaps", m["namespace"], ref.get("name", ""))
            data = (cm or {}).get("data") or {}
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] in data:
                    out[item["path"]] = data[item["key"]]
    return out


def container_view(store: Store, pod: dict, container: dict, env: dict[str, str],
                   folder: Path, issue: Issuer,
                   resolve: Callable[[str], str] = lambda url: url) -> dict[str, str]:
    """`env` (the container's variables, and what its entrypoint exported) as the program
    sees it, the container's projected volumes written under `folder`."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    moved: dict[str, str] = {}
    for i, mount in enumerate(container.get("volumeMounts") or []):
        volume = volumes.get(mount["name"]) or {}
        if "projected" not in volume:
            continue
        root = folder / f"{i}-{mount['name']}"
        root.mkdir(parents=True, exist_ok=True)
        for path, text in projected_files(store, pod, volume, issue).items():
            (root / path).write_text(text)
        moved[mount["mountPath"].rstrip("/") + "/"] = str(root) + "/"
    out = {}
    for name, value in env.items():
        for mount, here in moved.items():
            if value.startswith(mount):
                value = here + value[len(mount):]
                break
        out[name] = resolve(value)
    return out
