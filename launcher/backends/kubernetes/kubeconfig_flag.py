"""kubectl's global flags that choose the cluster and the identity: `--kubeconfig FILE` (it
comes before $KUBECONFIG wherever a kubeconfig is read, and errors name it as the user typed
it) and `--as`, `--as-group`, `--as-uid` (they replace the kubeconfig user's `as`,
`as-groups` and `as-uid`, as kubectl's overrides do: k8s.io/client-go/tools/clientcmd
overrides.go).

Apart from the client so that every command's start records them without importing the
client (~20-40 ms at each start).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImpersonationFlags:
    user: str | None = None
    groups: tuple[str, ...] = ()
    uid: str | None = None


_flag: dict[str, str | None] = {"kubeconfig": None}
_as: list[ImpersonationFlags] = [ImpersonationFlags()]


def set_kubeconfig_flag(path: str | None) -> None:
    """Set by the command line (the root resets it at each start: one process may run
    several commands, as the tests do)."""
    _flag["kubeconfig"] = path


def kubeconfig_flag() -> str | None:
    return _flag["kubeconfig"]


def set_impersonation_flags(flags: ImpersonationFlags) -> None:
    """`--as`/`--as-group`/`--as-uid` of this command (reset by the root at each start)."""
    _as[0] = flags


def impersonation_flags() -> ImpersonationFlags:
    return _as[0]
