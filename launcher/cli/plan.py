"""`hvdk8s plan`: where a job would go, why, and how fast it would train there.

Kept light on purpose: this module imports only typer at load time; the placement core,
the cluster file reader, rich (tables) and the Kubernetes client are imported when used,
so `hvdk8s plan --cluster FILE -o json` stays a fast whole-process command.
"""

from __future__ import annotations

from typing import Annotated

import typer

from launcher.cli import options as opt
from launcher.cli.spec_options import JobOptionsCommand, job_options
from launcher.errors import UsageError
from launcher.formats import calibration_file
from launcher.output import emit_data, plain_when_piped
from mpijob.errors import SpecError
from mpijob.jobspec import defaults
from mpijob.plural import plural

# The job options plan takes (declared on the spec: launcher.cli.spec_options).
PLAN_OPTIONS = ("workers", "gpus_per_worker", "placement_policy", "node_selector", "tolerations",
                "cpu", "memory", "benchmark.model", "benchmark.batch_size", "cross_zone",
                "rdma", "queue", "min_workers", "max_workers")


@job_options(PLAN_OPTIONS, required=("workers", "gpus_per_worker"))
def plan(
    cluster: opt.Cluster = None,
    gputopology: opt.GpuTopology = False,
    precision: opt.Precision = defaults.PRECISION,
    compare: Annotated[bool, typer.Option(
        "--compare", help="Show every placement policy side by side.")] = False,
    context: opt.Context = None,
    output: opt.Output = opt.TABLE,
    calibration: opt.Calibration = None,
    *,
    job: dict,
):
    """Show the nodes and GPUs a job would get, why, and the predicted images/sec.

    Exit status 0 when the job fits, 1 when it does not (the output says why). The cluster
    file format (--cluster FILE), with an annotated example: docs/cluster-file.md. With no
    cluster configured, this machine: its free GPUs, as submit, top node and doctor see them."""
    opt.placement_policy(job.get("placement_policy"), gputopology)  # they must agree
    # --queue: only where the job would go (a MultiKueue queue is placed by its worker
    # cluster); the plan asks no gang scheduler, so the spec does not take it
    queue = job.pop("queue", None)
    spec = _check_job(job, precision)
    policy, model, batch_size = spec.placement_policy, spec.benchmark.model, spec.benchmark.batch_size
    # lazy: every CLI start imports the command modules; placement, the perf model and cluster files
    # (pydantic models, ~70 ms) load only for this one
    from mpijob.scheduling.placement import PlacementRequest, place

    cal, cal_source = calibration_file.load(calibration)
    assumptions = calibration_file.assumptions(cal, cal_source) if cal is not None else None
    if queue and not cluster:
        worker, why = _multikueue(queue, context)
        if why is not None:
            typer.echo(why)
            if worker is None:  # nothing to place on: the worker cluster is Kueue's choice
                return
            context = worker
    snapshot = _load_cluster(cluster, context)
    elastic_lines: tuple[str, ...] = ()
    if spec.elastic:  # placed for the workers it starts with (elastic_plan)
        from launcher.preparing.elastic_plan import plan_elastic

        elastic = plan_elastic(spec, snapshot, calibration_file.assumptions(cal, cal_source))
        elastic_lines = elastic.lines
        spec = spec.model_copy(update={"workers": elastic.plan_workers})
    request = PlacementRequest.from_spec(spec)

    policies = defaults.PLACEMENT_POLICIES if compare else (policy,)
    results = []
    for p in policies:
        result = place(snapshot, request, p)
        data = result.to_json()
        unchecked = _unchecked_resources(request, result, snapshot, from_file=bool(cluster))
        if unchecked:
            data["explanation"].append(unchecked)
        planned = _planned(data, spec, result, snapshot, assumptions)
        planned["explanation"].extend(elastic_lines)
        results.append((result, planned))
    if compare:
        results.extend(_split_what_if(results, spec, snapshot, assumptions))

    if compare:
        payload = {"compare": [d for _, d in results]}
    else:
        payload = results[0][1]
    if output == "table":
        _print_tables(results, compare, request, model, batch_size, precision)
    else:
        emit_data(payload, output)
    if not any(r.feasible for r, _ in results):
        raise typer.Exit(1)


def _planned(data: dict, spec, result, snapshot, assumptions) -> dict:
    """A placement's JSON with what submit's plan makes of it (launcher.preparing.planning.
    plan_placed): the network, the prediction and what each worker pod requests."""
    data["prediction"] = None
    if not result.feasible:
        data["worker_requests"] = []
        return data
    from launcher.preparing.planning import plan_placed
    from mpijob.k8s.workload import pod_requests

    planned = plan_placed(spec, snapshot, result, assumptions)
    if planned.prediction is not None:
        data["prediction"] = planned.prediction.to_json()
    network = planned.network
    if network is not None:
        data["explanation"].extend(network.lines)
        if network.warning:
            data["explanation"].append(f"warning: {network.warning}")
        data["network"] = _network_json(network)
    data["explanation"].extend(planned.notes)
    data["worker_requests"] = []
    elastic = planned.spec.elastic  # one pod a worker, from one template (workload.py)
    for a in result.assignments:  # as submit renders them (built-in mode)
        shares = planned.decisions.worker_shares
        r = (pod_requests(planned.spec, shares, None, planned.spec.gpus_per_worker or 1, 1)
             if elastic else pod_requests(planned.spec, shares, a.node, a.slots, a.workers))
        data["worker_requests"].append({"node": a.node, "cpu": r.cpu, "memory": r.memory,
                                        "memory_limit": r.memory_limit, "source": r.source,
                                        "per": "worker pod" if elastic else "node pod"})
    return data


def _split_what_if(results, spec, snapshot, assumptions) -> list:
    """The topology placement inside one NVLink partition, against the same pods over two
    (mpijob.scheduling.placement_nvlink.split_in_two): what the partition is worth."""
    from mpijob.scheduling.placement_nvlink import split_in_two

    for result, _ in results:
        alt = split_in_two(snapshot, result) if result.policy == "topology" else None
        if alt is not None:
            return [(alt, _planned(alt.to_json(), spec, alt, snapshot, assumptions))]
    return []


def _check_job(job: dict, precision: str):
    """The job's spec, after the checks `submit` makes, with its messages: a plan of a job
    that submit refuses would be a plan of nothing."""
    from mpijob.jobspec.spec import build_spec, fields_from_options

    try:
        fields = fields_from_options({**job, "benchmark.use_fp16": precision == "fp16"})
        return build_spec(name="plan", **fields)
    except SpecError as err:
        raise UsageError.naming_option(err) from None


def _unchecked_resources(request, result, snapshot, *, from_file: bool) -> str | None:
    """A note when cpu/memory were asked for but the nodes give no capacity to check."""
    asked = [(what, attr) for what, attr, amount in (
        ("cpu", "free_cpu", request.cpu_per_worker),
        ("memory", "free_memory", request.memory_per_worker),
    ) if amount is not None]
    if not asked:
        return None
    used = {a.node for a in result.assignments}
    nodes = [n for n in snapshot.nodes if n.name in used] if result.feasible else list(snapshot.nodes)
    unknown = [n for n in nodes if any(getattr(n, attr) is None for _, attr in asked)]
    if not unknown:
        return None
    what = "/".join(w for w, attr in asked if any(getattr(n, attr) is None for n in unknown))
    source = "the cluster file" if from_file else "the cluster"
    return f"{what} not checked: {source} gives no capacity for {plural(len(unknown), 'node')}"


def _multikueue(queue: str, context: str | None) -> tuple[str | None, str | None]:
    """Where a MultiKueue queue's job is planned (launcher.backends.kubernetes)."""
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.cli.common import PLAN_HINT, require_kubernetes

    require_kubernetes(context, PLAN_HINT)
    backend = KubernetesBackend(context)  # the queue of the context's namespace
    return backend.multikueue_target(queue, backend.namespace)


def _load_cluster(path: str | None, context: str | None):
    if path:
        from launcher.formats.clusterfile import load_cluster

        return load_cluster(path)
    try:
        from launcher.backends.kubernetes.backend import cluster_snapshot
    except ImportError:
        cluster_snapshot = None
    if cluster_snapshot is None:
        raise UsageError("no --cluster given and no Kubernetes backend available: pass --cluster FILE")
    from launcher.backends.select import kubernetes_configured

    if context is None and not kubernetes_configured():
        # No cluster: this machine, as submit's local backend sees it (its free GPUs).
        from launcher.backends.local.gpus import local_cluster

        cluster, state = local_cluster()
        typer.echo("note: no cluster configured: planning on this machine (local backend)"
                   + (f"; taken: {state.taken_text()}" if state.taken else ""), err=True)
        return cluster
    from launcher.cli.common import PLAN_HINT, require_kubernetes

    require_kubernetes(context, PLAN_HINT)
    return cluster_snapshot(context=context, namespace=None)


def _network_json(network) -> dict:
    d = network.decision
    out = {"transport": d.transport, "reason": d.reason,
           "rdma_resource": d.resource.name if d.resource else None}
    if network.alternative is not None:
        out["rdma_images_per_sec"] = network.alternative.images_per_sec
    if d.pairing is not None:
        out["nic_pairs"] = {**d.pairing.to_json(), "used": d.paired}
        if d.pairing_note:
            out["nic_pairs"]["note"] = d.pairing_note
    return out


# --- tables for people --------------------------------------------------------------------
def _print_tables(results, compare, request, model, batch_size, precision) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:  # piped or captured: don't squeeze the table into 80 columns
        console.width = 160
    what = (f"{request.workers} worker{'s' if request.workers != 1 else ''} x "
            f"{request.gpus_per_worker} GPU{'s' if request.gpus_per_worker != 1 else ''}")
    if compare:
        table = Table(title=f"Placement policies for {what}; {model}, batch {batch_size}, "
                            f"{precision}; times in ms per step")
        numeric = ("nodes", "pods", "images/s", "step", "compute", "allreduce", "efficiency")
        for col in ("policy", "fits", "nodes", "pods", "placement", *numeric[2:]):
            table.add_column(col, justify="right" if col in numeric else "left")
        for result, data in results:
            pred = data["prediction"]
            table.add_row(
                result.policy,
                "yes" if result.feasible else "no",
                str(result.nodes_used) if result.feasible else "-",
                str(len(result.assignments)) if result.feasible else "-",
                _placement_text(result) if result.feasible else "-",
                f"{pred['images_per_sec']:,.0f}" if pred else "-",
                *(_ms(pred, key) for key in ("step_seconds", "compute_seconds", "allreduce_seconds")),
                f"{pred['scaling_efficiency']:.0%}" if pred else "-",
            )
        console.print(plain_when_piped(console, table))
        for result, data in results:
            pred = data["prediction"]
            if pred:
                console.print(f"  {result.policy}: bottleneck {pred['bottleneck']}")
            elif not result.feasible:
                console.print(f"  {result.policy}: does not fit: {result.reason}")
            for line in data["explanation"][len(result.explanation):]:  # the plan's own notes
                console.print(f"  {result.policy}: {line}", markup=False)
        return
    result, data = results[0]
    if not result.feasible:
        console.print(f"[bold red]does not fit[/] ({result.policy}): {result.reason}")
        return
    table = Table(title=f"Plan for {what} ({result.policy}): {result.nodes_used} "
                        f"node{'s' if result.nodes_used != 1 else ''}")
    table.add_column("node")
    table.add_column("workers", justify="right")
    table.add_column("GPUs")
    table.add_column("CPU", justify="right")
    table.add_column("memory", justify="right")
    requests = data["worker_requests"]
    for a, req in zip(result.assignments, requests, strict=True):
        each = " each" if req.get("per") == "worker pod" else ""  # elastic: one pod a worker
        table.add_row(a.node, str(a.workers), ",".join(map(str, a.gpus)) or "-",
                      f"{req['cpu'] or '-'}{each}", f"{req['memory'] or '-'}{each}"
                      + (f" (limit {req['memory_limit']})" if req["memory_limit"] else ""))
    console.print(plain_when_piped(console, table))
    for source in dict.fromkeys(r["source"] for r in requests if r["source"]):
        console.print(f"  requests: {source}", markup=False)
    if requests:
        console.print(f"  memory limit: the request plus /dev/shm (--shm-size, default "
                      f"{defaults.SHM_SIZE}), which is memory-backed", markup=False)
    for line in data["explanation"]:  # the placement's, then the plan's own notes
        console.print(f"  {line}", markup=False)
    if result.nvlink_domain and result.nodes_used > 1:
        console.print(f"  NVLink partition {result.nvlink_domain}: "
                      + ("a ComputeDomain gives the workers its IMEX channel" if result.compute_domain
                         else "the cluster serves no ComputeDomain, so no cross-node NVLink"),
                      markup=False)
    pred = data["prediction"]
    if pred:
        ips = pred["images_per_sec"]
        console.print(
            f"predicted {ips:,.{0 if ips >= 100 else 1}f} images/s ({model}, batch {batch_size}, "
            f"{precision}), scaling efficiency {pred['scaling_efficiency']:.0%}, "
            f"bottleneck: {pred['bottleneck']}"
        )
        console.print(
            f"  step {_ms(pred, 'step_seconds')} ms: compute {_ms(pred, 'compute_seconds')} ms, "
            f"slowest rank +{_ms(pred, 'straggler_seconds')} ms, allreduce "
            f"{_ms(pred, 'allreduce_seconds')} ms of which {_ms(pred, 'exposed_allreduce_seconds')} "
            f"ms after the backward pass; {pred.get('algorithm', '')}"
        )
        for line in pred.get("notes", []):
            if line.startswith(("calibration", "NVLink", "the job's nodes")):
                console.print(f"  {line}", markup=False)


def _ms(pred: dict | None, key: str) -> str:
    return f"{pred[key] * 1000:,.0f}" if pred and pred.get(key) is not None else "-"


def _placement_text(result) -> str:
    by_node: dict[str, list[int]] = {}
    for a in result.assignments:
        by_node.setdefault(a.node, []).extend(a.gpus)
    parts = [f"{n}[{','.join(map(str, g))}]" for n, g in by_node.items()]
    if len(parts) > 4:
        parts = parts[:3] + [f"... {len(parts) - 3} more nodes"]
    return "; ".join(parts)


def register(app: typer.Typer) -> None:
    app.command("plan", cls=JobOptionsCommand)(plan)
