"""Where a YAML file went wrong, for the one-line errors of every file hvdk8s reads."""

from __future__ import annotations

from typing import Any

from launcher.errors import UsageError


def load(text: str, what: str, loader: Any = None) -> Any:
    """The YAML document in `text` (a safe loader unless given one); bad YAML is a UsageError
    '<what>: not valid YAML at line L column C: <problem>'."""
    # lazy: a JSON cluster file needs no PyYAML (~8 ms)
    import yaml

    try:
        return yaml.load(text, Loader=loader or yaml.SafeLoader)  # noqa: S506 - safe loaders
    except yaml.YAMLError as exc:
        where = f" at {at}" if (at := position(exc)) else ""
        raise UsageError(f"{what}: not valid YAML{where}: {problem(exc)}") from None


def position(exc: Exception) -> str | None:
    """'line L column C' of a yaml.YAMLError (1-based), None where PyYAML gives no mark."""
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else None


def problem(exc: Exception) -> str:
    """What PyYAML says is wrong, on one line."""
    return getattr(exc, "problem", None) or str(exc).splitlines()[0]
