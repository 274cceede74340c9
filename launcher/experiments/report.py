"""`hvdk8s experiment report DIR`: tables, and the PNG plots that compare the runs.

    placement.png  images/sec by placement policy, per model (topology-aware vs the rest)
    scaling.png    images/sec and scaling efficiency against the number of workers
    predicted.png  measured against predicted images/sec, with the y = x line

A plot without data (one placement policy, one worker count, no predictions as on the CPU)
is skipped and the report says why. matplotlib is imported only here, with the Agg backend,
so the CLI starts fast and needs no display.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from launcher.errors import UsageError
from launcher.experiments import aggregate
from launcher.experiments.results import ResultsStore
from launcher.output import plain_when_piped
from mpijob.jobspec.defaults import PLACEMENT_POLICIES
from mpijob.plural import plural

PLACEMENT_PNG = "placement.png"
SCALING_PNG = "scaling.png"
PREDICTED_PNG = "predicted.png"
# Keys that tell two series apart in legends, in the order they are shown.
LABEL_KEYS = ("model", "workers", "gpus", "placement", "batch_size", "precision", "image_size",
              "num_batches", "num_warmup_batches", "xla", "backend", "data")


@dataclass
class PlotOutcome:
    name: str
    path: Path | None  # None when skipped
    why: str  # what it shows, or why it was skipped


@dataclass
class Report:
    root: Path
    records: list[dict]
    rows: list[dict]
    comparison: list[dict]
    skipped_lines: int = 0
    data_comparison: list[dict] = field(default_factory=list)
    plots: list[PlotOutcome] = field(default_factory=list)

    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[str(r.get("status"))] = out.get(str(r.get("status")), 0) + 1
        return out

    def to_json(self) -> dict:
        return {
            "results_dir": str(self.root),
            "runs": len(self.records),
            "statuses": self.statuses(),
            "rows": self.rows,
            "placement_comparison": self.comparison,
            "data_comparison": self.data_comparison,
            "plots": [{"name": p.name, "path": str(p.path) if p.path else None, "note": p.why}
                      for p in self.plots],
        }


def build_report(root: str | Path) -> Report:
    store = ResultsStore(root)
    if not store.root.is_dir():
        raise UsageError(f"{store.root}: no such results directory "
                         "(hvdk8s experiment run FILE --out DIR writes one)")
    if not store.exists():
        raise UsageError(f"{store.root}: no results.jsonl or results.csv here "
                         "(hvdk8s experiment run FILE --out DIR writes them)")
    records = list(store.latest().values())
    rows = aggregate.summarize(records)
    return Report(store.root, aggregate.with_efficiency(records), rows,
                  aggregate.placement_comparison(rows), store.skipped_lines,
                  aggregate.data_comparison(rows))


# ---------------------------------------------------------------------- labels
def _varying(rows: list[dict], keys=LABEL_KEYS) -> list[str]:
    return [k for k in keys if len({r.get(k) for r in rows}) > 1]


def _value_text(key: str, value) -> str:
    if key == "gpus":
        return f"{value} GPU/worker" if value else "CPU"
    if key == "workers":
        return plural(value, "worker")
    if key == "batch_size":
        return f"batch {value}"
    if key == "image_size":
        return f"{value}px images" if value else "model's image size"
    if key in ("num_batches", "num_warmup_batches"):
        return f"{key.replace('_', ' ')} {value}"
    if key == "xla":
        return "XLA" if value else "no XLA"
    return str(value)


def _label(row: dict, keys: list[str]) -> str:
    return ", ".join(_value_text(k, row.get(k)) for k in keys) or str(row.get("model"))


def _common_title(rows: list[dict], exclude: tuple[str, ...] = ()) -> str:
    keys = [k for k in ("gpus", "batch_size", "precision", "image_size", "backend")
            if k not in exclude and len({r.get(k) for r in rows}) == 1]
    return ", ".join(_value_text(k, rows[0].get(k)) for k in keys)


# ----------------------------------------------------------------------- plots
def _pyplot():
    # lazy: matplotlib (~300 ms) only when plots are written
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(report: Report) -> list[PlotOutcome]:
    measured = [r for r in report.rows if r["images_per_sec"] is not None]
    if not measured:
        report.plots = [PlotOutcome(name, None, "skipped: no run succeeded")
                        for name in (PLACEMENT_PNG, SCALING_PNG, PREDICTED_PNG)]
        return report.plots
    report.plots = [
        _placement_plot(measured, report.root / PLACEMENT_PNG),
        _scaling_plot(measured, report.root / SCALING_PNG),
        _predicted_plot(measured, report.root / PREDICTED_PNG),
    ]
    return report.plots


def _placement_plot(rows: list[dict], path: Path) -> PlotOutcome:
    policies = sorted({r["placement"] for r in rows},
                      key=lambda p: (p != "topology", p))  # topology-aware first
    if len(policies) < 2:
        return PlotOutcome(path.name, None, f"skipped: the succeeded runs use one placement "
                                            f"policy ({policies[0]}), nothing to compare")
    group_keys = [k for k in _varying(rows) if k != "placement"] or ["model"]
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in group_keys), {})[r["placement"]] = r
    # Only configurations run under several policies compare anything.
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return PlotOutcome(path.name, None, "skipped: no configuration was run with two or "
                                            "more placement policies")
    compared = [r for by_policy in groups.values() for r in by_policy.values()]
    group_keys = [k for k in group_keys if len({r.get(k) for r in compared}) > 1] or ["model"]
    groups = {tuple(r.get(k) for k in group_keys): {} for r in compared}
    for r in compared:
        groups[tuple(r.get(k) for k in group_keys)][r["placement"]] = r
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) * len(policies) / 2 + 2), 4.5))
    width = 0.8 / len(policies)
    names = list(groups)
    for i, policy in enumerate(policies):
        xs, heights, errs, predicted_x, predicted = [], [], [], [], []
        for g, key in enumerate(names):
            row = groups[key].get(policy)
            if row is None:
                continue
            x = g + (i - (len(policies) - 1) / 2) * width
            xs.append(x)
            heights.append(row["images_per_sec"])
            errs.append(row["images_per_sec_std"] or 0.0)
            if row["predicted_images_per_sec"]:
                predicted_x.append(x)
                predicted.append(row["predicted_images_per_sec"])
        bars = ax.bar(xs, heights, width, yerr=errs, capsize=3, label=policy)
        ax.bar_label(bars, fmt="%.0f", fontsize=8, label_type="center", color="white")
        if predicted:
            ax.scatter(predicted_x, predicted, marker="_", s=300, color="black", zorder=3,
                       label="predicted" if i == 0 else None)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(["\n".join(_value_text(k, v) for k, v in zip(group_keys, key, strict=True))
                        for key in names], fontsize=8)
    ax.set_ylabel("images/sec (mean over repetitions)")
    ax.set_title(f"Throughput by placement policy\n{_common_title(compared, ('placement',))}",
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return PlotOutcome(path.name, path, f"{plural(len(names), 'configuration')} x "
                                        f"{plural(len(policies), 'placement policy', 'placement policies')}")


def _scaling_plot(rows: list[dict], path: Path) -> PlotOutcome:
    series_keys = [k for k in _varying(rows) if k != "workers"]
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault(tuple(r.get(k) for k in series_keys), []).append(r)
    series = {k: sorted(v, key=lambda r: r["workers"]) for k, v in series.items()
              if len({r["workers"] for r in v}) >= 2}
    if not series:
        return PlotOutcome(path.name, None, "skipped: no configuration was measured at two or "
                                            "more worker counts")
    has_efficiency = any(r["scaling_efficiency"] is not None for s in series.values() for r in s)
    plt = _pyplot()
    ncols = 2 if has_efficiency else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 4.2), squeeze=False)
    rate_ax = axes[0][0]
    for n, points in enumerate(series.values()):
        label = _label(points[0], series_keys or ["model"])
        color = f"C{n % 10}"
        workers = [r["workers"] for r in points]
        rate_ax.errorbar(workers, [r["images_per_sec"] for r in points],
                         yerr=[r["images_per_sec_std"] or 0.0 for r in points],
                         marker="o", capsize=3, color=color, label=label)
        predicted = [(r["workers"], r["predicted_images_per_sec"]) for r in points
                     if r["predicted_images_per_sec"]]
        if predicted:
            rate_ax.plot(*zip(*predicted, strict=True), linestyle="--", color=color, alpha=0.7,
                         label=f"{label} (predicted)")
        if has_efficiency:
            eff = [(r["workers"], r["scaling_efficiency"] * 100) for r in points
                   if r["scaling_efficiency"] is not None]
            if eff:
                axes[0][1].plot(*zip(*eff, strict=True), marker="o", color=color, label=label)
    all_workers = sorted({r["workers"] for s in series.values() for r in s})
    _workers_axis(rate_ax, all_workers, "images/sec", "Throughput")
    if has_efficiency:
        eff_ax = axes[0][1]
        eff_ax.axhline(100, color="grey", linewidth=0.8, linestyle=":")
        _workers_axis(eff_ax, all_workers, "scaling efficiency (%)",
                      "Scaling efficiency (vs this experiment's 1-GPU or 1-rank run)")
    fig.suptitle(f"Scaling ({_common_title(rows)})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    why = f"{len(series)} series over {plural(len(all_workers), 'worker count')}"
    if not has_efficiency:
        why += " (no efficiency: no one-rank run and no prediction)"
    return PlotOutcome(path.name, path, why)


def _predicted_plot(rows: list[dict], path: Path) -> PlotOutcome:
    points = [r for r in rows if r["predicted_images_per_sec"]]
    if not points:
        return PlotOutcome(path.name, None, "skipped: no run has a prediction (runs on the CPU "
                                            "or without a cluster file have none)")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5))
    models = sorted({r["model"] for r in points})
    markers = dict(zip(PLACEMENT_POLICIES, "os^", strict=True))
    for r in points:
        color = f"C{models.index(r['model']) % 10}"
        ax.scatter(r["predicted_images_per_sec"], r["images_per_sec"], color=color,
                   marker=markers.get(r["placement"], "D"), s=40)
        ax.annotate(f"{r['workers']}x{r['gpus']}", (r["predicted_images_per_sec"],
                                                    r["images_per_sec"]),
                    fontsize=7, xytext=(3, 3), textcoords="offset points")
    top = max(max(r["predicted_images_per_sec"], r["images_per_sec"]) for r in points) * 1.1
    ax.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1, label="y = x")
    for m in models:
        ax.scatter([], [], color=f"C{models.index(m) % 10}", label=m)
    for p in sorted({r["placement"] for r in points}):
        ax.scatter([], [], color="black", marker=markers.get(p, "D"), label=p)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("predicted images/sec")
    ax.set_ylabel("measured images/sec")
    ax.set_title("Measured against predicted (label: workers x GPUs)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return PlotOutcome(path.name, path, f"{plural(len(points), 'configuration')} with a prediction")


# ----------------------------------------------------------------------- tables
def wide_console(stderr: bool = False):
    """Rich's 80 columns when piped would fold every column of these wide tables."""
    console = Console(highlight=False, stderr=stderr)
    return console if console.is_terminal else Console(highlight=False, stderr=stderr, width=200)


def _fmt(value, spec: str = ".1f", empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def print_report(report: Report, console) -> None:
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(report.statuses().items()))
    console.print(f"[bold]{report.root}[/bold]: {plural(len(report.records), 'run')} ({statuses})")
    if report.skipped_lines:
        console.print(f"note: {plural(report.skipped_lines, 'unreadable line')} in results.jsonl skipped")
    varying = set(_varying(report.rows))
    optional = [k for k in ("image_size", "num_batches", "xla", "backend", "data") if k in varying]
    table = Table(title="Throughput per configuration (mean over repetitions)")
    for header in ("MODEL", "WORKERS", "GPUS/W", "PLACEMENT", "BATCH", "PREC",
                   *(k.upper().replace("_", " ") for k in optional), "OK/RUNS", "IMAGES/SEC",
                   "PREDICTED", "MEAS/PRED", "EFFICIENCY", "LAST FAILURE"):
        table.add_column(header, overflow="fold")
    for r in report.rows:
        ips = _fmt(r["images_per_sec"], ".2f")
        if r["images_per_sec_std"] is not None:
            ips += f" ± {r['images_per_sec_std']:.2f}"
        eff = "-" if r["scaling_efficiency"] is None else f"{r['scaling_efficiency']:.0%}"
        if r["efficiency_source"] == "predicted":
            eff += " (pred.)"
        ratio = _fmt(r["measured_over_predicted"], ".2f")
        table.add_row(r["model"], str(r["workers"]), str(r["gpus"]), r["placement"],
                      str(r["batch_size"]), r["precision"],
                      *(_value_text(k, r.get(k)) if k == "image_size" else str(r.get(k))
                        for k in optional),
                      f"{r['succeeded']}/{r['runs']}", ips,
                      _fmt(r["predicted_images_per_sec"], ".1f"), ratio, eff,
                      r["last_failure"] or "")
    console.print(plain_when_piped(console, table))
    if report.comparison:
        policies = sorted({p for c in report.comparison for p in c["images_per_sec_by_placement"]},
                          key=lambda p: (p != "topology", p))
        others = [p for p in policies if p != "topology"]
        comp = Table(title="Placement policies side by side (images/sec)")
        for header in ("MODEL", "WORKERS", "GPUS/W", "BATCH", "PREC", *(p.upper() for p in policies),
                       *(f"TOPOLOGY/{p.upper()}" for p in others)):
            comp.add_column(header)
        for c in report.comparison:
            by = c["images_per_sec_by_placement"]
            comp.add_row(c["model"], str(c["workers"]), str(c["gpus"]), str(c["batch_size"]),
                         c["precision"], *(_fmt(by.get(p), ".1f") for p in policies),
                         *(_fmt(c["topology_speedup"].get(p), ".2f") + "x"
                           if c["topology_speedup"].get(p) else "-" for p in others))
        console.print(plain_when_piped(console, comp))
    if report.data_comparison:
        gap = Table(title="Synthetic vs real input (images/sec)")
        for header in ("MODEL", "WORKERS", "GPUS/W", "BATCH", "PREC", "SYNTHETIC", "REAL",
                       "REAL/SYNTHETIC", "INPUT WAIT (REAL)"):
            gap.add_column(header)
        for c in report.data_comparison:
            wait = c["real_input_wait_share"]
            gap.add_row(c["model"], str(c["workers"]), str(c["gpus"]), str(c["batch_size"]),
                        c["precision"], _fmt(c["synthetic_images_per_sec"], ".1f"),
                        _fmt(c["real_images_per_sec"], ".1f"),
                        f"{c['real_over_synthetic']:.2f}x", "-" if wait is None else f"{wait:.0%}")
        console.print(plain_when_piped(console, gap))
    for p in report.plots:
        console.print(f"wrote {p.path} ({p.why})" if p.path else f"{p.name}: {p.why}",
                      markup=False, highlight=False)


def _workers_axis(ax, workers: list[int], ylabel: str, title: str) -> None:
    """A plot against the number of workers, from 0 up, with its legend."""
    ax.set_xticks(workers)
    ax.set_xlabel("workers")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
