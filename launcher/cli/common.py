"""Printing shared by the job commands (their options: launcher.cli.options)."""

from __future__ import annotations

import typer

from launcher.backends.base import FAILED, SUCCEEDED, JobStatus
from launcher.errors import UserError
from launcher.output import emit_data
from mpijob.phases import JobPhase

# What a command can do without a cluster, said when Kubernetes is asked for and nothing is
# configured: each command offers only what it has (`list` has no --cluster).
JOBS_HINT = "see this machine's jobs with --backend local"
PLAN_HINT = "plan against a file with --cluster FILE"
TOP_NODE_HINT = "read a cluster file with --cluster FILE"
INSTALL_HINT = "print the manifests with --dry-run"


def require_kubernetes(context: str | None, hint: str | None) -> None:
    """A usable kubeconfig context (or pod service account), or one line saying what the user
    gave that cannot be used, and the way on `hint` names."""
    from launcher.backends.kubernetes.client import config_problem, kubeconfig_usable

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


def exit_for_status(status: JobStatus) -> None:
    """`wait`'s contract: 0 on success, 1 on failure (124 on timeout comes from Timeout)."""
    if status.phase == SUCCEEDED:
        raise typer.Exit(0)
    if status.phase == FAILED:
        raise typer.Exit(1)


def _gpus(gpus: list[int]) -> str:
    return ",".join(map(str, gpus)) if gpus else "-"


def print_status(status: JobStatus, fmt: str, *, brief: bool = False) -> None:
    if emit_data(status.to_dict(), fmt):
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=brief, highlight=False)
    if not console.is_terminal:  # piped: never cut pod names to fit 80 columns
        console.width = 200
    line = f"[bold]{status.name}[/bold]  {status.phase}"
    if status.reason or status.message:
        line += f"  {status.reason or ''}{': ' if status.reason and status.message else ''}{status.message or ''}"
    console.print(line)
    if status.images_per_sec is not None:
        predicted = (f" (predicted {status.predicted_images_per_sec:.0f})"
                     if status.predicted_images_per_sec else "")
        console.print(f"total images/sec: {status.images_per_sec:.2f}{predicted}")
    if brief:
        return
    console.print(f"backend {status.backend}  namespace {status.namespace}  mode {status.mode or '-'}"
                  f"  workers {status.workers} x {status.gpus_per_worker} GPU")
    table = Table("POD/RANK", "ROLE", "PHASE", "NODE", "GPUS", "RESTARTS", "DETAIL")
    for column in table.columns[:5]:
        column.no_wrap, column.overflow = True, "fold"
    for r in status.replicas:
        detail = " ".join(x for x in (r.reason, r.message) if x) or ""
        if r.exit_code not in (None, 0):
            detail = f"exit {r.exit_code} {detail}".strip()
        table.add_row(r.name, r.role, r.phase, r.node or "-", _gpus(r.gpus), str(r.restarts), detail)
    console.print(table)
    for row in status.gpu_allocation:  # the topology agent: what the pods got vs the plan
        if row.get("note"):
            console.print(row["note"], markup=False)
    for row in status.placement:  # DRA: what the claims got, beside the plan
        if "allocated_devices" in row:
            console.print(f"{row['pod']}: planned GPUs {_gpus(row.get('gpus') or [])}, DRA allocated "
                          f"{', '.join(row['allocated_devices']) or 'nothing yet'}", markup=False)
    if status.log_tail:
        console.print("[bold]last log lines:[/bold]")
        for text in status.log_tail:
            console.print(text, markup=False)


def print_status_list(statuses: list[JobStatus], fmt: str) -> None:
    """kubectl-style plain columns: fast for hundreds of jobs, and easy to grep."""
    if emit_data([s.to_dict() for s in statuses], fmt):
        return
    header = ("NAME", "NAMESPACE", "BACKEND", "PHASE", "WORKERS", "GPUS", "NODES", "IMAGES/SEC",
              "CREATED")
    rows = [header]
    for s in statuses:
        nodes = ",".join(sorted({p["node"] for p in s.placement if p.get("node")})) or "-"
        ips = f"{s.images_per_sec:.1f}" if s.images_per_sec is not None else "-"
        rows.append((s.name, s.namespace, s.backend, s.phase, str(s.workers),
                     str(s.workers * s.gpus_per_worker), nodes, ips, s.created or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    typer.echo("\n".join(lines))
    # Why a job is Unknown (its state cannot be read) goes beside the table, to stderr.
    for s in statuses:
        if s.phase == JobPhase.UNKNOWN.value and s.message:
            typer.echo(f"warning: {s.message}", err=True)

