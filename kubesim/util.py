"""Small helpers shared by the fake apiserver modules (time formats, names)."""

from __future__ import annotations

import copy
import functools
import random
import uuid
from datetime import datetime, timezone

# The alphabet Kubernetes uses for generateName suffixes (no vowels, no 0/1/3).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_rng = random.SystemRandom()


def now_rfc3339() -> str:
    """Second-precision UTC timestamp, the format of metav1.Time."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """Microsecond-precision UTC timestamp, the format of metav1.MicroTime."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_nano() -> str:
    """RFC3339Nano-looking timestamp as kubelet prefixes log lines with."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def new_uid() -> str:
    return str(uuid.uuid4())


def random_suffix(n: int = 5) -> str:
    return "".join(_rng.choice(_NAME_ALPHABET) for _ in range(n))


def deepcopy(obj):
    # json-shaped data only; copy.deepcopy is fine and keeps this explicit.
    return copy.deepcopy(obj)


@functools.lru_cache(maxsize=1024)
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def dig(obj, path: str, default=None):
    """Follow a dotted path through nested dicts. Each path is split once: field selectors
    dig the same few paths for every object of a 150,000-pod list."""
    cur = obj
    for part in _parts(path):
        if not isinstance(cur, dict):
            return default
        cur = cur.get(part)
        if cur is None:
            return default
    return cur


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def set_condition(status: dict, ctype: str, value: str, reason: str, message: str) -> None:
    """meta.SetStatusCondition (apimachinery): the transition time moves only when the
    status does."""
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c["type"] == ctype:
            if c["status"] != value:
                c["lastTransitionTime"] = now_rfc3339()
            c.update(status=value, reason=reason, message=message)
            return
    conds.append({"type": ctype, "status": value, "reason": reason, "message": message,
                  "lastTransitionTime": now_rfc3339()})
