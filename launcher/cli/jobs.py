"""`get`, `list`, `logs`, `wait`, `tidy`, `delete`: the same on this machine and on a
cluster. `get`, `list`, `logs` and `wait` only read; `tidy` takes the writes they name."""

from __future__ import annotations

import typer

from launcher.backends.base import FAILED
from launcher.cli import options as opt
from launcher.cli.common import exit_for_status, open_backend, print_status, print_status_list
from launcher.errors import UsageError, UserError
from mpijob.phases import START_TIMEOUT_REASON


def get(
    name: str = typer.Argument(..., help="Job name.", autocompletion=opt.complete_job_names),
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    output: opt.WideOutput = opt.TABLE,
    watch: bool = typer.Option(False, "--watch", "-w", help="Print the status again at each "
                               "change until the job ends (on Kubernetes, from watches)."),
):
    """Show a job: every pod or rank, placement, GPUs, reasons and measured images/sec.

    Reads only: where the job's state calls for a write (a pod past --start-timeout, pods
    left after the job ended), one line names `hvdk8s tidy`, which takes it."""
    b = open_backend(backend, context, namespace)
    if not watch:
        print_status(b.get(name, namespace), output)
        return
    for status in b.watch_status(name, namespace):
        if output == opt.TABLE and not status.done:
            detail = ": ".join(x for x in (status.reason, status.message) if x)
            typer.echo(f"{status.name}  {status.phase}{'  ' + detail if detail else ''}")
        else:
            print_status(status, output)


def list_jobs(
    namespace: opt.Namespace = None,
    all_namespaces: opt.AllNamespaces = False,
    context: opt.Context = None,
    backend: opt.Backend = None,
    output: opt.WideOutput = opt.TABLE,
):
    """List jobs."""
    b = open_backend(backend, context, namespace)
    statuses = b.list(namespace, all_namespaces, live=output == "wide")
    print_status_list(statuses, output,
                      namespace=None if all_namespaces else (namespace or b.namespace))


def logs(
    name: str = typer.Argument(..., help="Job name.", autocompletion=opt.complete_job_names),
    follow: bool = typer.Option(False, "-f", "--follow", help="Stream until the job ends."),
    rank: int = typer.Option(None, "--rank", help="One rank's log (local backend)."),
    worker: int = typer.Option(None, "--worker", help="One worker pod's log (Kubernetes)."),
    all_replicas: bool = typer.Option(False, "--all", help="Every pod, prefixed by its name."),
    tail: int = typer.Option(None, "--tail", help="Only the last N lines."),
    raw: bool = typer.Option(False, "--raw", help="Every line as written, with mpirun's "
                             "rank tags and the ranks' HVDK8S_REPORT/HVDK8S_RESULT lines "
                             "(which `get` reads)."),
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
):
    """Print a job's logs: the launcher's by default, without the lines meant for hvdk8s
    and without mpirun's `[1,0]<stdout>:` tags (--raw keeps them). With -f: say what the
    stream waits for (a pod not started, an image that does not pull), and end with exit 1
    and the reason when the job fails or a pod misses its --start-timeout (then `hvdk8s
    tidy` fails it). Reads only."""
    from launcher.formats.rank_reports import for_people

    b = open_backend(backend, context, namespace)
    for line in b.logs(name, namespace, follow=follow, rank=rank, worker=worker,
                       all_replicas=all_replicas, tail=tail):
        shown = line if raw else for_people(line)
        if shown is not None:
            typer.echo(shown)
    if follow:  # the stream ended with the job: a failure ends with its reason, exit 1
        try:
            status = b.get(name, namespace)
        except UserError:  # its state is unreadable (get says why): the logs were the ask
            return
        if status.phase == FAILED:
            cause = status.why or ": ".join(x for x in (status.reason, status.message) if x)
            raise UserError(f"job {name} failed" + (f": {cause}" if cause else ""))
        if status.reason == START_TIMEOUT_REASON:  # will not start; `get` named what fails it
            raise UserError(f"job {name} missed its start timeout: {status.message}")


def wait(
    name: str = typer.Argument(..., help="Job name.", autocompletion=opt.complete_job_names),
    timeout: opt.WaitTimeout = None,
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    output: opt.Output = opt.TABLE,
):
    """Wait for a job to end. Exit codes: 0 it succeeded; 1 it failed (the cause is
    printed), or a pod missed its --start-timeout and the job will not start (`hvdk8s tidy`
    fails it, as the start guard does where installed); 3 it stalled: its ranks report no
    step for 3x the expected step time (on Kubernetes `wait` reads the launcher's log tail
    for it as the job starts running, then every 3 expected step times, at least 30 s
    apart); 124 the --timeout passed first. Reads only."""
    def waiting(status) -> None:  # what it waits for, on stderr: stdout stays the result
        cause = status.why or ": ".join(x for x in (status.reason, status.message) if x)
        typer.echo(f"waiting: {name} {status.phase}" + (f": {cause}" if cause else ""), err=True)

    status = open_backend(backend, context, namespace).wait(
        name, namespace, timeout=timeout, on_change=waiting if output == opt.TABLE else None)
    print_status(status, output, brief=output == "table")
    exit_for_status(status)


def tidy(
    names: list[str] = typer.Argument(None, help="Job names (none: every job in the "
                                      "namespace).", autocompletion=opt.complete_job_names),
    namespace: opt.Namespace = None,
    all_namespaces: opt.AllNamespaces = False,
    context: opt.Context = None,
    backend: opt.Backend = None,
):
    """Take the writes a job's state calls for, which `get`, `wait` and `logs` only name:
    fail a job with a pod past --start-timeout (its GPUs freed); hand a started job's
    workers from its start gate's pod to its launcher Job; record a finished job's
    images/sec on its root (for `list` once its launcher pod is gone) and remove the pods
    its cleanPodPolicy does not keep. One line per step the cluster confirmed. The start
    guard (`hvdk8s install agent`) takes the same steps with nobody running hvdk8s."""
    if names and all_namespaces:
        raise UsageError("-A: name no job with --all-namespaces (it tidies every job)")
    b = open_backend(backend, context, namespace)
    lines = (b.tidy_all(namespace, all_namespaces) if not names else
             (line for job in names for line in b.tidy(job, namespace)))
    for line in lines:
        typer.echo(line)


def delete(
    names: list[str] = typer.Argument(..., help="Job names.",
                                      autocompletion=opt.complete_job_names),
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
):
    """Delete jobs and everything they created. Deleting a job that is gone is not an error."""
    b = open_backend(backend, context, namespace)
    for job in names:
        existed = b.delete(job, namespace)
        typer.echo(f"job {job} deleted" if existed else f"job {job} not found (nothing to delete)")


def scale(
    name: str = typer.Argument(..., help="Job name.", autocompletion=opt.complete_job_names),
    workers: int = typer.Option(..., "--workers", "-w", metavar="N", min=1,
                                help="Workers to run, within the job's --min-workers/--max-workers."),
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS", min=0,
                                  help="Seconds to wait for the job to show the new size "
                                       "(the workers that join running, those removed gone); "
                                       "past it, say what it waits for and exit 124."),
):
    """Grow or shrink a running elastic job (submitted with --min-workers/--max-workers).

    Workers that join are placed on the cluster as it is now (any node); a size that
    cannot be placed is refused (exit 2) and nothing changes. New workers join the training
    at Horovod's next reset; removed ones leave it."""
    b = open_backend(backend, context, namespace)
    scaler = getattr(b, "scale", None)
    if scaler is None:
        raise UsageError(f"scale: the {b.name} backend has no elastic jobs; use the "
                         "kubernetes backend")
    typer.echo(scaler(name, namespace, workers=workers, timeout=timeout))


def register(app: typer.Typer) -> None:
    app.command("get")(get)
    app.command("list")(list_jobs)
    app.command("logs")(logs)
    app.command("wait")(wait)
    app.command("tidy")(tidy)
    app.command("delete")(delete)
    app.command("scale")(scale)
