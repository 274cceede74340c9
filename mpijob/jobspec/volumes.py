"""Where a job's data comes from: `--data PVC:MOUNT[:ro]` and `--data-dir HOSTPATH:MOUNT`.

The values as the user writes them, parsed into models the spec holds, and the rule that
decides whether a claim's access modes allow the pods that mount it to sit where the job
is placed. Pure: the claim's access modes come in as arguments (the backend reads them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from mpijob.errors import SpecError

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Mount paths hvdk8s itself uses, or that the container runtime owns: a data volume there
# would hide the hostfile, the SSH key or /dev/shm.
RESERVED_MOUNTS = ("/etc/hvdk8s", "/etc/hvdk8s-ssh", "/dev/shm", "/etc/mpi", "/root/.ssh")
# Access modes (core/v1 PersistentVolumeAccessMode).
RWO, ROX, RWX, RWOP = "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"
SHORT = {RWO: "RWO", ROX: "ROX", RWX: "RWX", RWOP: "RWOP"}


def _mount_path(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"mount path {path!r} is not absolute (e.g. /data)")
    norm = posixpath.normpath(path)
    if norm == "/":
        raise ValueError("cannot mount over / (e.g. /data)")
    for reserved in RESERVED_MOUNTS:
        if norm == reserved or norm.startswith(reserved + "/") or reserved.startswith(norm + "/"):
            raise ValueError(f"mount path {path!r} would hide {reserved}, which hvdk8s uses")
    return norm


def _claim_name(v: str) -> str:
    if len(v) > 253 or not DNS1123_SUBDOMAIN.match(v):
        raise ValueError(f"{v!r} is not a PersistentVolumeClaim name (lower-case letters, "
                         "digits, '-' and '.', e.g. imagenet)")
    return v


def _host_path(v: str) -> str:
    if not v.startswith("/"):
        raise ValueError(f"host path {v!r} is not absolute (e.g. /mnt/imagenet)")
    return posixpath.normpath(v)


# The fields' rules, one type each: DataVolume and HostDir only say which they hold.
ClaimName = Annotated[str, AfterValidator(_claim_name)]
HostPath = Annotated[str, AfterValidator(_host_path)]
# Where a volume goes in the container: absolute, normalised, and clear of RESERVED_MOUNTS.
MountPath = Annotated[str, AfterValidator(_mount_path)]


class DataVolume(BaseModel):
    """A PersistentVolumeClaim mounted in every worker (and the launcher when the user's
    command runs there)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: ClaimName
    mount: MountPath
    read_only: bool = False


class HostDir(BaseModel):
    """A directory of the node mounted into every worker (hostPath)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: HostPath
    mount: MountPath
    read_only: bool = False


def _split(text: str, option: str, example: str) -> tuple[str, str, bool]:
    parts = str(text).split(":")
    if len(parts) == 3 and parts[2] not in ("ro", "rw"):
        raise SpecError(option, f"expected ro or rw after the second ':' in {text!r}")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise SpecError(option, f"expected {example}, got {text!r}")
    return parts[0], parts[1], len(parts) == 3 and parts[2] == "ro"


def parse_data(text: str, option: str = "--data") -> dict:
    """`--data imagenet:/data:ro` -> the fields of a DataVolume."""
    claim, mount, read_only = _split(text, option, "PVC:MOUNT or PVC:MOUNT:ro (e.g. imagenet:/data:ro)")
    return {"claim": claim, "mount": mount, "read_only": read_only}


def parse_data_dir(text: str, option: str = "--data-dir") -> dict:
    """`--data-dir /mnt/imagenet:/data` -> the fields of a HostDir."""
    path, mount, read_only = _split(text, option,
                                    "HOSTPATH:MOUNT or HOSTPATH:MOUNT:ro (e.g. /mnt/imagenet:/data)")
    return {"path": path, "mount": mount, "read_only": read_only}


def check_mounts(mounts: Sequence[str]) -> None:
    """Two volumes on one path: the second would hide the first."""
    seen: set[str] = set()
    for m in mounts:
        if m in seen:
            raise ValueError(f"two volumes are mounted at {m}; give each its own path")
        seen.add(m)


def claim_refusal(volume: DataVolume, access_modes: Sequence[str], pod_nodes: Sequence[str | None],
                  *, pinned: bool) -> str | None:
    """Why this claim cannot be mounted by the job's pods where they go, or None.

    `pod_nodes`: one entry per pod that mounts the claim, its planned node (None: not
    known). `pinned`: the pods are held to those nodes (required node affinity), not just
    steered there. The attach/detach controller attaches a claim whose modes include neither
    ReadWriteMany nor ReadOnlyMany to one node only (reconciler.isMultiAttachAllowed), so a
    second node's pod would wait in ContainerCreating for ever; ReadWriteOncePod allows one
    pod in all (the scheduler's VolumeRestrictions plugin).
    """
    modes = set(access_modes)
    shown = ",".join(SHORT.get(m, m) for m in access_modes) or "no access modes"
    where = f"--data {volume.claim}:{volume.mount}: claim {volume.claim} is {shown}"
    if modes and modes <= {ROX} and not volume.read_only:
        return f"{where}, which mounts read-only only; add :ro ({volume.claim}:{volume.mount}:ro)"
    if modes & {RWX, ROX}:
        return None
    if RWOP in modes and not modes & {RWO}:
        if len(pod_nodes) > 1:
            return (f"{where}: one pod only, but {len(pod_nodes)} pods of the job mount it; "
                    "use a ReadWriteMany or ReadOnlyMany claim")
        return None
    if RWO not in modes:
        return None  # no modes reported (yet): nothing to judge by, as the controller allows
    nodes = sorted({n for n in pod_nodes if n})
    if len(pod_nodes) <= 1:
        return None
    if None in pod_nodes or not nodes:
        return (f"{where}: every pod that mounts it must be on one node, but the job's "
                f"{len(pod_nodes)} pods are not planned onto nodes (no placement); use a "
                "ReadWriteMany or ReadOnlyMany claim")
    if len(nodes) > 1:
        return (f"{where}: every pod that mounts it must be on one node, but the job is placed "
                f"on nodes {', '.join(nodes)}; use a ReadWriteMany or ReadOnlyMany claim, or "
                "fewer workers that fit one node")
    if not pinned:
        return (f"{where}: every pod that mounts it must be on one node; the job is planned on "
                f"{nodes[0]} but the gang scheduler may place its pods on other nodes; use a "
                "ReadWriteMany or ReadOnlyMany claim")
    return None
