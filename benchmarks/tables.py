"""The result tables benchmark scripts write: the rows as a CSV file and as a markdown table."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path


def write_csv(path: Path, rows: list[dict], columns: Sequence[str] | None = None) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns or rows[0]))
        w.writeheader()
        w.writerows(rows)


def markdown(rows: list[dict], columns: Sequence[str] | None = None) -> str:
    cols = list(columns or rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
