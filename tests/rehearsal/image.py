"""A built image as the rehearsal's pods run it: its root filesystem (`buildah mount`), its
configuration (Env, User, WorkingDir, Entrypoint, Cmd), and the user, groups and capabilities
a container of it gets under a pod's securityContext, as the kubelet and the runtime decide.

Sources of the model:
- the effective securityContext: the container's fields over the pod's (kubernetes
  pkg/securitycontext/util.go DetermineEffectiveSecurityContext); runAsNonRoot with uid 0
  is a CreateContainerConfigError (pkg/kubelet/kuberuntime/security_context_others.go
  verifyRunAsNonRoot);
- the user: runAsUser else the image's USER, a name looked up in the image's /etc/passwd;
  the group: runAsGroup, else the user's primary group from that passwd line; supplementary
  groups: the user's in the image's /etc/group, plus the pod's supplementalGroups and
  fsGroup (containerd pkg/cri/server/container_create_linux.go, WithAdditionalGIDs);
  HOME from the passwd line when the environment has none (runc libcontainer/init_linux.go
  setupUser);
- capabilities: the runtime's default set plus `add`, minus `drop` (`ALL` drops every one)
  (containerd pkg/cri/opts/spec_linux.go WithCapabilities; the default set is
  containerd's pkg/cap defaults, the same 14 as moby's oci/caps/defaults.go);
- allowPrivilegeEscalation false sets no_new_privs (runc's NoNewPrivileges).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")


class CreateContainerConfigError(Exception):
    """What the kubelet reports, and the container never starts."""


@dataclass
class Image:
    ref: str
    root: Path  # the image's root filesystem, read-only to pods (each gets an overlay)
    env: dict[str, str]
    user: str
    working_dir: str
    entrypoint: list[str]
    cmd: list[str]

    def passwd(self) -> list[list[str]]:
        return [line.split(":") for line in (self.root / "etc/passwd").read_text().splitlines()
                if line.count(":") >= 6]

    def groups(self) -> list[list[str]]:
        return [line.split(":") for line in (self.root / "etc/group").read_text().splitlines()
                if line.count(":") >= 3]


def _buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


class MountedImage:
    """`buildah from` + `buildah mount`: the image's root for as long as it is open."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.container = _buildah("from", "--pull=false", "--quiet", ref)
        try:
            root = Path(_buildah("mount", self.container))
            config = json.loads(_buildah("inspect", "--type", "image", ref))["OCIv1"]["config"]
        except Exception:
            self.close()
            raise
        env = dict(item.split("=", 1) for item in config.get("Env") or [])
        self.image = Image(ref=ref, root=root, env=env, user=config.get("User") or "root",
                           working_dir=config.get("WorkingDir") or "/",
                           entrypoint=config.get("Entrypoint") or [],
                           cmd=config.get("Cmd") or [])

    def close(self) -> None:
        subprocess.run(["buildah", "umount", self.container], capture_output=True)
        subprocess.run(["buildah", "rm", self.container], capture_output=True)


def effective_security_context(pod: dict, container: dict) -> dict:
    return {**(pod["spec"].get("securityContext") or {}),
            **(container.get("securityContext") or {})}


def process_identity(image: Image, pod: dict, container: dict, env: dict) -> dict:
    """uid, gid, groups, HOME, capabilities and no_new_privs of the container's process."""
    sc = effective_security_context(pod, container)
    user, _, group = image.user.partition(":")
    by_name = {e[0]: e for e in image.passwd()}
    by_uid = {e[2]: e for e in image.passwd()}
    if "runAsUser" in sc:
        uid = int(sc["runAsUser"])
        entry = by_uid.get(str(uid))
    elif user.isdigit():
        uid, entry = int(user), by_uid.get(user)
    else:
        entry = by_name.get(user)
        if entry is None:
            raise CreateContainerConfigError(f"unable to find user {user}: no matching entries "
                                             "in passwd file")
        uid = int(entry[2])
    if sc.get("runAsNonRoot") and uid == 0:
        raise CreateContainerConfigError("container has runAsNonRoot and image will run as "
                                         "root")
    if "runAsGroup" in sc:
        gid = int(sc["runAsGroup"])
    elif group:
        gid = int(group) if group.isdigit() else int(
            next(g[2] for g in image.groups() if g[0] == group))
    else:
        gid = int(entry[3]) if entry else 0
    name = entry[0] if entry else None
    groups = {int(g[2]) for g in image.groups() if name and name in g[3].split(",")}
    groups |= {int(g) for g in (pod["spec"].get("securityContext") or {}).get(
        "supplementalGroups") or []}
    fs_group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
    if fs_group is not None:
        groups.add(int(fs_group))
    caps = set(DEFAULT_CAPABILITIES)
    wanted = sc.get("capabilities") or {}
    caps |= {c if c.startswith("CAP_") else f"CAP_{c}" for c in wanted.get("add") or []}
    drop = {c if c.startswith("CAP_") else f"CAP_{c}" for c in wanted.get("drop") or []}
    caps = set() if "CAP_ALL" in drop else caps - drop
    home = env.get("HOME") or (entry[5] if entry else "/")
    return {"uid": uid, "gid": gid, "groups": sorted(groups | {gid}), "home": home,
            "capabilities": sorted(caps),
            "no_new_privs": sc.get("allowPrivilegeEscalation") is False}
