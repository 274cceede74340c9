"""`hvdk8s simulate`: placement policies compared on a whole cluster and a stream of jobs.

The simulation itself is pure (mpijob.perf.simulate, mpijob.perf.simworkload); this module reads the
cluster file and trace, shows progress, prints the comparison and writes DIR/summary.csv,
DIR/summary_extra.csv and the plots. rich and matplotlib are imported only when used.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from launcher.cli import options as opt
from launcher.errors import UsageError
from launcher.formats import calibration_file
from launcher.output import plain_when_piped
from mpijob.jobspec import defaults

DEFAULT_JOBS = 10_000
DEFAULT_NODES = 500
DEFAULT_LOAD = 0.7



def _shown(column: str, value: float) -> float:
    """A summary figure in the unit the table and plots share (simreport.UNITS)."""
    # lazy: simreport imports the simulator and perf model (~160 ms), which every CLI start
    # would pay for; they are loaded anyway once a simulation has run
    from launcher.formats.simreport import shown

    return shown(column, value)

def simulate(
    cluster: str = typer.Option(
        None, "--cluster",
        help="Cluster file (YAML/JSON, as for `hvdk8s plan`). Default: a generated cluster of "
        "--nodes 8-GPU nodes mixing DGX-1 V100, PCIe P100, DGX A100 and DGX H100 nodes.",
    ),
    # Defaults of None: an option given for what is not generated is refused, not ignored.
    nodes: int = typer.Option(None, "--nodes", show_default=False,
                              help=f"Nodes of the generated cluster (without --cluster; default {DEFAULT_NODES})."),
    jobs: int = typer.Option(None, "--jobs", show_default=False,
                             help=f"Jobs to generate (without --trace; default {DEFAULT_JOBS})."),
    trace: str = typer.Option(
        None, "--trace",
        help="CSV of jobs instead of generated ones: submit_s,gpus,gpus_per_worker,model,"
        "batch_size,work_images[,gpu_product].",
    ),
    seed: int = typer.Option(None, "--seed", show_default=False,
                             help="Seed of the generated job stream (without --trace; default 0)."),
    load: float = typer.Option(
        None, "--load", show_default=False,
        help="Offered load of the generated stream: GPU-time at perfect scaling / GPU capacity "
        f"(without --trace; default {DEFAULT_LOAD}).",
    ),
    precision: opt.Precision = defaults.PRECISION,
    policies: list[str] = typer.Option(
        None, "--policies",
        help="Policies to compare, comma-separated or repeated (default: topology,binpack,spread).",
    ),
    policy: list[str] = typer.Option(None, "--policy", help="Same as --policies."),
    out: str = typer.Option(None, "--out", help="Write DIR/summary.csv, DIR/summary_extra.csv "
                            "and PNG plots here."),
    plots: opt.Plots = True,
    backfill_depth: int = typer.Option(
        64, "--backfill-depth", help="Queued jobs looked at per event for backfilling."),
    calibration: opt.Calibration = None,
):
    """Compare placement policies on a simulated cluster: job completion, throughput, queueing.

    Writes DIR/summary.csv (one row per policy), summary_extra.csv and PNG plots.
    """
    # lazy: every CLI start imports the command modules; the simulator (pydantic models, ~70 ms),
    # rich and matplotlib load only for this one
    from mpijob.scheduling.placement import POLICIES

    chosen = _policies({"--policies": policies or [], "--policy": policy or []}, POLICIES)
    _refuse_unused(cluster=cluster, trace=trace, nodes=nodes, jobs=jobs, seed=seed, load=load)
    nodes = DEFAULT_NODES if nodes is None else nodes
    jobs = DEFAULT_JOBS if jobs is None else jobs
    seed = 0 if seed is None else seed
    load = DEFAULT_LOAD if load is None else load
    if nodes < 1:
        raise UsageError(f"--nodes: must be at least 1, got {nodes}")
    if jobs < 1:
        raise UsageError(f"--jobs: must be at least 1, got {jobs}")
    if not load > 0:
        raise UsageError(f"--load: must be greater than 0, got {load}")
    if backfill_depth < 0:
        raise UsageError(f"--backfill-depth: must be 0 or more, got {backfill_depth}")
    out_dir = _out_dir(out)
    cal, cal_source = calibration_file.load(calibration)
    if cal is not None:
        typer.echo(f"predictions use the calibration {cal_source} ({cal.runs} measured runs)",
                   err=True)

    from mpijob.perf import simworkload

    if cluster:
        from launcher.formats.clusterfile import load_cluster

        snapshot = load_cluster(cluster)
    else:
        snapshot = simworkload.default_cluster(nodes)
    stream = _read_trace(trace) if trace else simworkload.generate_jobs(
        jobs, seed=seed, cluster=snapshot, load=load, precision=precision)
    if not stream:
        raise UsageError(f"--trace: {trace}: no jobs")

    results, seconds = _run(snapshot, stream, chosen, precision, backfill_depth,
                            calibration_file.assumptions(cal, cal_source) if cal else None)
    _print(results, seconds, snapshot, stream)
    if out_dir is not None:
        _write(out_dir, results, plots)


def _policies(given: dict[str, list[str]], known: tuple[str, ...]) -> tuple[str, ...]:
    """The policies of --policies and --policy together; an error names the option used."""
    names = []
    for option, values in given.items():
        these = [p.strip() for v in values for p in v.split(",") if p.strip()]
        bad = [p for p in these if p not in known]
        if bad or (values and not these):
            raise UsageError(f"{option}: expected names from {', '.join(known)}, "
                             f"got {', '.join(map(repr, bad)) or 'none'}")
        names += these
    return tuple(dict.fromkeys(names or known))


def _refuse_unused(*, cluster, trace, nodes, jobs, seed, load) -> None:
    """Options for the generated cluster or job stream mean nothing with a file instead."""
    if cluster and nodes is not None:
        raise UsageError("--nodes: sizes the generated cluster; --cluster gives the nodes "
                         "(give one of them)")
    for option, value in (("--jobs", jobs), ("--seed", seed), ("--load", load)):
        if trace and value is not None:
            raise UsageError(f"{option}: shapes the generated job stream; --trace gives the "
                             "jobs (give one of them)")


def _out_dir(out: str | None) -> Path | None:
    if out is None:
        return None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create {out}: {exc.strerror or exc}") from None
    return path


def _read_trace(path: str):
    from mpijob.perf.simworkload import TraceError, parse_jobs_csv

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--trace: {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"--trace: {path}: cannot read: {exc.strerror or exc}") from None
    try:
        return parse_jobs_csv(text)
    except TraceError as exc:
        raise UsageError(f"--trace: {path}: {exc}") from None


def _run(snapshot, stream, policies, precision, backfill_depth, assumptions=None):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mpijob.perf.simulate import simulate as run_policy

    results, seconds = [], []
    console = Console(stderr=True)
    columns = (TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {p: progress.add_task(p, total=len(stream)) for p in policies}
        for p in policies:
            task = tasks[p]
            started = time.perf_counter()
            extra = {"assumptions": assumptions} if assumptions is not None else {}
            result = run_policy(snapshot, stream, p, precision=precision,
                                backfill_depth=backfill_depth, **extra,
                                progress=lambda n, task=task: progress.update(task, completed=n))
            seconds.append(time.perf_counter() - started)
            progress.update(task, completed=len(stream))
            results.append(result)
    return results, seconds


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _hours(seconds: float) -> str:
    return f"{_shown('mean_jct_s', seconds):,.2f}h"


def _percent(share: float, column: str = "gpu_utilization") -> str:
    return f"{_shown(column, share):.1f}%"


def why_utilisation(result, total_gpus: int) -> str:
    """Why utilisation is what it is, from the run: how much GPU time the jobs asked for while
    they arrived, against the GPUs there were, and whether any job had to wait."""
    done = [o for o in result.outcomes if o.dropped is None and o.ended_s is not None]
    if not done:
        return "util: no job completed"
    first, last = min(o.job.submit_s for o in done), max(o.job.submit_s for o in done)
    window = last - first
    if window <= 0 or total_gpus <= 0:
        return "util: all jobs arrived at once; utilisation is over the whole run"
    asked = sum(o.job.gpus * (o.ended_s - o.started_s) for o in done) / (total_gpus * window)
    m = result.summary
    after = max(0.0, asked - m.gpu_utilization)  # run after the last arrival: not counted
    if asked < 1:
        return (f"util is {_percent(m.gpu_utilization)} because the jobs need only "
                f"{_percent(asked)} of the {_count(total_gpus, 'GPU')} over the {_hours(window)} "
                f"of arrivals, {_percent(after)} of it after the last arrival (not counted); "
                f"mean queue {_hours(m.mean_queue_s)}: raise --load for a busier cluster")
    return (f"util is {_percent(m.gpu_utilization)}: the jobs need {_percent(asked)} of the "
            f"{_count(total_gpus, 'GPU')} over the {_hours(window)} of arrivals, so they queue "
            f"(mean {_hours(m.mean_queue_s)})")


def _print(results, seconds, snapshot, stream) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    gpus = sum(n.gpus for n in snapshot.nodes)
    title = (f"{_count(len(stream), 'job')} on {_count(len(snapshot.nodes), 'node')} "
             f"({_count(gpus, 'GPU')})")
    table = Table(title=title,
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("policy", "JCT mean", "JCT p95", "img/s/GPU", "util", "multi-node",
                 "queue", "eff."):
        table.add_column(name, justify="left" if name == "policy" else "right", no_wrap=True,
                         min_width=len(name))
    for r in results:
        m = r.summary
        table.add_row(m.policy, _hours(m.mean_jct_s), _hours(m.p95_jct_s),
                      f"{_shown('mean_images_per_sec_per_gpu', m.mean_images_per_sec_per_gpu):,.1f}",
                      _percent(m.gpu_utilization), _percent(m.multi_node_share, 'multi_node_share'), _hours(m.mean_queue_s),
                      f"{m.multi_gpu_scaling_efficiency:.0%}")
    console = Console(highlight=False)
    console.print(plain_when_piped(console, table))
    console.print("JCT: job completion time (submit to end); util: GPU utilisation; queue: "
                  "mean wait before start; "
                  "eff.: mean predicted scaling efficiency of the multi-GPU jobs.")
    if results:
        console.print(why_utilisation(max(results, key=lambda r: r.summary.gpu_utilization), gpus))
    for r, s in zip(results, seconds, strict=True):
        m = r.summary
        console.print(f"{m.policy}: {_count(m.jobs_completed, 'job')} done, {m.jobs_dropped:,} "
                      f"dropped (never fit), {_count(m.place_calls, 'placement call')}, {s:.1f} s")


def _write(out: Path, results, plots: bool) -> None:
    from launcher.formats import simreport

    summary = out / simreport.SUMMARY_FILE
    simreport.write_summary_csv(summary, results)
    extra = out / simreport.SUMMARY_EXTRA_FILE
    simreport.write_summary_extra_csv(extra, results)
    written = [summary, extra]
    if plots:
        written += simreport.write_plots(out, results)
    for path in written:
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
