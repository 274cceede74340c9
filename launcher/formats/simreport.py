"""Files `hvdk8s simulate --out DIR` writes: summary.csv (exactly SUMMARY_COLUMNS),
summary_extra.csv (the other figures of the table, one row per policy as well) and PNG
plots of the comparison.

matplotlib is imported only here and only when plotting, with the Agg backend (no display).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from mpijob.perf.simulate import EXTRA_COLUMNS, SUMMARY_COLUMNS, SimResult

SUMMARY_FILE = "summary.csv"
SUMMARY_EXTRA_FILE = "summary_extra.csv"
COMPARISON_PNG = "comparison.png"
JCT_CDF_PNG = "jct_cdf.png"
THROUGHPUT_PNG = "throughput_per_gpu.png"

# What each summary column means, for plot titles.
_TITLES = {
    "mean_jct_s": "mean job completion time",
    "p95_jct_s": "p95 job completion time",
    "mean_images_per_sec_per_gpu": "mean predicted images/s per GPU",
    "gpu_utilization": "GPU utilisation",
    "multi_node_share": "share of jobs on >1 node",
    "mean_queue_s": "mean queueing delay",
}
# The unit each summary column is shown in, by `hvdk8s simulate`'s table and the plots alike
# (the plots drew utilisation and shares as 0..1 next to a table in %): (factor, unit).
UNITS = {
    "mean_jct_s": (1 / 3600, "h"), "p95_jct_s": (1 / 3600, "h"), "mean_queue_s": (1 / 3600, "h"),
    "mean_images_per_sec_per_gpu": (1.0, "images/s"),
    "gpu_utilization": (100.0, "%"), "multi_node_share": (100.0, "%"),
}


def shown(column: str, value: float) -> float:
    """A summary figure in the unit the table and the plots show it in (UNITS)."""
    return value * UNITS[column][0]


def plot_title(column: str) -> str:
    return f"{_TITLES[column]} ({UNITS[column][1]})"


def _write_rows(path: Path, columns: Sequence[str], rows) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([row["policy"], *(_num(row[c]) for c in columns[1:])])


def write_summary_csv(path: Path, results: Sequence[SimResult]) -> None:
    _write_rows(path, SUMMARY_COLUMNS, (r.summary.row() for r in results))


def write_summary_extra_csv(path: Path, results: Sequence[SimResult]) -> None:
    """What summary.csv must not hold (its columns are fixed): efficiency, dropped jobs..."""
    _write_rows(path, EXTRA_COLUMNS, (r.summary.extra_row() for r in results))


def _num(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return "" if math.isnan(value) else f"{value:.6g}"  # empty: no such job (e.g. no multi-GPU job)


def write_plots(out: Path, results: Sequence[SimResult]) -> list[Path]:
    """The comparison bar charts, the JCT CDFs and per-GPU throughput by job size."""
    # lazy: matplotlib (~300 ms) only when plots are written
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    policies = [r.summary.policy for r in results]
    colors = [f"C{i}" for i in range(len(results))]
    paths = []

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, column in zip(axes.flat, SUMMARY_COLUMNS[1:], strict=True):
        values = [shown(column, getattr(r.summary, column)) for r in results]
        ax.bar(policies, values, color=colors)
        ax.set_title(plot_title(column), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Placement policies compared (same cluster, same job stream)")
    fig.tight_layout()
    paths.append(_save(fig, out / COMPARISON_PNG, plt))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r, color in zip(results, colors, strict=True):
        jcts = sorted(o.jct_s / 3600 for o in r.outcomes if o.dropped is None)
        if jcts:
            ax.plot(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], label=r.summary.policy,
                    color=color)
    ax.set_xscale("log")
    # Plain tick labels: the default log labels go through mathtext, which is slow and noisy.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("job completion time (h, log scale)")
    ax.set_ylabel("share of jobs")
    ax.set_title("Job completion time CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(_save(fig, out / JCT_CDF_PNG, plt))

    sizes = sorted({o.job.gpus for r in results for o in r.outcomes})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(len(results), 1)
    for k, (r, color) in enumerate(zip(results, colors, strict=True)):
        means = []
        for size in sizes:
            per = [o.images_per_sec / o.job.gpus for o in r.outcomes
                   if o.dropped is None and o.job.gpus == size]
            means.append(sum(per) / len(per) if per else 0.0)
        ax.bar([i + k * width for i in range(len(sizes))], means, width, label=r.summary.policy,
               color=color)
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(sizes))])
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("GPUs per job")
    ax.set_ylabel("mean predicted images/s per GPU")
    ax.set_title("Predicted throughput per GPU by job size")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(_save(fig, out / THROUGHPUT_PNG, plt))
    return paths


def _save(fig, path: Path, plt) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
