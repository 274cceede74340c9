"""Printing shared by the job commands (their options: launcher.cli.options)."""

from __future__ import annotations

import typer

from launcher.backends.base import FAILED, SUCCEEDED, JobStatus
from launcher.errors import UserError
from launcher.output import MACHINE_FORMATS, emit_data
from launcher.timestamps import age
from mpijob.phases import STALLED_REASON, START_TIMEOUT_REASON, JobPhase

# What a command can do without a cluster, said when Kubernetes is asked for and nothing is
# configured: each command offers only what it has (`list` has no --cluster).
JOBS_HINT = "see this machine's jobs with --backend local"
PLAN_HINT = "plan against a file with --cluster FILE"
TOP_NODE_HINT = "read a cluster file with --cluster FILE"
INSTALL_HINT = "print the manifests with --dry-run"


def require_kubernetes(context: str | None, hint: str | None) -> None:
    """A usable kubeconfig context (or pod service account), or one line saying what the user
    gave that cannot be used, and the way on `hint` names."""
    from launcher.backends.kubernetes.kubeconfig import config_problem, kubeconfig_usable

    if not kubeconfig_usable(context):
        raise UserError(config_problem(context, offline=hint))


def open_backend(backend: str | None, context: str | None, namespace: str | None, *,
                 hint: str | None = JOBS_HINT):
    # lazy: every CLI start imports this module; the backends and rich's Console and Table
    # (~12 ms each) load when a command uses them
    from launcher.backends.select import make_backend, resolve_backend_name

    name, _ = resolve_backend_name(backend, context, hint=hint)
    if name == "kubernetes":
        require_kubernetes(context, hint)
    return make_backend(name, context=context, namespace=namespace)


# `wait`'s exit codes (124 on timeout comes from Timeout).
EXIT_FAILED = 1
EXIT_STALLED = 3
# The reason of a job ended for its stall (--stall-timeout; the local supervisor's).
STALLED = STALLED_REASON


def exit_for_status(status: JobStatus) -> None:
    """`wait`'s contract: 0 on success, 1 on failure or past --start-timeout, 3 when the
    ranks stopped stepping."""
    if status.phase == SUCCEEDED:
        raise typer.Exit(0)
    if status.phase == FAILED:
        raise typer.Exit(EXIT_STALLED if status.reason == STALLED else EXIT_FAILED)
    if status.reason == START_TIMEOUT_REASON:  # not failed, but it will not start by itself
        raise typer.Exit(EXIT_FAILED)
    if status.progress is not None and status.progress.stalled:
        raise typer.Exit(EXIT_STALLED)


def _gpus(gpus: list[int]) -> str:
    return ",".join(map(str, gpus)) if gpus else "-"


def print_status(status: JobStatus, fmt: str, *, brief: bool = False) -> None:
    if emit_data(status.to_dict(), fmt):
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=brief, highlight=False)
    piped = not console.is_terminal
    if piped:  # never cut pod names to fit 80 columns
        console.width = 200
    line = f"[bold]{status.name}[/bold]  {status.phase}"
    if status.reason or status.message:
        line += f"  {status.reason or ''}{': ' if status.reason and status.message else ''}{status.message or ''}"
    console.print(line)
    if status.why and status.why != ": ".join(x for x in (status.reason, status.message) if x):
        console.print(f"why: {status.why}", markup=False)  # unless the line above says it
    if status.images_per_sec is not None:
        predicted = (f" (predicted {status.predicted_images_per_sec:.0f})"
                     if status.predicted_images_per_sec else "")
        console.print(f"total images/sec: {status.images_per_sec:.2f}{predicted}")
    progress = status.progress
    if progress is not None and not status.done:
        console.print(progress.line(), markup=False)
        for problem in progress.problems():
            if f"why: {problem}" != f"why: {status.why}":
                console.print(problem, markup=False)
    if brief:
        return
    where = ("backend local (processes on this machine)" if status.backend == "local" else
             f"backend {status.backend}  mode {status.mode or '-'}")
    console.print(f"{where}  namespace {status.namespace}  age {age(status.created)}"
                  f"  workers {status.workers} x {status.gpus_per_worker} GPU")
    wide = fmt == "wide"
    columns = ["POD/RANK", "ROLE", "PHASE", "NODE", "GPUS", "RESTARTS", "DETAIL"]
    if wide:
        columns.insert(6, "EXIT CODE")
    # Piped: plain columns as `list` prints them (box characters are for people).
    table = Table(*columns, box=None if piped else box.HEAVY_HEAD, show_edge=not piped)
    for column in table.columns[:5]:
        column.no_wrap, column.overflow = True, "fold"
    for r in status.replicas:
        detail = " ".join(x for x in (r.reason, r.message) if x) or ""
        if r.exit_code not in (None, 0) and not wide:
            detail = f"exit {r.exit_code} {detail}".strip()
        row = [r.name, r.role, r.phase, r.node or "-", _gpus(r.gpus), str(r.restarts), detail]
        if wide:
            row.insert(6, "-" if r.exit_code is None else str(r.exit_code))
        table.add_row(*row)
    console.print(table)
    for row in status.gpu_allocation:  # the topology agent: what the pods got vs the plan
        if row.get("note"):
            console.print(row["note"], markup=False)
    for row in status.placement:  # DRA: what the claims got, beside the plan
        if "allocated_devices" in row:
            console.print(f"{row['pod']}: planned GPUs {_gpus(row.get('gpus') or [])}, DRA allocated "
                          f"{', '.join(row['allocated_devices']) or 'nothing yet'}", markup=False)
    for text in status.size:  # elastic: the size now and its history
        console.print(text, markup=False)
    from launcher.cli.preflight_view import preflight_lines

    for text in preflight_lines(status.preflight, wide=wide):
        console.print(text, markup=False)
    if status.log_tail:
        console.print("[bold]last log lines:[/bold]")
        for text in status.log_tail:
            console.print(text, markup=False)


def print_status_list(statuses: list[JobStatus], fmt: str, *, namespace: str | None) -> None:
    """kubectl-style plain columns: fast for hundreds of jobs, and easy to grep; `wide` adds
    columns as `kubectl get -o wide` does. `namespace` is None for every namespace."""
    # The dicts only for the machine formats: asdict of 500 statuses took 0.2 s of `list`.
    if fmt in MACHINE_FORMATS and emit_data([s.to_dict() for s in statuses], fmt):
        return
    if not statuses:  # as kubectl says it, on stderr: stdout stays empty for scripts
        typer.echo("No jobs found." if namespace is None else
                   f"No jobs found in namespace {namespace}.", err=True)
        return
    wide = fmt == "wide"
    header = ("NAME", "NAMESPACE", "BACKEND", "PHASE", "WORKERS", "GPUS", "IMAGES/SEC", "AGE")
    if wide:
        header += ("STEP", "PREDICTED", "RATIO", "ETA", "LAST STEP", "NODES", "MODE", "CREATED")
    rows = [header]
    for s in statuses:
        row = (s.name, s.namespace, s.backend, s.phase, str(s.workers),
               str(s.workers * s.gpus_per_worker), _rate(measured_rate(s)), age(s.created))
        if wide:
            nodes = ",".join(sorted({p["node"] for p in s.placement if p.get("node")})) or "-"
            row += (*progress_cells(s), nodes, _mode(s), s.created or "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    typer.echo("\n".join(lines))
    # Why a job is Unknown (its state cannot be read) goes beside the table, to stderr.
    for s in statuses:
        if s.phase == JobPhase.UNKNOWN.value and s.message:
            typer.echo(f"warning: {s.message}", err=True)


def measured_rate(status: JobStatus) -> float | None:
    """The job's images/sec: the total once it ended, else the ranks' rate now."""
    if status.images_per_sec is not None:
        return status.images_per_sec
    progress = status.progress
    return None if progress is None else (progress.images_per_sec or progress.images_per_sec_avg)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def progress_cells(status: JobStatus) -> tuple[str, str, str, str, str]:
    """STEP, PREDICTED, RATIO, ETA, LAST STEP of `list -o wide` and `top job`."""
    from launcher.formats.job_progress import duration

    p = status.progress
    predicted = _rate(status.predicted_images_per_sec)
    if p is None:
        return "-", predicted, "-", "-", "-"
    measured = measured_rate(status)
    ratio = (f"{measured / status.predicted_images_per_sec:.2f}x"
             if measured and status.predicted_images_per_sec else "-")
    running = not status.done
    return (p.step_text().removeprefix("step ").removesuffix(" done"), predicted, ratio,
            duration(p.eta_seconds) if running and p.eta_seconds is not None else "-",
            ("STALLED " if p.stalled else "") + f"{duration(p.last_step_age)} ago"
            if running else "-")


def _mode(status: JobStatus) -> str:
    """How the job runs: `local` for this machine's processes (a pod mode means nothing
    there), else pods or operator."""
    return "local" if status.backend == "local" else (status.mode or "-")
