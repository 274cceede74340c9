#!/usr/bin/env python3
"""Summarise compare_tf_cnn_benchmarks.sh logs into a CSV and a Markdown table.

Log names are `<ours|theirs>_<model>_bs<B>_np<N>_rep<R>.log`. The figure taken from each
log is the `total images/sec` that rank 0 prints (lines tagged `[1,0]<stdout>:` by
mpirun --tag-output, or untagged for a single process); the CSV row per configuration
holds the median over repeats and every individual figure.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import platform
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

NAME = re.compile(
    r"^(ours|theirs|theirs-yield)_(?P<model>.+)_bs(?P<bs>\d+)_np(?P<np>\d+)_rep(?P<rep>\d+)\.log$"
)
# OpenMPI 4.1's --tag-output also appends a tag at the end of some lines: ignore the rest.
TOTAL = re.compile(r"^(?:\[1,(?P<rank>\d+)\]<stdout>:)?total images/sec: (?P<v>[0-9]+(?:\.[0-9]+)?)")
TF_VERSION = re.compile(r"TensorFlow:\s+(\S+)")


def total_of(text: str) -> float | None:
    for line in text.splitlines():
        m = TOTAL.match(line.strip())
        if m and (m.group("rank") in (None, "0")):
            return float(m.group("v"))
    return None


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return f"{model}, {os.cpu_count()} vCPU, {platform.system()} {platform.release()}"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("logs", type=Path)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--tfcnn-commit", default="unknown")
    args = p.parse_args()

    figures: dict[tuple[str, int, int], dict[str, list[float]]] = defaultdict(
        lambda: {"ours": [], "theirs": [], "theirs-yield": []}
    )
    tf_version = "unknown"
    for log in sorted(args.logs.glob("*.log")):
        m = NAME.match(log.name)
        if not m:
            continue
        text = log.read_text(errors="replace")
        v = total_of(text)
        if v is None:
            print(f"summarize: no total images/sec in {log}", file=sys.stderr)
            continue
        tv = TF_VERSION.search(text)
        if tv:
            tf_version = tv.group(1)
        figures[(m.group("model"), int(m.group("bs")), int(m.group("np")))][m.group(1)].append(v)

    date = dt.date.today().isoformat()
    host = machine()
    rows = []
    for (model, bs, np_), f in sorted(figures.items()):
        if not f["ours"] or not f["theirs"]:
            continue
        ours, theirs = statistics.median(f["ours"]), statistics.median(f["theirs"])
        rows.append({
            "date": date,
            "machine": host,
            "model": model,
            "image_size": 299 if model.startswith("inception") else 224,
            "batch_size_per_rank": bs,
            "ranks": np_,
            "repeats": min(len(f["ours"]), len(f["theirs"])),
            "ours_images_per_sec": round(ours, 2),
            "tf_cnn_benchmarks_images_per_sec": round(theirs, 2),
            "ratio": round(ours / theirs, 3),
            "ours_all": " ".join(f"{x:.2f}" for x in f["ours"]),
            "tf_cnn_benchmarks_all": " ".join(f"{x:.2f}" for x in f["theirs"]),
            # tf_cnn_benchmarks with OMPI_MCA_mpi_yield_when_idle=1 (multi-rank only).
            "tf_cnn_benchmarks_yield_images_per_sec": (
                round(statistics.median(f["theirs-yield"]), 2) if f["theirs-yield"] else ""
            ),
            "tf_cnn_benchmarks_yield_all": " ".join(f"{x:.2f}" for x in f["theirs-yield"]),
            "tensorflow": tf_version,
            "tf_cnn_benchmarks_commit": args.tfcnn_commit[:12],
        })
    if not rows:
        print("summarize: no complete configuration found", file=sys.stderr)
        return 1
    with args.csv.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| config | ours (img/s) | tf_cnn_benchmarks (img/s) | ratio | runs (ours / theirs) "
          "| tf_cnn_benchmarks + yield_when_idle (img/s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        y = r["tf_cnn_benchmarks_yield_images_per_sec"]
        y_cell = f"{y:.2f} ({r['tf_cnn_benchmarks_yield_all']})" if y != "" else "n/a"
        print(
            f"| {r['model']} {r['image_size']}px, batch {r['batch_size_per_rank']}/rank, "
            f"{r['ranks']} rank(s) | {r['ours_images_per_sec']:.2f} | "
            f"{r['tf_cnn_benchmarks_images_per_sec']:.2f} | {r['ratio']:.3f} | "
            f"{r['ours_all']} / {r['tf_cnn_benchmarks_all']} | {y_cell} |"
        )
    print(f"\n{date}, {host}, TensorFlow {tf_version}, "
          f"tf_cnn_benchmarks {args.tfcnn_commit[:12]}; CSV: {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
