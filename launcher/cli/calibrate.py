"""`hvdk8s calibrate DIR... [-o FILE]`: fit the throughput model to measured runs."""

from __future__ import annotations

from pathlib import Path

import typer

from launcher.errors import UsageError
from launcher.formats import calibration_file
from launcher.timestamps import utc_now


def calibrate(
    dirs: list[str] = typer.Argument(None, metavar="DIR",
                                     help="Result directories of hvdk8s experiment run."),
    out: str = typer.Option(None, "-o", "--output", metavar="FILE",
                            help="Where to write the calibration (default: "
                            "$HVDK8S_HOME/calibration.json)."),
    preflights: list[str] = typer.Option(None, "--preflight", metavar="FILE",
                                         help="A job's `hvdk8s get JOB -o json` (or a list "
                                         "of them): its preflight's busbw per link kind "
                                         "gives the link bandwidths. Repeatable."),
):
    """Fit per-device compute rate, per-link bandwidth and per-step overhead to measured runs,
    print them with their uncertainty and the error before and after, write the file. With
    --preflight, the link bandwidths come from the preflights' measured busbw instead."""
    # lazy: every CLI start imports the command modules; the results store and the fit (pydantic
    # models, ~70 ms) load only for this one
    from launcher.experiments.results import ResultsStore
    from mpijob.perf.calibration import (
        CalibrationError,
        fit,
        predicted_images_per_sec,
        run_from_record,
        thin_groups,
    )

    if not dirs and not preflights:
        raise UsageError("DIR: give experiment result directories, or --preflight FILE")
    target = Path(out) if out else calibration_file.default_path()
    calibration_file.check_writable(target, "-o/--output")  # before the work, not after
    links = _preflight_links(preflights or [])
    if not dirs:
        from mpijob.perf.calibration import Calibration

        cal = Calibration(created=utc_now(), links=links,
                          sources=[str(Path(p).resolve()) for p in preflights])
        for link in cal.links:
            print(f"  link    {link.kind}: {link.gbs:.3g}{_pm(link.gbs_stderr, '.2g')} GB/s "
                  f"({link.runs} preflight figures)")
        calibration_file.save(cal, target)
        print(f"wrote {target}")
        return
    runs, skipped = [], 0
    frameworks: dict[str, int] = {}  # runs of programs other than the built-in benchmark
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise UsageError(f"DIR: {d}: not a directory; give experiment result directories")
        store = ResultsStore(root)
        records = list(store.latest().values())
        if not records:
            raise UsageError(f"DIR: {d}: no results.jsonl or results.csv with runs in it")
        for record in records:
            run = run_from_record(record)
            if run is None:
                skipped += 1
            else:
                runs.append(run)
                workload = (record.get("settings") or {}).get("workload")
                if (record.get("settings") or {}).get("framework") not in (None, "tensorflow"):
                    frameworks[workload or "another program"] = \
                        frameworks.get(workload or "another program", 0) + 1
    thin = thin_groups(runs)
    try:
        cal = fit(runs, sources=[str(Path(d).resolve()) for d in dirs],
                  created=utc_now(), skip_thin=True)
    except CalibrationError as exc:
        raise UsageError(f"cannot calibrate: {exc}") from None
    if links:  # measured on the link itself: over what the runs' step times imply
        kinds = {link.kind for link in links}
        cal = cal.model_copy(update={
            "links": [*links, *(link for link in cal.links if link.kind not in kinds)],
            "sources": [*cal.sources, *(str(Path(p).resolve()) for p in preflights)]})
    print(f"calibrated on {len(runs)} runs ({skipped} not usable: failed or without images/sec)")
    for device, model, precision, size in thin:
        print(f"  not fitted: {device} {model} {precision}{f' {size}px' if size else ''}: "
              "one one-rank run (a rate needs 2: two batch sizes or repetitions)")
    for workload, count in frameworks.items():
        print(f"  note: {count} runs measured {workload}, not the built-in TensorFlow "
              "benchmark: the rates are this machine's for that program")
    for c in cal.compute:
        size = f" {c.image_size}px" if c.image_size else ""
        print(f"  compute {c.device} {c.model} {c.precision}{size}: "
              f"{c.images_per_sec:,.2f}{_pm(c.images_per_sec_stderr, '.2f')} images/s per rank, "
              f"+{c.step_overhead_s * 1e3:.1f}{_pm(c.step_overhead_stderr, '.1f', 1e3)} ms per step "
              f"({c.runs} runs)")
    for link in cal.links:
        print(f"  link    {link.kind}: {link.gbs:.3g}{_pm(link.gbs_stderr, '.2g')} GB/s "
              f"({link.runs} runs)")
    if cal.multi_rank_overhead_s or cal.multi_rank_overhead_stderr:
        print(f"  overhead per multi-rank step: {cal.multi_rank_overhead_s * 1e3:.1f}"
              f"{_pm(cal.multi_rank_overhead_stderr, '.1f', 1e3)} ms")
    before = "n/a (no run had a prediction)" if cal.error_before is None else f"{cal.error_before:.1%}"
    print(f"  mean |predicted/measured - 1|: before {before}, after {cal.error_after:.1%}")
    for r in runs:
        if cal.rate(r.device, r.model, r.precision, r.image_size) is None:
            continue  # not fitted (said above)
        print(f"    {r.device} {r.model} b{r.batch_size} x{r.ranks}: measured "
              f"{r.images_per_sec:,.2f}, calibrated {predicted_images_per_sec(cal, r):,.2f}"
              + (f", uncalibrated {r.predicted_images_per_sec:,.2f}"
                 if r.predicted_images_per_sec else ""))
    calibration_file.save(cal, target)
    print(f"wrote {target}")


def _preflight_links(files: list[str]) -> list:
    """The link bandwidths of the preflights in `files` (get -o json: one job, a list of
    jobs, or JSON lines); a file without a judged figure is refused, saying why."""
    import json

    from mpijob.perf.preflight import fitted_links, measured_links

    reports: list[dict] = []
    for name in files:
        path = Path(name)
        try:
            text = path.read_text()
        except OSError as exc:
            raise UsageError(f"--preflight {name}: {exc.strerror}") from None
        try:
            data = json.loads(text)
            jobs = data if isinstance(data, list) else [data]
        except ValueError:
            try:
                jobs = [json.loads(line) for line in text.splitlines() if line.strip()]
            except ValueError:
                raise UsageError(f"--preflight {name}: not JSON; give the output of "
                                 "hvdk8s get JOB -o json") from None
        found = [p for job in jobs if isinstance(job, dict)
                 for p in ((job.get("preflight") or {}).get("paths") or [])]
        if not measured_links(found):
            raise UsageError(f"--preflight {name}: no preflight figure judged against a link "
                             "(a GPU job's, measured with its own NCCL); nothing to fit")
        reports += found
    return fitted_links(measured_links(reports))


def _pm(err, fmt: str, scale: float = 1.0) -> str:
    return "" if err is None else f" ± {err * scale:{fmt}}"


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
