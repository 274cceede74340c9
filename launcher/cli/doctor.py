"""`hvdk8s doctor`: what the cluster offers and what hvdk8s will do there."""

from __future__ import annotations

import json

import typer

from launcher.cli import options as opt

STATUS_MARK = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL"}


def doctor(
    context: opt.Context = None,
    namespace: opt.Namespace = None,
    output: opt.ReportOutput = opt.TABLE,
):
    """Check the cluster: API version, your permissions, GPU nodes and labels, the topology
    agent, the MPI Operator, gang schedulers (Volcano, scheduler-plugins, Kueue) and DRA.
    Exit 0 when a job can be submitted, 1 otherwise."""
    # lazy: every CLI start imports the command modules; the Kubernetes backend and rich's tables
    # load only for this one
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.backends.kubernetes.cluster_reads import gather
    from mpijob.scheduling.doctor import assess, can_submit

    backend = KubernetesBackend(context, namespace)
    ns = backend.namespace
    facts = gather(backend.client, ns)
    findings = assess(facts)
    ok = can_submit(findings)
    if output == "json":
        typer.echo(json.dumps({"server": facts.server, "namespace": ns, "version": facts.version,
                               "can_submit": ok,
                               "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        _table(findings)
        typer.echo(f"\n{'a job can be submitted' if ok else 'a job cannot be submitted'} "
                   f"(namespace {ns})")
    raise typer.Exit(0 if ok else 1)


def _table(findings) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    table = Table("CHECK", "STATUS", "FINDING", "WHAT IT CHANGES / HOW TO FIX", box=None,
                  show_edge=False)
    for f in findings:
        detail = f.effect + (f" -- fix: {f.fix}" if f.fix else "")
        table.add_row(f.check, STATUS_MARK[f.status], f.finding, detail)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
