"""Values of repeatable command-line options: `--selector k=v`, `-e K=V`, `--toleration`.

Pure parsers shared by `plan` and `submit`; a bad value raises `SpecError(option, ...)`
so the CLI can name the option and say what it expects.
"""

from __future__ import annotations

from mpijob.errors import SpecError
from mpijob.jobspec.spec import TAINT_EFFECTS as EFFECTS
from mpijob.jobspec.spec import Toleration


def parse_key_value(text: str, option: str) -> tuple[str, str]:
    """'k=v' -> ('k', 'v'). The value may be empty or contain '='; the key may not be empty."""
    key, sep, value = str(text).partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(option, f"expected KEY=VALUE, got {text!r}")
    return key, value


def parse_toleration(text: str) -> Toleration:
    """A toleration as arena writes it.

    `key=value:Effect` (Equal), `key=value` (Equal, any effect), `key:Effect` (Exists),
    `key` (Exists, any effect), `all` or `*` (tolerate every taint)."""
    raw = str(text).strip()
    if raw in ("all", "*"):
        return Toleration(operator="Exists")
    if not raw:
        raise SpecError("--toleration", "expected key=value:Effect, key:Effect, key or all, got ''")
    body, colon, effect = raw.rpartition(":") if ":" in raw else (raw, "", "")
    if colon:
        if effect not in EFFECTS:
            raise SpecError(
                "--toleration",
                f"unknown effect {effect!r} in {text!r}; expected one of {', '.join(EFFECTS)}",
            )
    else:
        effect = ""
    key, eq, value = body.partition("=")
    key = key.strip()
    if not key:
        raise SpecError("--toleration", f"missing the taint key in {text!r} (e.g. nvidia.com/gpu:NoSchedule)")
    if eq:
        return Toleration(key=key, operator="Equal", value=value, effect=effect or None)
    return Toleration(key=key, operator="Exists", effect=effect or None)


def format_toleration(t: Toleration) -> str:
    """The inverse of `parse_toleration`, for messages."""
    if t.key is None and t.operator == "Exists":
        return "all" if t.effect is None else f"all:{t.effect}"
    text = t.key or ""
    if t.operator == "Equal":
        text += f"={t.value or ''}"
    return f"{text}:{t.effect}" if t.effect else text
