"""Where a YAML file went wrong, for the one-line errors of every file hvdk8s reads."""

from __future__ import annotations


def position(exc: Exception) -> str | None:
    """'line L column C' of a yaml.YAMLError (1-based), None where PyYAML gives no mark."""
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else None


def problem(exc: Exception) -> str:
    """What PyYAML says is wrong, on one line."""
    return getattr(exc, "problem", None) or str(exc).splitlines()[0]
