"""kubectl's global flags (`--kubeconfig`, `--context`, `-n`, `--as`, `--as-group`,
`--as-uid`), taken before the subcommand and after it alike, as kubectl takes them anywhere.

Given before the subcommand, the root passes them down as the defaults of the subcommand's
own options (click's default_map), so a flag after the subcommand still wins. A command that
lacks one gets it here: `--kubeconfig` and the `--as` flags everywhere (they only record
the file and the identity: launcher.backends.kubernetes.kubeconfig_flag), and hidden
`--context`/`-n` on the commands that read no cluster, where they change nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Annotated

import typer

from launcher.cli import options as opt

PANEL = opt.PANEL_CLUSTER


def _record(**given) -> None:
    # lazy, as --kubeconfig's: the flags module is small and imports nothing
    from launcher.backends.kubernetes.kubeconfig_flag import (
        impersonation_flags,
        set_impersonation_flags,
    )

    set_impersonation_flags(dataclasses.replace(impersonation_flags(), **given))


def _as_given(value: str | None) -> str | None:
    if value is not None:
        _record(user=value)
    return value


def _as_groups_given(value: list[str] | None) -> list[str] | None:
    if value:
        _record(groups=tuple(value))
    return value


def _as_uid_given(value: str | None) -> str | None:
    if value is not None:
        _record(uid=value)
    return value


AsUser = Annotated[str | None, typer.Option(
    "--as", callback=_as_given, rich_help_panel=PANEL,
    help="Username to impersonate for the operation (replaces the kubeconfig user's `as`); "
    "a user or a service account (system:serviceaccount:NS:NAME).")]
AsGroups = Annotated[list[str] | None, typer.Option(
    "--as-group", callback=_as_groups_given, rich_help_panel=PANEL,
    help="Group to impersonate (repeat for several; needs --as or the kubeconfig's `as`).")]
AsUid = Annotated[str | None, typer.Option(
    "--as-uid", callback=_as_uid_given, rich_help_panel=PANEL,
    help="UID to impersonate (needs --as or the kubeconfig's `as`).")]


def reset_impersonation() -> None:
    """At each command's start (one process may run several, as the tests do)."""
    from launcher.backends.kubernetes.kubeconfig_flag import (
        ImpersonationFlags,
        set_impersonation_flags,
    )

    set_impersonation_flags(ImpersonationFlags())


def commands_of(command, path=()):
    """Every command under `command`, with its path of names."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from commands_of(sub, (*path, name))


_commands = commands_of


def _donated_options() -> dict[str, object]:
    """The options as typer builds them (a one-command app declares them), by name."""
    donor = typer.Typer()

    @donor.command()
    def _flags(as_user: AsUser = None, as_groups: AsGroups = None, as_uid: AsUid = None,
               kubeconfig: opt.Kubeconfig = None,
               context: Annotated[str | None, typer.Option("--context", hidden=True)] = None,
               namespace: Annotated[str | None, typer.Option("-n", "--namespace",
                                                             hidden=True)] = None):
        pass  # pragma: no cover - never run: only its options are taken

    return {p.name: p for p in typer.main.get_command(donor).params}


def _added(option, *, hidden: bool):
    option = copy.copy(option)
    option.expose_value, option.hidden = False, hidden
    return option


def add_everywhere(root) -> None:
    from launcher.cli import plainvalues

    plainvalues.install()  # option values without pydantic, where none is needed
    donated = _donated_options()
    for path, command in _commands(root):
        if not path or getattr(command, "commands", None):
            continue  # the root declares its own; a group passes its arguments on
        names = {p.name for p in command.params}
        reads_a_cluster = "context" in names
        for name in ("kubeconfig", "as_user", "as_groups", "as_uid"):
            if name not in names:
                command.params.append(_added(donated[name], hidden=not reads_a_cluster))
        for name in ("context", "namespace"):
            if name not in names:
                command.params.append(_added(donated[name], hidden=True))


def pass_down(ctx: typer.Context, **values: str | None) -> None:
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return

    def defaults_of(command) -> dict:
        subs = getattr(command, "commands", None)
        if subs:
            return {name: defaults_of(sub) for name, sub in subs.items()}
        return dict(given)

    ctx.default_map = {**(ctx.default_map or {}), **defaults_of(ctx.command)}


def pass_down_impersonation(user: str | None, groups: list[str] | None,
                            uid: str | None) -> None:
    """The root's --as flags, recorded again after the reset (their callbacks ran while the
    root's options were parsed); the subcommand's own, parsed later, replace them."""
    given = {k: v for k, v in (("user", user), ("groups", tuple(groups or ())), ("uid", uid))
             if v}
    if given:
        _record(**given)
