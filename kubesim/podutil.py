"""Pod helpers shared by admission, the scheduler, the kubelet and the job controller."""

from __future__ import annotations

from decimal import Decimal

from .quantity import parse_quantity

TERMINAL = ("Succeeded", "Failed")
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL


def overcommit_allowed(resource: str) -> bool:
    """Only native compute resources may have requests below limits (GPUs may not)."""
    if resource.startswith("hugepages-"):
        return False
    return "/" not in resource or resource.startswith("kubernetes.io/")


def container_requests(c: dict) -> dict[str, Decimal]:
    res = c.get("resources") or {}
    out = {}
    # Requests default to limits at admission; reading both keeps unadmitted input working.
    for k, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
        try:
            out[k] = parse_quantity(v)
        except ValueError:
            continue
    return out


def pod_requests(pod: dict) -> dict[str, Decimal]:
    """Effective request: sum over containers, but at least the largest init container's."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] = total.get(k, Decimal(0)) + v
    for c in spec.get("initContainers") or []:
        for k, v in container_requests(c).items():
            if v > total.get(k, Decimal(0)):
                total[k] = v
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Decimal(0)) + parse_quantity(v)
    return total


def qos_class(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and parse_quantity(req[r]) != parse_quantity(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def container_names(pod: dict) -> list[str]:
    return [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]


def set_condition(status: dict, ctype: str, value: str, reason: str | None = None,
                  message: str | None = None, now: str | None = None) -> None:
    """Upsert a condition, moving lastTransitionTime only when the status flips."""
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c["status"] = value
            _set_opt(c, "reason", reason)
            _set_opt(c, "message", message)
            return
    c = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
    _set_opt(c, "reason", reason)
    _set_opt(c, "message", message)
    conds.append(c)


def _set_opt(d: dict, k: str, v) -> None:
    if v is None:
        d.pop(k, None)
    else:
        d[k] = v


def get_condition(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None
