"""The `hvdk8s` command: one typer app, one module per command group."""

from __future__ import annotations

import atexit
import gc
import os
import sys
import traceback

import typer
from typer.core import TyperGroup

from launcher import __version__
from launcher.backends.kubernetes.kubeconfig_flag import set_kubeconfig_flag
from launcher.cli import (
    agent,
    calibrate,
    completion,
    config,
    dev,
    doctor,
    experiment,
    globalflags,
    install,
    jobs,
    plan,
    simulate,
    submit,
    top,
    topology,
)
from launcher.cli import options as opt
from launcher.cli.helptext import polish
from launcher.errors import UserError
from launcher.output import set_debug


class _OneLineErrors(TyperGroup):
    """Turns errors into one line on stderr and an exit code, for the real entry point and
    for typer's CliRunner alike (both go through the root group's invoke)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # typer has built the whole click tree by now: kubectl's global flags on every
        # command, and kubectl-style help for all of it.
        globalflags.add_everywhere(self)
        _debug_everywhere(self)
        polish(self)

    def make_context(self, info_name, args, parent=None, **extra):
        # The root's own options are parsed here, before invoke: a bad one (`hvdk8s --bogus`)
        # is one line too, not click's usage box.
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except typer.TyperException as exc:
            if getattr(exc, "exit_code", None) != 2:
                raise
            typer.echo(f"error: {_usage_message(exc)}", err=True)
            raise typer.Exit(2) from None

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
        except BrokenPipeError:
            # `hvdk8s ... | head`: the reader has what it wanted. Quiet, as a program killed
            # by SIGPIPE is; stdout goes to /dev/null so the exit's flush cannot fail again
            # (the Python docs' recipe, library/signal.html "Note on SIGPIPE").
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(141) from None
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


def _debug_on(value: bool) -> None:
    if value:
        _state["debug"] = True
        set_debug(True)


def _debug_everywhere(root) -> None:
    """--debug after the subcommand too (`hvdk8s submit mpi ... --debug`), as before it:
    a hidden copy on every command (after a program's first word it is the program's)."""
    donor = typer.Typer()

    @donor.command()
    def _flag(debug: bool = typer.Option(False, "--debug", callback=_debug_on)) -> None:
        """Donates --debug."""

    option = next(p for p in typer.main.get_command(donor).params if p.name == "debug")
    option.expose_value, option.hidden = False, True
    for path, command in globalflags.commands_of(root):
        if path and not getattr(command, "commands", None) and not any(
                p.name == "debug" for p in command.params):
            command.params.append(option)


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
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    kubeconfig: opt.Kubeconfig = None,
    context: opt.Context = None,
    namespace: opt.Namespace = None,
    as_user: globalflags.AsUser = None,
    as_groups: globalflags.AsGroups = None,
    as_uid: globalflags.AsUid = None,
):
    _state["debug"] = debug
    set_debug(debug)
    set_kubeconfig_flag(kubeconfig)  # this command's, not an earlier one's in this process
    globalflags.reset_impersonation()
    globalflags.pass_down_impersonation(as_user, as_groups, as_uid)
    # kubectl's global flags, before the subcommand: they become the defaults of every
    # subcommand's own (which take them after it too: launcher.cli.globalflags).
    globalflags.pass_down(ctx, context=context, namespace=namespace)


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
    completion.register(app)
    app.add_typer(experiment.app, name="experiment")
    app.add_typer(config.app, name="config")
    app.add_typer(dev.app, name="dev")
    app.add_typer(install.app, name="install", help="Install cluster components (the topology agent, the Trainer runtime).")


_register()

# At exit, Python's last garbage collections walk every object still alive (the modules,
# typer's command tree, a command's answers): ~50 ms of `hvdk8s list -A`'s CPU. Frozen
# first, they are not walked; each is still freed as its module goes.
atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    # Known before parsing so that errors raised while parsing honour it too.
    _state["debug"] = "--debug" in argv
    completion.completing()  # the shell asking for candidates: typer's classes answer
    try:
        app(args=argv, prog_name="hvdk8s")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
