"""`hvdk8s experiment run FILE` and `hvdk8s experiment report DIR`.

An experiment file declares a matrix of benchmark runs (benchmarks/experiments/README.md);
`run` goes through it, recording every run in DIR/results.csv and DIR/results.jsonl, and
`report` turns a results directory into tables and plots.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from launcher.cli import options as opt
from launcher.errors import UsageError, UserError
from launcher.formats import calibration_file
from launcher.output import dump_json, note
from mpijob.plural import plural

app = typer.Typer(no_args_is_help=True,
                  help="Batch experiments: a matrix of benchmark runs, their results and plots.")

DEFAULT_RESULTS_ROOT = Path("results")


def _resume_command(file: Path, out: Path, backend: str | None) -> str:
    words = ["hvdk8s", "experiment", "run", str(file), "--out", str(out)]
    if backend:
        words += ["--backend", backend]
    return shlex.join(words)


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="Experiment file (YAML)."),
    out: Path = typer.Option(None, "--out", help="Results directory "
                             "(default: results/<experiment name>/)."),
    rerun: bool = typer.Option(False, "--rerun", help="Run again the runs already recorded "
                               "as Succeeded (they are skipped otherwise)."),
    limit: int = typer.Option(None, "--limit", help="Run at most N of the runs still to do."),
    backend: opt.Backend = None,
    context: opt.Context = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="List the runs and whether they are "
                                 "done; submit nothing."),
    calibration: opt.Calibration = None,
):
    """Run every run of the matrix in turn and record each one; running it again resumes."""
    # lazy: every CLI start imports the command modules; the experiment modules (pydantic models,
    # ~70 ms) load only for these commands
    from launcher.experiments.progress import RichReporter
    from launcher.experiments.results import ResultsStore
    from launcher.experiments.runner import ExperimentRunner, Interrupted
    from launcher.experiments.spec import load_experiment

    if limit is not None and limit < 1:
        raise UsageError(f"--limit: expected a positive number of runs, got {limit}")
    loaded = load_experiment(file)
    out = out if out is not None else DEFAULT_RESULTS_ROOT / loaded.experiment.name
    store = ResultsStore(out)
    reporter = RichReporter()
    if calibration is not None:
        calibration_file.load(calibration)  # a bad file is refused before any run
    runner = ExperimentRunner(loaded, store, backend=backend, context=context, rerun=rerun,
                              calibration=calibration,
                              limit=limit, reporter=reporter)
    if dry_run:
        _print_plan(runner, store)
        return
    with store.lock():
        try:
            summary = runner.run()
        except Interrupted as stop:
            note(f"interrupted: {plural(stop.recorded, 'run')} recorded in {store.root} this time, "
                 f"{stop.remaining} not finished")
            if stop.left_running:
                note(f"could not delete: {', '.join(stop.left_running)} "
                     f"(hvdk8s delete NAME --backend {runner.backend_name})")
            note(f"resume with: {_resume_command(file, out, backend)}")
            raise typer.Exit(130) from None
    done = len(store.succeeded_ids() & {r.run_id for r in runner.runs()})
    from launcher.experiments.results import STATUSES

    counts = ", ".join(f"{summary.count(s)} {s}" for s in STATUSES if summary.count(s))
    note(f"experiment {loaded.experiment.name}: {plural(len(summary.recorded), 'run')} this time"
         f"{' (' + counts + ')' if counts else ''}; {done} of {summary.total} succeeded in all; "
         f"results in {store.csv_path} and {store.jsonl_path}")
    if done < summary.total and summary.recorded:
        note(f"run the rest or retry the failures with: {_resume_command(file, out, backend)}")
    note(f"report: hvdk8s experiment report {shlex.quote(str(out))}")
    if not summary.all_succeeded:
        raise typer.Exit(1)


def _print_plan(runner, store) -> None:
    from rich.table import Table

    from launcher.experiments.report import wide_console

    todo, skipped = runner.plan()
    todo_ids = {r.run_id for r in todo}
    latest = store.latest()
    table = Table(title=f"{runner.experiment.name}: {plural(len(runner.runs()), 'run')} "
                        f"({runner.backend_name} backend), {len(todo)} to run now")
    predicted = _predictions(runner)
    data = len({r.data for r in runner.runs()}) > 1  # the input column only when it varies
    for header in ("RUN ID", "MODEL", "WORKERS", "GPUS/W", "PLACEMENT", "BATCH", "PREC",
                   "IMAGE SIZE", *(["DATA"] if data else []), "REP",
                   *(["PREDICTED IMG/S"] if predicted else []),
                   "RECORDED", "NOW"):
        table.add_column(header)
    for r in runner.runs():
        recorded = latest.get(r.run_id, {}).get("status", "-")
        guess = [predicted.get(r.config_hash, "-")] if predicted else []
        table.add_row(r.run_id, r.model, str(r.workers), str(r.gpus), r.placement,
                      str(r.batch_size), r.precision, str(r.image_size or "-"),
                      *([r.data] if data else []), str(r.repetition), *guess, recorded,
                      "run" if r.run_id in todo_ids else "skip")
    wide_console().print(table)


def _predictions(runner) -> dict[str, str]:
    """Config hash -> predicted images/sec (or why not), planned on the cluster file."""
    if runner.loaded.cluster is None or runner.backend_name == "local":
        return {}
    from launcher.experiments.runner import submit_options
    from launcher.formats.clusterfile import load_cluster
    from launcher.pipeline.submitting import build_spec_from_options
    from launcher.preparing.planning import plan_job

    cluster = load_cluster(runner.loaded.cluster)
    out: dict[str, str] = {}
    for run in runner.runs():
        if run.config_hash in out:
            continue
        try:
            plan = plan_job(build_spec_from_options(submit_options(runner.loaded, run)), cluster)
        except UserError as exc:
            out[run.config_hash] = f"cannot place: {exc}"
            continue
        p = plan.prediction
        out[run.config_hash] = f"{p.images_per_sec:.0f}" if p is not None else "-"
    return out


@app.command("report")
def report(
    results_dir: Path = typer.Argument(..., help="Results directory of `experiment run`."),
    output: opt.ReportOutput = opt.TABLE,
    plots: opt.Plots = True,
):
    """Tables of the results and PNG plots (placement comparison, scaling, predicted)."""
    from launcher.experiments.report import build_report, print_report, write_plots

    result = build_report(results_dir)
    if plots:
        write_plots(result)
    if output == "json":
        typer.echo(dump_json(result.to_json()))
        return
    from launcher.experiments.report import wide_console

    print_report(result, wide_console())
