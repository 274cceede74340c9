"""Per-user defaults of `submit mpi` options: flag, then environment, then the config file
(launcher.formats.user_config; the current kubeconfig context's section over the rest),
then the built-in default.

click already resolves a parameter in that order (command line, `envvar`, the context's
`default_map`, the parameter's default: click.core.Parameter.consume_value), so each
option gets an environment variable, `HVDK8S_<OPTION>` (`--image-pull-secret`:
HVDK8S_IMAGE_PULL_SECRET, space-separated for repeatable options), and the config file
becomes the `default_map`. Every value of the file is checked against its option first,
so a bad one is one line naming the file, the key and what is expected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import typer
import typer.core

from launcher.errors import UsageError
from launcher.formats import user_config

# Not defaults: what the job runs, its name (two jobs cannot share one), whether it is
# created at all, and the context (it picks the section of the file that applies).
NOT_CONFIGURABLE = ("command", "name", "dry_run", "config", "context", "install_completion",
                    "show_completion")


def configurable(command: typer.core.TyperCommand) -> list[typer.core.TyperOption]:
    return [p for p in command.params
            if p.param_type_name == "option" and p.name not in NOT_CONFIGURABLE]


def key_of(param: typer.core.TyperOption) -> str:
    return param.name.replace("_", "-")


def env_name(param: typer.core.TyperOption) -> str:
    return param.envvar if isinstance(param.envvar, str) else f"HVDK8S_{param.name.upper()}"


def give_envvars(command: typer.core.TyperCommand) -> None:
    for p in configurable(command):
        if not p.envvar:
            p.envvar = env_name(p)


def current_context(context: str | None) -> str | None:
    if context:
        return context
    from launcher.backends.kubernetes.kubeconfig import current_context_name

    return current_context_name()


def check_value(ctx: typer.Context, param: typer.core.TyperOption, value, where: str):
    """The value as the option takes it, or a UsageError naming where it came from."""
    if param.multiple and not isinstance(value, (list, tuple)):
        value = [value]
    if param.multiple:
        value = [str(v) if not isinstance(v, bool) else v for v in value]
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and \
            param.type_descriptor.annotation not in (int, float):
        value = str(value)  # YAML's `shm-size: 4` is the text "4" to a text option
    try:
        processed = param.process_value(ctx, value)
    except typer.BadParameter as exc:
        raise UsageError(f"{where}: key {key_of(param)}: {exc.message}") from None
    return processed


def check_syntax(param: typer.core.TyperOption, value, where: str) -> None:
    """A job option's own parser (`-e` takes KEY=VALUE, `--image` a reference) on a value
    about to be written, so a bad one is refused naming the key, not at a later submit.
    What depends on the rest of a job (`--queue` needs a gang scheduler) is left to it."""
    from mpijob.errors import SpecError  # lazy: the spec's models load only for submit
    from mpijob.jobspec.image_ref import image_problem
    from mpijob.jobspec.spec import DECLARED_BY_PATH

    declared = next((d for d in DECLARED_BY_PATH.values() if d.name == param.name), None)
    if declared is None or value is None:
        return
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if not isinstance(item, str):
            continue
        if declared.path == "image" and (why := image_problem(item)):
            raise UsageError(f"{where}: key {key_of(param)}: {item!r} is not an image "
                             f"reference: {why}")
        if declared.flag.parse is not None:
            try:
                declared.flag.parse(item, declared.flag.option)
            except SpecError as exc:
                raise UsageError(f"{where}: key {key_of(param)}: {exc.message}") from None


@dataclass
class Resolved:
    path: Path
    context: str | None
    default_map: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)  # param name -> "config FILE [context X]"


def resolve(ctx: typer.Context, command: typer.core.TyperCommand, config: str | None,
            context: str | None) -> Resolved:
    path, named = user_config.config_path(config)
    data = user_config.load(path, must_exist=named)
    context = current_context(context) if data.get(user_config.CONTEXTS) else context
    params = {key_of(p): p for p in configurable(command)}
    out = Resolved(path, context)
    for section, values in user_config.layers(data, context):
        where = f"config {path}" + (f" (contexts.{section})" if section else "")
        for raw_key, value in values.items():
            param = params.get(str(raw_key).replace("_", "-"))
            if param is None:
                raise UsageError(f"{where}: unknown key {raw_key!r}; expected an option of "
                                 "hvdk8s submit mpi by its long name (image, namespace, queue, "
                                 "image-pull-secret, gang, ...) or contexts")
            check_value(ctx, param, value, where)
            out.default_map[param.name] = (list(value) if isinstance(value, (list, tuple))
                                           else [value] if param.multiple else value)
            out.sources[param.name] = where
    return out


def source_of(param: typer.core.TyperOption, resolved: Resolved) -> str:
    if os.environ.get(env_name(param)) is not None:
        return f"env {env_name(param)}"
    return resolved.sources.get(param.name, "built-in")


def prescan(args: list[str], takes_value: set[str], *options: str) -> dict[str, str | None]:
    """Values of our own options among the tokens before the command (click has not parsed
    them yet when the defaults must be set)."""
    found: dict[str, str | None] = dict.fromkeys(options)
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--" or not token.startswith("-") or token == "-":
            break
        name, eq, value = token.partition("=")
        if name in found:
            found[name] = value if eq else (args[i + 1] if i + 1 < len(args) else None)
        if not eq and name in takes_value:
            i += 1  # skip the option's value
        i += 1
    return found


SOURCES_META = "hvdk8s.config_sources"  # ctx.meta: param name -> "config FILE [...]"


def naming_source(ctx: typer.Context, exc: UsageError) -> UsageError:
    """A problem with an option's value that the user did not type (their config file or
    `HVDK8S_<OPTION>`) names where the value came from, not the flag."""
    if not exc.option or exc.detail is None:
        return exc
    spellings = set(exc.option.split("/"))
    param = next((p for p in ctx.command.params if spellings & set(getattr(p, "opts", ()))),
                 None)
    if param is None:
        return exc
    source = ctx.get_parameter_source(param.name)
    if source is not None and source.name == "ENVIRONMENT":
        return UsageError(f"{env_name(param)} (environment, for {exc.option}): {exc.detail}")
    if source is not None and source.name == "DEFAULT_MAP":
        where = ctx.meta.get(SOURCES_META, {}).get(param.name, "config")
        return UsageError(f"{where}: key {key_of(param)}: {exc.detail}")
    return exc

