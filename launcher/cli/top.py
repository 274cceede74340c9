"""`hvdk8s top node` and `hvdk8s top job`: who holds which GPUs, and what is still free.

A free NVLink group is a maximal set of free GPUs of one node that are pairwise joined by
NVLink: the GPUs a multi-GPU worker can get without any rank pair falling back to PCIe.
"""

from __future__ import annotations

from collections import defaultdict

import typer

from launcher.cli import options as opt
from launcher.cli.common import TOP_NODE_HINT, require_kubernetes
from launcher.errors import UserError
from launcher.output import emit_data, note
from mpijob.scheduling.links import is_nvlink

app = typer.Typer(no_args_is_help=True, help="GPU usage per node or per job.")


# --- pure helpers -----------------------------------------------------------------------------
def free_nvlink_groups(topology, free) -> list[tuple[int, ...]]:
    """Maximal cliques (size >= 2) of the NVLink graph restricted to the free GPUs, largest
    first (Bron-Kerbosch with pivoting; nodes have at most 16 GPUs)."""
    free = sorted(free)
    adj = {i: {j for j in free if j != i and is_nvlink(topology.link(i, j))} for i in free}
    cliques: list[tuple[int, ...]] = []

    def expand(r: set[int], p: set[int], x: set[int]) -> None:
        if not p and not x:
            if len(r) >= 2:
                cliques.append(tuple(sorted(r)))
            return
        pivot = max(p | x, key=lambda u: len(adj[u] & p))
        for v in sorted(p - adj[pivot]):
            expand(r | {v}, p & adj[v], x & adj[v])
            p = p - {v}
            x = x | {v}

    expand(set(), set(free), set())
    return sorted(cliques, key=lambda c: (-len(c), c))


def _ranges(indices) -> str:
    """(0, 1, 2, 3, 6) -> '0-3,6'."""
    out, run = [], []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)))
    return ",".join(out) or "-"


def node_rows(cluster, measured: dict[str, bool] | None = None, *, detail: bool = False) -> list[dict]:
    # lazy: every CLI start imports the command modules; the Kubernetes backend, cluster files and
    # rich's tables load only for this one
    from launcher.backends.kubernetes.snapshot import UNSCHEDULABLE_TAINT

    rows = []
    for n in cluster.nodes:
        free = n.free_gpus
        row = {
            "node": n.name,
            "gpu_model": n.gpu_model,
            "gpus": n.gpus,
            "allocated": sorted(n.allocated),
            "free": list(free),
            "free_nvlink_groups": [list(g) for g in free_nvlink_groups(n.topology, free)],
            "ready": n.ready,
            "cordoned": any(t.key == UNSCHEDULABLE_TAINT for t in n.taints),
            "topology_source": ("file" if measured is None else
                                "agent" if measured.get(n.name) else "preset"),
            "zone": n.network.zone, "block": n.network.block, "rack": n.network.rack,
            "rdma": [{"resource": r.name, "kind": r.kind, "allocatable": r.allocatable,
                      "free": r.free} for r in n.rdma],
            "nvlink_domain": n.nvlink_domain,
        }
        if detail:
            row["links"] = [list(r) for r in n.topology.links]
        rows.append(row)
    return rows


def _rdma_text(resources: list[dict]) -> str:
    return " ".join(f"{r['resource']} {r['free']}/{r['allocatable']}" for r in resources) or "-"


def job_rows(pods, namespace: str | None) -> list[dict]:
    jobs: dict[tuple[str, str], dict] = {}
    for p in pods:
        if namespace is not None and p.namespace != namespace:
            continue
        key = (p.namespace, p.job or f"(pod {p.name})")
        row = jobs.setdefault(key, {"job": key[1], "namespace": p.namespace, "gpus": 0,
                                    "pods": 0, "nodes": defaultdict(list)})
        row["gpus"] += p.gpus
        row["pods"] += 1
        row["nodes"][p.node].extend(p.indices)
    out = []
    for _, row in sorted(jobs.items()):
        row["nodes"] = {node: sorted(ix) for node, ix in sorted(row["nodes"].items())}
        out.append(row)
    return out


# --- commands ---------------------------------------------------------------------------------
def _snapshot(context: str | None, namespace: str | None, *, offline: str | None = None):
    """The live cluster; `offline` names what the command could read instead of one."""
    from launcher.backends.kubernetes.backend import KubernetesBackend

    require_kubernetes(context, offline)
    return KubernetesBackend(context, namespace).snapshot()


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _name_column(console, header: str):
    """Names are what a reader greps for: never cut off with '…'. Piped, each stays whole on
    its line; on a terminal too narrow for the table it is folded, not cut."""
    from rich.table import Column

    return Column(header, no_wrap=not console.is_terminal, overflow="fold")


def _print_table(console, table) -> None:
    """Piped output (not a terminal) would be cut to 80 columns: give it the room it needs,
    in plain columns as `list` prints them (box characters are for people)."""
    if not console.is_terminal:
        table.box, table.show_edge = None, False
        wide = console.options.update_width(10_000)
        console.width = max(200, console.measure(table, options=wide).maximum)
    console.print(table)


def _matrix(row: dict) -> str:
    taken = set(row["allocated"])
    head = ["", *(f"GPU{j}{'*' if j in taken else ''}" for j in range(row["gpus"]))]
    table = [head] + [[head[i + 1], *links] for i, links in enumerate(row["links"])]
    widths = [max(len(r[c]) for r in table) for c in range(len(head))]
    return "\n".join("  ".join(c.ljust(widths[k]) for k, c in enumerate(r)).rstrip() for r in table)


@app.command("node")
def top_node(
    detail: bool = typer.Option(False, "-d", "--detail", help="Also print each node's GPU "
                                "link matrix (* marks allocated GPUs)."),
    cluster: opt.Cluster = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    output: opt.WideOutput = opt.TABLE,
):
    """GPUs per node: total, allocated, free, the free NVLink groups and free RDMA
    devices. With the local
    backend (no cluster configured, or --backend local): this machine's cores, memory and
    GPUs, and what its jobs hold."""
    if not cluster and _local(backend, context, TOP_NODE_HINT):
        _local_node(output)
        return
    if cluster:
        from launcher.formats.clusterfile import load_cluster

        nodes, measured, notes = load_cluster(cluster), None, ()
    else:
        snap = _snapshot(context, None, offline=TOP_NODE_HINT)
        nodes, measured, notes = snap.cluster, snap.measured, snap.notes
    from launcher.cli.top_network import group_rows, partition_rows, print_groups, print_partitions

    rows = node_rows(nodes, measured, detail=detail)
    groups_by_network = group_rows(nodes)
    partitions = partition_rows(nodes)
    if emit_data({"nodes": rows, "network_groups": groups_by_network,
                  **({"nvlink_partitions": partitions} if partitions else {}),
                  "notes": list(notes)}, output):
        return
    from rich.table import Table

    console = _console()
    wide = output == "wide"  # + where each node sits in the network
    rdma = any(r["rdma"] for r in rows)  # the column only where some node offers RDMA
    table = Table(_name_column(console, "NODE"), _name_column(console, "MODEL"), "GPUS",
                  "ALLOCATED", "FREE", "FREE NVLINK GROUPS", *(["FREE RDMA"] if rdma else []),
                  "STATUS", "TOPOLOGY", *(("ZONE", "BLOCK", "RACK") if wide else ()))
    for r in rows:
        status = "Ready" if r["ready"] else "NotReady"
        if r["cordoned"]:
            status += ",Cordoned"
        groups = " ".join("{" + _ranges(g) + "}" for g in r["free_nvlink_groups"]) or "-"
        table.add_row(r["node"], r["gpu_model"], str(r["gpus"]),
                      f"{len(r['allocated'])} ({_ranges(r['allocated'])})",
                      f"{len(r['free'])} ({_ranges(r['free'])})", groups,
                      *([_rdma_text(r["rdma"])] if rdma else []), status, r["topology_source"],
                      *((r["zone"] or "-", r["block"] or "-", r["rack"] or "-") if wide else ()))
    _print_table(console, table)
    print_partitions(console, partitions, _print_table)
    print_groups(console, groups_by_network, _print_table)
    if detail:
        for r in rows:
            if r["gpus"]:
                console.print(f"[bold]{r['node']}[/bold]")
                console.print(_matrix(r), markup=False)
    for line in notes:
        note(f"note: {line}")


@app.command("job")
def top_job(
    namespace: opt.Namespace = None,
    all_namespaces: opt.AllNamespaces = False,
    context: opt.Context = None,
    backend: opt.Backend = None,
    output: opt.WideOutput = opt.TABLE,
):
    """GPUs held per job (jobs from the pods' labels), with the nodes and GPU indices. With
    the local backend: the ranks and GPUs of this machine's running jobs."""
    if _local(backend, context, None):
        _local_jobs(namespace, all_namespaces, output)
        return
    from launcher.backends.kubernetes.backend import KubernetesBackend

    # No --cluster here: a cluster file has nodes, not jobs.
    snap = _snapshot(context, namespace)
    ns = None if all_namespaces else (namespace or KubernetesBackend(context, namespace).namespace)
    rows = job_rows(snap.pods, ns)
    from launcher.backends.kubernetes import elastic

    # Elastic jobs: the workers running of the size asked (the rest show "-").
    backend = KubernetesBackend(context, namespace)
    sizes = elastic.current_sizes(backend.client, ns)
    # Progress of the running jobs: `list`'s statuses (one read of each launcher's log tail).
    try:
        statuses = {(s.namespace, s.name): s for s in backend.list(ns, all_namespaces, live=True)}
    except UserError as exc:  # the jobs' objects not readable to this user: GPUs only
        note(f"note: no progress shown: {exc}")
        statuses = {}
    for r in rows:
        if (r["namespace"], r["job"]) in sizes:
            r["size"] = sizes[(r["namespace"], r["job"])]
        _add_progress(r, statuses.get((r["namespace"], r["job"])))
    if emit_data({"jobs": [{k: v for k, v in r.items() if k != "progress_cells"} for r in rows],
                   "notes": list(snap.notes)}, output):
        return
    from rich.table import Column, Table

    console = _console()
    table = Table(_name_column(console, "JOB"), _name_column(console, "NAMESPACE"), "PODS",
                  "GPUS", "SIZE", *PROGRESS_COLUMNS, Column("NODES (GPU indices)", overflow="fold"))
    for r in rows:
        where = " ".join(f"{node}[{_ranges(ix)}]" for node, ix in r["nodes"].items())
        table.add_row(r["job"], r["namespace"], str(r["pods"]), str(r["gpus"]),
                      r.get("size", "-"), *r["progress_cells"], where)
    _print_table(console, table)
    for line in snap.notes:
        note(f"note: {line}")


PROGRESS_COLUMNS = ("STEP", "IMAGES/SEC", "PREDICTED", "RATIO", "ETA", "LAST STEP")


def _add_progress(row: dict, status) -> None:
    """The job's progress from its ranks' reports, as `list -o wide` shows it."""
    from launcher.cli.common import measured_rate, progress_cells

    if status is None:
        row["progress"], row["progress_cells"] = None, ("-",) * len(PROGRESS_COLUMNS)
        return
    step, predicted, ratio, eta, last = progress_cells(status)
    rate = measured_rate(status)
    row["progress"] = status.progress.to_dict() if status.progress else None
    row["progress_cells"] = (step, "-" if rate is None else f"{rate:.1f}", predicted, ratio,
                             eta, last)


# --- the local backend ------------------------------------------------------------------------
def _local(backend: str | None, context: str | None, hint: str | None) -> bool:
    """Whether this command looks at this machine: asked for, or nothing names a cluster
    (launcher.backends.select: a cluster given but unusable is an error, not this machine)."""
    from launcher.backends.select import resolve_backend_name

    return resolve_backend_name(backend, context, hint=hint)[0] == "local"


def _running_local_jobs(namespace: str | None, all_namespaces: bool):
    from launcher.backends.local.backend import LocalBackend

    return [s for s in LocalBackend().list(namespace, all_namespaces) if not s.done]


def _local_node(output: str) -> None:
    from launcher.backends.local.gpus import gpu_state
    from launcher.backends.local.machine import this_machine

    m = this_machine()
    # The answer submit, plan and doctor give too: hvdk8s jobs, other programs, MIG.
    state = gpu_state()
    held = sorted(state.taken)
    row = {"node": m.node, "backend": "local", "cores": m.cores, "usable_cores": m.usable_cores,
           "memory_bytes": m.memory_bytes, "gpus": state.count, "allocated": held,
           "free": list(state.free), "ready": True,
           "taken_by": {str(i): who for i, who in sorted(state.taken.items())}}
    if emit_data({"nodes": [row]}, output):
        return
    memory = f"{m.memory_bytes / 2**30:.1f}Gi" if m.memory_bytes else "-"
    header = ["NODE", "CORES", "MEMORY", "GPUS", "ALLOCATED", "FREE", "BACKEND"]
    cells = [m.node, f"{m.usable_cores}/{m.cores}", memory, str(state.count),
             f"{len(held)} ({_ranges(held)})", f"{len(row['free'])} ({_ranges(row['free'])})",
             "local"]
    if output == "wide":
        header.append("CPU BINDING")
        cells.append(m.cpu_binding)
    _plain(header, [cells])
    if state.taken:
        typer.echo(f"taken: {state.taken_text()}")


def _local_jobs(namespace: str | None, all_namespaces: bool, output: str) -> None:
    rows = []
    for s in _running_local_jobs(namespace, all_namespaces):
        nodes = {p["node"]: list(p.get("gpus") or []) for p in s.placement if p.get("node")}
        rows.append({"job": s.name, "namespace": s.namespace, "gpus": s.workers * s.gpus_per_worker,
                     "ranks": len(s.replicas), "nodes": nodes, "phase": s.phase})
        _add_progress(rows[-1], s)
    if emit_data({"jobs": [{k: v for k, v in r.items() if k != "progress_cells"} for r in rows],
                   "backend": "local"}, output):
        return
    if not rows:
        typer.echo("No running jobs found." if all_namespaces else
                   f"No running jobs found in namespace {namespace or 'default'}.", err=True)
        return
    _plain(["JOB", "NAMESPACE", "PHASE", "RANKS", "GPUS", *PROGRESS_COLUMNS,
            "NODES (GPU indices)"],
           [[r["job"], r["namespace"], r["phase"], str(r["ranks"]), str(r["gpus"]),
             *r["progress_cells"],
             " ".join(f"{n}[{_ranges(ix) or '-'}]" for n, ix in r["nodes"].items())]
            for r in rows])


def _plain(header: list[str], rows: list[list[str]]) -> None:
    """kubectl's plain columns (as `list` prints them)."""
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    typer.echo("\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                         for r in table))
