"""`hvdk8s doctor`: what the cluster offers and what hvdk8s will do there."""

from __future__ import annotations

import dataclasses
import json

import typer

from launcher.cli import options as opt
from launcher.errors import UserError
from mpijob.findings import OK, WARN, Finding
from mpijob.plural import plural

STATUS_MARK = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL"}


def doctor(
    context: opt.Context = None,
    namespace: opt.Namespace = None,
    output: opt.ReportOutput = opt.TABLE,
):
    """Check the cluster: API version, your permissions, GPU nodes and labels, the topology
    agent, the MPI Operator, gang schedulers (Volcano, scheduler-plugins, Kueue, KAI, the
    Workload API) and DRA.
    With no cluster configured, this machine for the local backend: cores, memory, GPUs, MPI,
    Horovod and TensorFlow. Exit 0 when a job can be submitted, 1 otherwise."""
    from launcher.backends.select import kubernetes_configured
    from launcher.cli.common import require_kubernetes

    if context is None and not kubernetes_configured():
        _local(output)
    require_kubernetes(context, None)
    # lazy: every CLI start imports the command modules; the Kubernetes backend and rich's tables
    # load only for this one
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.backends.kubernetes.cluster_reads import gather
    from mpijob.scheduling.doctor import assess, can_submit

    backend = KubernetesBackend(context, namespace)
    ns = backend.namespace
    facts = gather(backend.client, ns)
    findings = assess(facts)
    card = None
    if facts.version is not None:
        card = _design_card(backend)
        findings.append(card.finding)
    ok = can_submit(findings)
    if output == "json":
        typer.echo(json.dumps({"server": facts.server, "namespace": ns, "version": facts.version,
                               "can_submit": ok,
                               "design_card": card.to_dict() if card is not None else None,
                               "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        _table(findings)
        if card is not None:
            typer.echo(f"\n{card.verdict}")
        typer.echo(f"\n{'a job can be submitted' if ok else 'a job cannot be submitted'} "
                   f"(namespace {ns})")
    raise typer.Exit(0 if ok else 1)


# The README's first command: what a newcomer runs first.
DESIGN_CARD = "hvdk8s submit mpi --workers 4 --gpus 1"


@dataclasses.dataclass(frozen=True)
class DesignCard:
    """The design-card command on this cluster: the mode --mode auto picks for it
    (mpijob.k8s.modes) and whether it is placed now."""

    mode: str
    why: str
    runs: bool
    placement: str
    finding: Finding

    @property
    def verdict(self) -> str:
        why = self.why.removeprefix(f"{self.mode} ")
        why = why[1:-1] if why.startswith("(") and why.endswith(")") else why
        return (f"{DESIGN_CARD} would run in {self.mode} mode, {self.placement} ({why})"
                if self.runs else f"{DESIGN_CARD} would not run now: {self.placement} "
                f"(in {self.mode} mode: {why})")

    def to_dict(self) -> dict:
        return {"command": DESIGN_CARD, "mode": self.mode, "why": self.why,
                "runs": self.runs, "placement": self.placement}


def _design_card(backend) -> DesignCard:
    from mpijob.jobspec.spec import build_spec
    from mpijob.k8s.modes import choose_mode
    from mpijob.scheduling.placement import PlacementRequest, place

    spec = build_spec(name="design-card", workers=4, gpus_per_worker=1,
                      namespace=backend.namespace)
    choice = choose_mode("auto", spec, backend.installed_modes(spec))
    mode = choice.mode or "pods"  # auto always has built-in pods to fall back on
    why = choice.line.removeprefix("mode: ")
    try:
        cluster = backend.cluster_for(spec, context=None)
    except UserError as exc:
        cluster, unread = None, str(exc)
    else:
        unread = "no GPU nodes readable: the scheduler would place it"
    if cluster is None:
        runs, where = True, unread
    else:
        placed = place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
        runs = placed.feasible
        where = (f"placed on {plural(placed.nodes_used, 'node')} now" if runs
                 else f"cannot be placed: {placed.reason}")
    finding = Finding("design card", OK if runs else WARN,
                      f"{DESIGN_CARD}: --mode auto picks {why}",
                      f"it would run ({where})" if runs else f"it would not run now: {where}")
    return DesignCard(mode, why, runs, where, finding)


def _local(output: str) -> None:
    """The local backend's doctor: what this machine offers a job."""
    from launcher.backends.local.gpus import gpu_state
    from launcher.backends.local.machine import this_machine
    from mpijob.scheduling.doctor import Finding

    m = this_machine()
    gpus = gpu_state()  # the answer submit, plan and top node give too
    gib = f"{m.memory_bytes / 2**30:.1f} GiB" if m.memory_bytes else "unknown"
    findings = [
        Finding("backend", "info", "local: no kubeconfig configured and not in a pod",
                "jobs run on this machine", "configure a kubectl context (or --kubeconfig FILE) "
                "for a cluster"),
        Finding("cpu", "ok", f"{m.cores} cores, {m.usable_cores} usable by this process",
                m.cpu_binding),
        Finding("memory", "ok" if m.memory_bytes else "info", gib),
        _gpu_finding(Finding, gpus),
        Finding("mpi", "ok" if m.mpirun else "fail", m.mpi or "mpirun is not on PATH",
                "" if m.mpirun else "no job can start here", "" if m.mpirun else
                "apt-get install openmpi-bin libopenmpi-dev"),
        Finding("horovod", "ok" if m.horovod else "warn", m.horovod or "not installed",
                "" if m.horovod else "the built-in benchmark needs it", "" if m.horovod else
                "bash scripts/setup.sh"),
        Finding("tensorflow", "ok" if m.tensorflow else "warn", m.tensorflow or "not installed",
                "" if m.tensorflow else "the built-in benchmark needs it", "" if m.tensorflow
                else "bash scripts/setup.sh"),
    ]
    ok = m.mpirun is not None
    gpu_jobs = ok and bool(gpus.free)
    if output == "json":
        typer.echo(json.dumps({"backend": "local", "node": m.node, "machine": m.to_dict(),
                               "can_submit": ok, "can_submit_gpu_job": gpu_jobs,
                               "free_gpus": list(gpus.free),
                               "taken_gpus": {str(i): who for i, who in sorted(gpus.taken.items())},
                               "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        _table(findings)
        if ok and gpus.count and not gpus.free:
            verdict = (f"a job can be submitted with --gpus 0 only: 0 of "
                       f"{plural(gpus.count, 'GPU')} free")
        else:
            verdict = 'a job can be submitted' if ok else 'a job cannot be submitted'
        typer.echo(f"\n{verdict} (local backend, {m.node})")
    raise typer.Exit(0 if ok else 1)


def _gpu_finding(finding, gpus):
    """This machine's GPUs: how many, which are free, who holds the others."""
    if not gpus.count:
        return finding("gpus", "info", "none visible (no NVML or no driver)",
                       "--gpus N>0 needs GPUs here")
    free, n = len(gpus.free), gpus.count
    text = f"{plural(n, 'NVIDIA GPU')}, {free} free"
    if gpus.taken:
        text += f" (taken: {gpus.taken_text()})"
    if not free:
        return finding("gpus", "warn", f"0 of {plural(n, 'GPU')} free (taken: {gpus.taken_text()})",
                       "--gpus N>0 jobs are refused until one is free", "wait for them, or "
                       "run on the CPU with --gpus 0")
    return finding("gpus", "ok", text, "--gpus N jobs are placed on the free ones by NVLink "
                   "topology")


def _table(findings) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    table = Table("CHECK", "STATUS", "FINDING", "WHAT IT CHANGES / HOW TO FIX", box=None,
                  show_edge=False)
    for column in table.columns:  # a command or URL longer than the column continues on
        column.overflow = "fold"  # the next line, never cut with "..." (80 columns)
    for f in findings:
        detail = f.effect + (f" -- fix: {f.fix}" if f.fix else "")
        table.add_row(f.check, STATUS_MARK[f.status], f.finding, detail)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
