"""The job options of `submit mpi` and `plan`, generated from the spec fields that declare
them (mpijob.jobspec.spec.Flag: names, type, default, choices, each written once, on the
field) and from how the CLI presents them (launcher.cli.job_help: help, panel, value name).

`@job_options(...)` marks a typer command whose last parameter is `job: dict`; registered
with `cls=JobOptionsCommand`, the command gets the declared options (all, or those named)
beside its own, and `job` gets the ones given: {spec field path: value as typed}, which
`mpijob.jobspec.spec.fields_from_options` turns into the spec's fields. An option is given
when its value came from anywhere but its default (the command line, the environment or the
user's config file: click's parameter source), so an option left alone leaves the spec's
default to the spec; help shows that default.

The options are added when the command is first used (parsed, completed or shown), not
when the CLI starts: reading them imports the spec's pydantic models (~130 ms), which
`hvdk8s list` and every other command must not pay for.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_origin, get_type_hints

import typer
from typer.core import TyperCommand

from launcher.cli import options as opt
from launcher.cli.job_help import SHOWN

if TYPE_CHECKING:
    from mpijob.jobspec.spec import DeclaredOption

ADDED_CONTEXT = "job_options_context"
PANELS = {"job": opt.PANEL_JOB, "placement": opt.PANEL_PLACEMENT, "pods": opt.PANEL_PODS,
          "network": opt.PANEL_NETWORK, "data": opt.PANEL_DATA,
          "benchmark": opt.PANEL_BENCHMARK}


def _default(declared: DeclaredOption) -> Any:
    """The option's default as help shows it: the field's, None for a required field or an
    empty list."""
    if declared.field.is_required():
        return None
    default = declared.default
    return None if default in ((), {}, []) else default


def _parameter(declared: DeclaredOption, required: bool) -> inspect.Parameter:
    flag, kind, shown = declared.flag, declared.annotation, SHOWN[declared.path]
    names = sorted(flag.names, key=lambda n: not n.startswith("--"))  # long first, as help lists
    kwargs: dict[str, Any] = {"help": shown.help, "rich_help_panel": PANELS[shown.panel]}
    if shown.metavar:
        kwargs["metavar"] = shown.metavar
    choices = kind if get_origin(kind) is Literal else None
    value_type: Any = kind
    if choices is not None:
        value_type = choices
        info = opt.choice(choices, *names, case_sensitive=flag.case_sensitive, **kwargs)
    else:
        info = typer.Option(*names, **kwargs)
        if get_origin(kind) in (dict, tuple, list):
            value_type = list[str]  # repeatable; each value parsed by the Flag
    default = _default(declared)
    annotation = Annotated[value_type | None if default is None else value_type, info]
    return inspect.Parameter(declared.name, inspect.Parameter.KEYWORD_ONLY,
                             annotation=annotation,
                             default=inspect.Parameter.empty if required else default)


def given(declared: Iterable[DeclaredOption], values: dict[str, Any],
          ctx: typer.Context) -> dict[str, Any]:
    """{field path: value} of the options given: from the command line, the environment or
    the user's config file, not from their default."""
    out = {}
    for d in declared:
        source = ctx.get_parameter_source(d.name)
        if source is not None and source.name != "DEFAULT":
            out[d.path] = values[d.name]
    return out


@dataclass(frozen=True)
class _JobOptions:
    """What `@job_options` marked: the command and which declared options it takes."""

    command: Callable
    paths: tuple[str, ...] | None
    required: frozenset[str]

    def full_callback(self) -> Callable:
        """The command with every option as a parameter, for typer to build (imports the
        spec)."""
        from mpijob.jobspec.spec import DECLARED_BY_PATH, DECLARED_OPTIONS

        declared = ([DECLARED_BY_PATH[p] for p in self.paths] if self.paths is not None
                    else list(DECLARED_OPTIONS))
        command = self.command
        own = _own_parameters(command)
        # typer hands the context to the parameter annotated with it: the command's own, or
        # one added here, for `given` to ask where each value came from.
        ctx_name = next((p.name for p in own if p.annotation is typer.Context), None)
        if ctx_name is None:
            own.append(inspect.Parameter(ADDED_CONTEXT, inspect.Parameter.KEYWORD_ONLY,
                                         annotation=typer.Context))

        @functools.wraps(command)
        def with_options(**kwargs):
            values = {d.name: kwargs.pop(d.name) for d in declared}
            ctx = kwargs[ctx_name] if ctx_name else kwargs.pop(ADDED_CONTEXT)
            return command(**kwargs, job=given(declared, values, ctx))

        parameters = [*own, *(_parameter(d, d.path in self.required) for d in declared)]
        with_options.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_options


def _own_parameters(command: Callable) -> list[inspect.Parameter]:
    hints = get_type_hints(command, include_extras=True)
    return [p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values() if p.name != "job"]


def job_options(paths: Iterable[str] | None = None, *,
                required: Iterable[str] = ()) -> Callable[[Callable], Callable]:
    """Mark a typer command (register it with cls=JobOptionsCommand) as taking the declared
    options: all of them, or those of `paths` (spec field paths), `required` among them."""
    def wrap(command: Callable) -> Callable:
        marked = _JobOptions(command, tuple(paths) if paths is not None else None,
                             frozenset(required))

        @functools.wraps(command)
        def own_options_only(**kwargs):  # pragma: no cover - replaced before it can run
            raise AssertionError("JobOptionsCommand adds the job options before invoking")

        parameters = _own_parameters(command)
        own_options_only.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        own_options_only.__annotations__ = {p.name: p.annotation for p in parameters}
        own_options_only.job_options = marked  # type: ignore[attr-defined]
        return own_options_only

    return wrap


class JobOptionsCommand(TyperCommand):
    """A typer command built with its own options only, which adds the declared job options
    (and the callback that takes them) the first time it is used."""

    def materialize(self) -> JobOptionsCommand:
        marked = getattr(getattr(self.callback, "__wrapped__", None), "job_options", None)
        if marked is None:
            return self  # done already
        # typer builds the whole command (a one-command app is that command); its job
        # options come first (help lists their panels first) before ours and the global
        # flags added at start-up, and its callback takes them all.
        donor = typer.Typer(add_completion=False)
        donor.command()(marked.full_callback())
        full = typer.main.get_command(donor)
        have = {p.name for p in self.params}
        self.params[:0] = [p for p in full.params if p.name not in have]
        self.callback = full.callback
        self.options_added()
        return self

    def options_added(self) -> None:
        """Hook: the job options have just been added."""
        from launcher.cli.helptext import polish

        polish(self)  # value names of the options just added

    def make_context(self, info_name, args, parent=None, **extra):
        self.materialize()
        return super().make_context(info_name, args, parent=parent, **extra)
