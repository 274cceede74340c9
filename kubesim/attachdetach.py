"""The attach/detach controller's one rule the tests need: a volume that is not
multi-attachable is attached to one node at a time.

Modelled on kubernetes pkg/controller/volume/attachdetach/reconciler/reconciler.go:
`isMultiAttachAllowed` allows a second node only when the PersistentVolume's access modes
include ReadWriteMany or ReadOnlyMany (no modes at all: allowed, the attacher decides);
otherwise, while the volume is attached to another node, `reportMultiAttachError` records
a Warning `FailedAttachVolume` event on each pod waiting for it,
`Multi-Attach error for volume "<pv>" Volume is already used by pod(s) <pods>` (pods of the
pod's own namespace by name, others counted), and the pod's containers are never started:
the kubelet's volume manager waits for the attach, so the pod stays Pending with its
containers in ContainerCreating. The volume is the claim's bound PersistentVolume
(`spec.volumeName`; a dynamically provisioned one is named `pvc-<claim uid>`).
"""

from __future__ import annotations

from .util import dig

MULTI = ("ReadWriteMany", "ReadOnlyMany")
PVC_KEY = "/persistentvolumeclaims"


def _claims(pod: dict) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in dig(pod, "spec.volumes") or []
            if v.get("persistentVolumeClaim")]


def _multi_attach_allowed(claim: dict) -> bool:
    modes = dig(claim, "status.accessModes") or dig(claim, "spec.accessModes") or []
    return not modes or any(m in MULTI for m in modes)


def _volume_name(claim: dict) -> str:
    return dig(claim, "spec.volumeName") or f"pvc-{claim['metadata']['uid']}"


def multi_attach_error(store, pod: dict, attached: dict[str, str]) -> str | None:
    """The message that holds this pod's start, or None. `attached`: volume -> the node it
    is attached to (the controller's actual state of the world); the caller records the
    pod's own attachments once it starts."""
    ns, node = pod["metadata"]["namespace"], pod["spec"].get("nodeName")
    for name in _claims(pod):
        claim = store.get(PVC_KEY, ns, name)
        if claim is None or _multi_attach_allowed(claim):
            continue
        volume = _volume_name(claim)
        holder = attached.get(volume)
        if holder is None or holder == node:
            continue
        users = [p for p in store.items("/pods") if p["spec"].get("nodeName") == holder
                 and name in _claims(p) and p["metadata"]["namespace"] == ns
                 and dig(p, "status.phase") not in ("Succeeded", "Failed")]
        local = sorted(p["metadata"]["name"] for p in users)
        if local:
            msg = f"Volume is already used by pod(s) {', '.join(local)}"
        else:
            msg = "Volume is already exclusively attached to one node and can't be attached to another"
        return f'Multi-Attach error for volume "{volume}" {msg}'
    return None


def attach(store, pod: dict, attached: dict[str, str]) -> None:
    """Record the node of each single-attach volume this (starting) pod uses."""
    ns, node = pod["metadata"]["namespace"], pod["spec"].get("nodeName")
    for name in _claims(pod):
        claim = store.get(PVC_KEY, ns, name)
        if claim is not None and not _multi_attach_allowed(claim):
            attached.setdefault(_volume_name(claim), node)


def detach_unused(store, attached: dict[str, str]) -> None:
    """A volume no running pod on its node uses any more is detached."""
    in_use = set()
    for p in store.items("/pods"):
        if dig(p, "status.phase") in ("Succeeded", "Failed") or not p["spec"].get("nodeName"):
            continue
        for name in _claims(p):
            claim = store.get(PVC_KEY, p["metadata"]["namespace"], name)
            if claim is not None:
                in_use.add((_volume_name(claim), p["spec"]["nodeName"]))
    for volume, node in list(attached.items()):
        if (volume, node) not in in_use:
            del attached[volume]
