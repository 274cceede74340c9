"""A job's preflight as `get` keeps it: its "preflight" reports (launcher.formats.rank_reports)
judged into one verdict (mpijob.perf.preflight.verdict_of), for JobStatus.preflight."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from launcher.formats.rank_reports import is_report_line, iter_reports

KIND = "preflight"


def preflight_status(lines: Iterable[str]) -> dict | None:
    """The verdict of the preflight reports among `lines` (None: there are none)."""
    from mpijob.perf.preflight import verdict_of

    reports = list(iter_reports(lines, kind=KIND))
    if not reports:
        return None
    return verdict_of(reports).to_json()


def preflight_from_file(path: Path) -> dict | None:
    """A local job's preflight, from its launcher log (read line by line: logs grow large)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return preflight_status(line for line in f if is_report_line(line))
    except OSError:
        return None
