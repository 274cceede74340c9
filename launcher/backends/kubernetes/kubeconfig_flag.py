"""`--kubeconfig FILE` (kubectl's global flag, taken by every command): it comes before
$KUBECONFIG wherever a kubeconfig is read, and errors name it as the user typed it.

Apart from the client so that every command's start records it without importing the
client (~20-40 ms at each start).
"""

from __future__ import annotations

_flag: dict[str, str | None] = {"kubeconfig": None}


def set_kubeconfig_flag(path: str | None) -> None:
    """Set by the command line (the root resets it at each start: one process may run
    several commands, as the tests do)."""
    _flag["kubeconfig"] = path


def kubeconfig_flag() -> str | None:
    return _flag["kubeconfig"]
