"""URL -> (resource type, namespace, name, subresource) for the Kubernetes REST layout."""

from __future__ import annotations

from dataclasses import dataclass

from . import errors
from .resources import ResourceType


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: str | None  # None: cluster scope or all namespaces
    name: str | None
    subresource: str | None
    watch_path: bool = False  # legacy /watch/ prefix


def parse(registry, group: str, version: str, segs: list[str]) -> Route:
    """segs: path segments after /api/v1 or /apis/{group}/{version}."""
    watch = False
    if segs and segs[0] == "watch":
        watch, segs = True, segs[1:]
    if not segs:
        raise errors.resource_not_found()

    def lookup(plural: str) -> ResourceType:
        rt = registry.get(group, version, plural)
        if rt is None:
            raise errors.resource_not_found()
        return rt

    if segs[0] == "namespaces" and len(segs) >= 3 and group == "" and \
            segs[2] not in ("status", "finalize"):
        ns, rest = segs[1], segs[2:]
    elif segs[0] == "namespaces" and len(segs) >= 3 and group != "":
        ns, rest = segs[1], segs[2:]
    else:
        ns, rest = None, segs
    rt = lookup(rest[0])
    if ns is not None and not rt.namespaced:
        raise errors.resource_not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if len(rest) > 3 or (sub and sub not in rt.subresources):
        raise errors.resource_not_found()
    if rt.namespaced and ns is None and name is not None:
        raise errors.resource_not_found()
    return Route(rt, ns, name, sub, watch)
