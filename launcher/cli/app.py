"""The `hvdk8s` command: one typer app, one module per command group."""

from __future__ import annotations

import os
import sys
import traceback

import typer
from typer.core import TyperGroup

from launcher import __version__
from launcher.cli import (
    agent,
    calibrate,
    doctor,
    experiment,
    install,
    jobs,
    plan,
    simulate,
    submit,
    top,
    topology,
)
from launcher.cli.helptext import polish
from launcher.errors import UserError
from launcher.output import set_debug


class _OneLineErrors(TyperGroup):
    """Turns errors into one line on stderr and an exit code, for the real entry point and
    for typer's CliRunner alike (both go through the root group's invoke)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # typer has built the whole click tree by now: give all of it kubectl-style help.
        polish(self)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            # typer's public base of the click exceptions it vendors. A usage error (exit
            # code 2: a bad option or value) prints usage + hint + error over several lines
            # in click; one line says it all. Others click reports itself.
            if getattr(exc, "exit_code", None) != 2:
                raise
            typer.echo(f"error: {_usage_message(exc)}", err=True)
            raise typer.Exit(2) from None
        except UserError as exc:
            if debug_enabled():
                traceback.print_exc()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:
            if debug_enabled():
                traceback.print_exc()
            else:
                typer.echo(
                    f"error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
                    err=True,
                )
            raise typer.Exit(1) from None


def _usage_message(exc: typer.TyperException) -> str:
    """A bad option value as our own errors word it: `-o/--output: expected ...`."""
    param = getattr(exc, "param", None)
    opts = getattr(param, "opts", None) or []
    # A missing option is a BadParameter subclass that words itself ("Missing option").
    if type(exc) is typer.BadParameter and opts and opts[0].startswith("-"):
        return f"{'/'.join(sorted(opts, key=len))}: {exc.message}"
    return exc.format_message()


app = typer.Typer(
    cls=_OneLineErrors,
    name="hvdk8s",
    help="Topology-aware, all-or-nothing Horovod/MPI jobs on Kubernetes (or this machine).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


def debug_enabled() -> bool:
    return _state["debug"] or os.environ.get("HVDK8S_DEBUG") == "1"


def _version(value: bool):
    if value:
        typer.echo(f"hvdk8s {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="kubeconfig file (default: "
                                   "$KUBECONFIG, then ~/.kube/config)."),
):
    _state["debug"] = debug
    set_debug(debug)
    if kubeconfig:
        if not all(os.path.exists(p) for p in kubeconfig.split(os.pathsep)):
            raise typer.BadParameter(f"no such file: {kubeconfig}", param_hint="--kubeconfig")
        # The kubernetes client is imported lazily, after this, and reads KUBECONFIG then.
        os.environ["KUBECONFIG"] = kubeconfig


def _register() -> None:
    app.add_typer(submit.app, name="submit")
    jobs.register(app)
    plan.register(app)
    app.add_typer(topology.app, name="topology")
    app.add_typer(top.app, name="top")
    agent.register(app)
    doctor.register(app)
    simulate.register(app)
    calibrate.register(app)
    app.add_typer(experiment.app, name="experiment")
    app.add_typer(install.app, name="install", help="Install cluster components (the topology agent).")


_register()


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    # Known before parsing so that errors raised while parsing honour it too.
    _state["debug"] = "--debug" in argv
    try:
        app(args=argv, prog_name="hvdk8s")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
