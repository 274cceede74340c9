"""Predicted vs measured 2-rank CPU runs, from a calibration fitted on 1-rank runs only.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/calibration/cpu_check.py \\
        --calibration cal.json --runs DIR_OF_2_RANK_RESULTS [--out benchmarks/calibration]

Prints each 2-rank run's measured images/sec beside the calibrated prediction
(mpijob.perf.perfmodel.predict_cpu, one host) and writes cpu_check.csv.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from launcher.experiments.results import ResultsStore
from launcher.formats import calibration_file
from mpijob.perf.perfmodel import predict_cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", required=True)
    ap.add_argument("--runs", required=True, type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args(argv)
    cal, source = calibration_file.load(args.calibration)
    assumptions = calibration_file.assumptions(cal, source)
    rows = []
    for r in ResultsStore(args.runs).latest().values():
        if r.get("status") != "Succeeded" or r.get("gpus"):
            continue
        p = predict_cpu(model=r["model"], batch_size=r["batch_size"], precision=r["precision"],
                        ranks=r["workers"], hosts=r.get("nodes") or 1,
                        image_size=r.get("image_size"), assumptions=assumptions)
        err = p.images_per_sec / r["images_per_sec"] - 1
        rows.append(dict(run_id=r["run_id"], ranks=r["workers"], batch_size=r["batch_size"],
                         measured=round(r["images_per_sec"], 2),
                         predicted=round(p.images_per_sec, 2), error=f"{err:+.1%}",
                         finished=r.get("finished")))
    if not rows:
        print("no successful CPU runs in", args.runs, file=sys.stderr)
        return 1
    with open(args.out / "cpu_check.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for row in rows:
        print(row)
    mean_meas = sum(r["measured"] for r in rows) / len(rows)
    mean_pred = rows[0]["predicted"]
    print(f"mean measured {mean_meas:.2f} images/s, predicted {mean_pred:.2f} "
          f"({mean_pred / mean_meas - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
