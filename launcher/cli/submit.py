"""`hvdk8s submit mpi`: validate, plan, render (what --dry-run prints), then apply.

Options follow `arena submit mpi` so arena users feel at home; everything after the first
positional argument is the command, so the program's own flags never clash with ours.
"""

from __future__ import annotations

import threading
from typing import Annotated

import typer

from launcher.cli import options as opt
from launcher.cli import userdefaults
from launcher.cli.common import exit_for_status, print_status
from launcher.cli.spec_options import JobOptionsCommand, job_options
from launcher.errors import UsageError
from launcher.output import emit_objects, note
from mpijob.jobspec import defaults

app = typer.Typer(no_args_is_help=True, help="Submit a job.")


class _OptionalValueDryRun(JobOptionsCommand):
    """kubectl's `--dry-run[=client|server]`: a bare `--dry-run` means client.

    Only tokens before the first positional are ours; the user's command is left alone.
    Defaults come from the environment and the user's config file (userdefaults).
    """

    def options_added(self) -> None:
        super().options_added()
        userdefaults.give_envvars(self)

    def parse_args(self, ctx, args):
        takes_value = {opt for p in self.params if not getattr(p, "is_flag", False)
                       and getattr(p, "opts", None) for opt in p.opts}
        given = userdefaults.prescan(list(args), takes_value, "--config", "--context")
        resolved = userdefaults.resolve(ctx, self, given["--config"], given["--context"])
        ctx.default_map = {**(ctx.default_map or {}), **resolved.default_map}
        ctx.meta[userdefaults.SOURCES_META] = resolved.sources
        args = list(args)
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--" or not token.startswith("-") or token == "-":
                break
            if token == "--dry-run":
                args[i] = "--dry-run=client"
            elif "=" not in token and token in takes_value:
                i += 1  # skip the option's value
            i += 1
        return super().parse_args(ctx, args)



EXIT_CODES = ("Exit codes: 0 created (with --wait: the job succeeded); 1 the job ran and "
              "failed, or the cluster failed while creating it (rolled back); 2 bad input, or "
              "a request the cluster cannot serve as asked (nothing created); 3 --wait: its "
              "ranks stopped stepping (local backend); 124 --wait timed out; 130 interrupted.")


# Options of submit alone (the shared ones are in launcher.cli.options).
DryRun = Annotated[defaults.DryRun | None, opt.choice(
    defaults.DryRun, "--dry-run", help="Print what would run instead of running it (the "
    "objects, or on this machine the mpirun line); --dry-run=server sends the objects with "
    "server-side dry run.", rich_help_panel=opt.PANEL_OUTPUT)]
Wait = Annotated[bool, typer.Option("--wait", help="Wait for the end; exit as `wait` does.",
                                    rich_help_panel=opt.PANEL_OUTPUT)]
Rm = Annotated[bool, typer.Option("--rm", help="With --wait: delete the job once it ends, or "
                                  "when interrupted (Ctrl-C), as `kubectl run --rm`.",
                                  rich_help_panel=opt.PANEL_OUTPUT)]
ScheduleTimeout = Annotated[float, typer.Option(
    "--schedule-timeout", min=1, help="Seconds for all workers to be scheduled before "
    "rollback.", rich_help_panel=opt.PANEL_PLACEMENT)]


@app.command(
    "mpi",
    cls=_OptionalValueDryRun,
    context_settings={"allow_interspersed_args": False},
    help="Submit an MPI/Horovod allreduce job. With no COMMAND it runs the built-in "
    "tf_cnn_benchmarks-compatible benchmark.\n\n" + EXIT_CODES,
)
@job_options()
def submit_mpi(
    ctx: typer.Context,
    command: opt.Command = None,
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    mode: opt.Mode = defaults.MODE,
    gang: opt.Gang = False,
    gang_scheduler: opt.GangScheduler = None,
    gputopology: opt.GpuTopology = False,
    cluster: opt.Cluster = None,
    calibration: opt.Calibration = None,
    config: opt.ConfigFile = None,
    dry_run: DryRun = None,
    output: opt.ObjectsOutput = opt.YAML,
    wait: Wait = False,
    rm: Rm = False,
    timeout: opt.WaitTimeout = None,
    schedule_timeout: ScheduleTimeout = defaults.SCHEDULE_TIMEOUT_SECONDS,
    *,
    job: dict,
):
    # lazy: every CLI start imports the command modules; the submit pipeline (pydantic
    # models, ~70 ms) loads only for this one
    from launcher.pipeline.submitting import JobOptions, SubmitRequest, run_submit

    if rm and not wait:
        raise UsageError("--rm deletes the job when --wait ends: give --wait too")
    opt.placement_policy(job.get("placement_policy"), gputopology)  # they must agree
    if namespace is not None:
        job["namespace"] = namespace
    request = SubmitRequest(
        options=JobOptions(job, command=tuple(command or ())), gang=gang,
        gang_scheduler=gang_scheduler, mode=mode, backend=backend, context=context,
        cluster=cluster, dry_run=dry_run, schedule_timeout=schedule_timeout,
        calibration=calibration)
    try:
        outcome = run_submit(request)
    except UsageError as exc:  # a value from the config file names the file and key
        raise userdefaults.naming_source(ctx, exc) from None
    if outcome.objects is not None:
        emit_objects(outcome.objects, output)
        return
    if wait:
        _follow_and_wait(outcome, timeout, rm=rm)
        return
    if _typed(ctx, "output", output) is not None:
        # kubectl create -o: the created object, for scripts (the notes stay on stderr)
        from launcher.output import emit_data

        emit_data(outcome.backend.get(outcome.name, outcome.namespace).to_dict(), output)
    else:
        note(f"follow it with: hvdk8s logs -f {outcome.name}{_job_flags(outcome)}")


def _typed(ctx: typer.Context, name: str, value):
    """The value if the user gave it (flag, environment, their config file: click's
    DEFAULT_MAP), None if it is the built-in default."""
    source = ctx.get_parameter_source(name)
    return None if source is not None and source.name == "DEFAULT" else value


def _follow_and_wait(outcome, timeout: float | None, *, rm: bool = False) -> None:
    """Stream the launcher's log as `logs -f` would while `wait` keeps the time limit;
    Ctrl-C leaves the job running and says how to stop it, or stops it with --rm."""
    from launcher.formats.rank_reports import for_people

    def stream():
        for line in outcome.backend.logs(outcome.name, outcome.namespace, follow=True):
            shown = for_people(line)  # not the ranks' reports nor the result (`get` reads them)
            if shown is not None:
                typer.echo(shown)

    flags = _job_flags(outcome)
    follower = threading.Thread(target=stream, daemon=True)
    follower.start()
    try:
        status = outcome.backend.wait(outcome.name, outcome.namespace, timeout=timeout)
    except KeyboardInterrupt:
        if rm:
            outcome.backend.delete(outcome.name, outcome.namespace)
            note(f"interrupted: job {outcome.name} deleted (--rm)")
        else:
            note(f"interrupted: job {outcome.name} is still running; stop it with: "
                 f"hvdk8s delete {outcome.name}{flags}")
        raise typer.Exit(130) from None
    except BaseException:
        if rm:  # a timeout (124) too: --rm leaves nothing behind
            outcome.backend.delete(outcome.name, outcome.namespace)
        raise
    follower.join(timeout=10)  # the last lines, written just before the end
    print_status(status, "table", brief=True)
    if rm:
        outcome.backend.delete(outcome.name, outcome.namespace)
        note(f"job {outcome.name} deleted (--rm)")
    exit_for_status(status)


def _job_flags(outcome) -> str:
    """What `delete`/`logs` need besides the name to find this job."""
    flags = outcome.backend.job_command_flags
    return ((f" -n {outcome.namespace}" if outcome.namespace != defaults.NAMESPACE else "")
            + (f" {flags}" if flags else ""))
