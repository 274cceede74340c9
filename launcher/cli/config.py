"""`hvdk8s config view` and `hvdk8s config set KEY VALUE`: the per-user defaults of
`submit mpi` (launcher.cli.userdefaults, launcher.formats.user_config)."""

from __future__ import annotations

import json
import os
import shlex
from typing import Annotated

import typer
import yaml

from launcher.cli import options as opt
from launcher.cli import userdefaults
from launcher.errors import UsageError
from launcher.formats import user_config

app = typer.Typer(no_args_is_help=True,
                  help="Per-user defaults of submit options ($HVDK8S_HOME/config.yaml).")

ForContext = Annotated[str | None, typer.Option(
    "--context", help="The kubeconfig context whose section applies (view: default the "
    "current one) or is written (set: default the top level).")]
ShowAll = Annotated[bool, typer.Option("--all", help="Also the options at their built-in "
                                                     "defaults.")]


def _submit_command():
    from launcher.cli import submit

    command = typer.main.get_command(submit.app)
    # typer makes a one-command app that one command, not a group
    command = command.commands["mpi"] if hasattr(command, "commands") else command
    return command.materialize()


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):  # one word each: a comma is part of a value
        return " ".join(shlex.quote(str(v)) for v in value) if value else "-"
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


@app.command("view")
def view(config: opt.ConfigFile = None, context: ForContext = None, show_all: ShowAll = False,
         output: opt.ReportOutput = opt.TABLE):
    """Show each submit option's default and where it comes from (flag > env > config >
    built-in)."""
    command = _submit_command()
    ctx = typer.Context(command)
    resolved = userdefaults.resolve(ctx, command, config, context)
    rows = []
    for param in userdefaults.configurable(command):
        source = userdefaults.source_of(param, resolved)
        if source.startswith("env "):
            value = os.environ[userdefaults.env_name(param)]
        elif param.name in resolved.default_map:
            value = resolved.default_map[param.name]
        else:
            value = param.default
        if source == "built-in" and not show_all:
            continue
        rows.append({"key": userdefaults.key_of(param), "value": value, "source": source})
    if output == "json":
        typer.echo(json.dumps({"file": str(resolved.path), "context": resolved.context,
                               "options": rows}, indent=2, default=str))
        return
    typer.echo(f"# file: {resolved.path}" + ("" if resolved.path.exists() else " (none)")
               + (f", context: {resolved.context}" if resolved.context else ""))
    if not rows:
        typer.echo("# every option at its built-in default (--all lists them)")
        return
    width = max(len(r["key"]) for r in rows)
    vwidth = max(len(_shown(r["value"])) for r in rows)
    typer.echo(f"{'KEY':<{width}}  {'VALUE':<{vwidth}}  SOURCE")
    for r in rows:
        typer.echo(f"{r['key']:<{width}}  {_shown(r['value']):<{vwidth}}  {r['source']}")


Values = Annotated[list[str], typer.Argument(
    help="Its value; a repeatable option (env, label, data, ...) takes one or more, each "
    "as given (a comma is part of the value).")]


def _param(command, key: str):
    params = {userdefaults.key_of(p): p for p in userdefaults.configurable(command)}
    param = params.get(key.replace("_", "-"))
    if param is None:
        raise UsageError(f"config: unknown key {key!r}; expected an option of hvdk8s "
                         "submit mpi by its long name (image, namespace, queue, "
                         "image-pull-secret, gang, ...)")
    return param


def _write(key: str, values: list[str], config, context, how: str) -> None:
    """set: replace; add/remove: change a repeatable option's list, item by item."""
    command = _submit_command()
    param = _param(command, key)
    key = userdefaults.key_of(param)
    if how != "set" and not param.multiple:
        raise UsageError(f"config {how} {key}: {key} takes one value, not a list; use "
                         f"hvdk8s config set {key} VALUE")
    if not param.multiple and len(values) != 1:
        raise UsageError(f"config set {key}: takes one value, got {len(values)}")
    path, _ = user_config.config_path(config)
    data = user_config.load(path, must_exist=False)
    section = data
    if context:
        section = data.setdefault(user_config.CONTEXTS, {}).setdefault(context, {})
    before = section.get(key)
    had = ([] if before is None else list(before) if isinstance(before, list) else [before])
    if how == "add":
        parsed: object = had + [v for v in values if v not in had]
    elif how == "remove":
        for v in values:
            if v not in had:  # already as asked: said, not an error
                typer.echo(f"{key}: {v!r} was not among its values ({_shown(had)}); "
                           "nothing to remove", err=True)
        parsed = [v for v in had if v not in values]
    elif param.multiple:
        parsed = list(values)
    else:
        parsed = yaml.safe_load(values[0]) if param.is_flag else values[0]
    checked = userdefaults.check_value(typer.Context(command), param, parsed,
                                       f"config {how} {key}")
    stored = list(checked) if param.multiple else checked
    userdefaults.check_syntax(param, stored, f"config {how} {key}")
    if param.multiple and not stored:
        section.pop(key, None)
    else:
        section[key] = stored
    user_config.save(path, data)
    where = f"{path}" + (f" (contexts.{context})" if context else "")
    replaced = (f" (it was {_shown(had)})" if how == "set" and had and had != stored
                and param.multiple else "")
    typer.echo(f"{key}: {_shown(stored) if stored else '-'} written to {where}{replaced}")


@app.command("set")
def set_value(key: str = typer.Argument(..., help="A submit option by its long name, e.g. image."),
              values: Values = ..., config: opt.ConfigFile = None, context: ForContext = None):
    """Write one default into the config file (the other entries are kept); a repeatable
    option's list is replaced by the values given (add/remove change it item by item)."""
    _write(key, values, config, context, "set")


@app.command("add")
def add_value(key: str = typer.Argument(..., help="A repeatable submit option, e.g. env."),
              values: Values = ..., config: opt.ConfigFile = None, context: ForContext = None):
    """Add values to a repeatable option's list of defaults."""
    _write(key, values, config, context, "add")


@app.command("remove")
def remove_value(key: str = typer.Argument(..., help="A repeatable submit option, e.g. env."),
                 values: Values = ..., config: opt.ConfigFile = None,
                 context: ForContext = None):
    """Remove values from a repeatable option's list of defaults."""
    _write(key, values, config, context, "remove")
