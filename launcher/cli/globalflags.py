"""kubectl's global flags (`--kubeconfig`, `--context`, `-n`), taken before the subcommand
and after it alike, as kubectl takes them anywhere.

Given before the subcommand, the root passes them down as the defaults of the subcommand's
own options (click's default_map), so a flag after the subcommand still wins. A command that
lacks one gets it here: `--kubeconfig` everywhere (it only records the file), and hidden
`--context`/`-n` on the commands that read no cluster, where they change nothing.
"""

from __future__ import annotations

import copy
from typing import Annotated

import typer

from launcher.cli import options as opt


def _commands(command, path=()):
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def _donated_options() -> dict[str, object]:
    """The options as typer builds them (a one-command app declares them), by name."""
    donor = typer.Typer()

    @donor.command()
    def _flags(kubeconfig: opt.Kubeconfig = None,
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
    donated = _donated_options()
    for path, command in _commands(root):
        if not path or getattr(command, "commands", None):
            continue  # the root declares its own; a group passes its arguments on
        names = {p.name for p in command.params}
        reads_a_cluster = "context" in names
        if "kubeconfig" not in names:
            command.params.append(_added(donated["kubeconfig"], hidden=not reads_a_cluster))
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
