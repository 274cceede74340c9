"""`hvdk8s config view` and `hvdk8s config set KEY VALUE`: the per-user defaults of
`submit mpi` (launcher.cli.userdefaults, launcher.formats.user_config)."""

from __future__ import annotations

import json
import os
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
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "-"
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


@app.command("set")
def set_value(key: str = typer.Argument(..., help="A submit option by its long name, e.g. image."),
              value: str = typer.Argument(..., help="Its value; repeatable options take "
                                          "a comma-separated list."),
              config: opt.ConfigFile = None, context: ForContext = None):
    """Write one default into the config file (the other entries are kept)."""
    command = _submit_command()
    params = {userdefaults.key_of(p): p for p in userdefaults.configurable(command)}
    param = params.get(key.replace("_", "-"))
    if param is None:
        raise UsageError(f"config set: unknown key {key!r}; expected an option of hvdk8s "
                         "submit mpi by its long name (image, namespace, queue, "
                         "image-pull-secret, gang, ...)")
    path, named = user_config.config_path(config)
    data = user_config.load(path, must_exist=False)
    parsed = yaml.safe_load(value) if param.is_flag else value
    if param.multiple:
        parsed = [v.strip() for v in value.split(",") if v.strip()]
    checked = userdefaults.check_value(typer.Context(command), param, parsed,
                                       f"config set {key}")
    stored = list(checked) if param.multiple else checked
    section = data
    if context:
        section = data.setdefault(user_config.CONTEXTS, {}).setdefault(context, {})
    section.pop(key, None)
    section[userdefaults.key_of(param)] = stored
    user_config.save(path, data)
    typer.echo(f"{userdefaults.key_of(param)}: {_shown(stored)} written to {path}"
               + (f" (contexts.{context})" if context else ""))
