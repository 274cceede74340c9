"""Tolerations as `--toleration` takes them (arena's forms) and as pods carry them."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from mpijob.errors import SpecError

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TAINT_EFFECTS = get_args(TaintEffect)
# The effects that keep a pod off a node (PreferNoSchedule only discourages it).
HARD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


class Toleration(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: TaintEffect | None = None

    def to_k8s(self) -> dict:
        out: dict = {"operator": self.operator}
        if self.key is not None:
            out["key"] = self.key
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        return out


def parse_toleration(text: str, option: str = "--toleration") -> Toleration:
    """A toleration as arena writes it.

    `key=value:Effect` (Equal), `key=value` (Equal, any effect), `key:Effect` (Exists),
    `key` (Exists, any effect), `all` or `*` (tolerate every taint)."""
    raw = str(text).strip()
    if raw in ("all", "*"):
        return Toleration(operator="Exists")
    if not raw:
        raise SpecError(option, "expected key=value:Effect, key:Effect, key or all, got ''")
    body, colon, effect = raw.rpartition(":") if ":" in raw else (raw, "", "")
    if colon:
        if effect not in TAINT_EFFECTS:
            raise SpecError(
                option,
                f"unknown effect {effect!r} in {text!r}; expected one of {', '.join(TAINT_EFFECTS)}",
            )
    else:
        effect = ""
    key, eq, value = body.partition("=")
    key = key.strip()
    if not key:
        raise SpecError(option, f"missing the taint key in {text!r} (e.g. nvidia.com/gpu:NoSchedule)")
    if eq:
        return Toleration(key=key, operator="Equal", value=value, effect=effect or None)
    return Toleration(key=key, operator="Exists", effect=effect or None)
