"""Reads what the ranks report while a job runs: one `HVDK8S_REPORT {json}` line each.

The path is the ranks' own stdout, which `mpirun` forwards to the launcher's log. So it
needs no rights in the pods (they carry no ServiceAccount token) and works the same for
the launcher pod's log (read with `tailLines`/`sinceSeconds`), an MPIJob's or a TrainJob's
launcher, and the local backend's log file in the job's state directory.

Every report is one JSON object on one line after the prefix, with at least:

    kind   what it reports: "progress" (steps, images/sec, this rank's step time),
           "heartbeat" (alive, at which step), "preflight" (a hardware check's figures)
    rank   the Horovod/MPI rank that wrote it (int)
    time   when, in seconds since the epoch (float)

and optionally `host` (the rank's hostname: on Kubernetes its pod's name, which `get` turns
into the pod, node and GPUs of a straggler or a silent rank), and whatever else its kind
defines (images/benchmark/hvdk8s_report.py writes them). Lines
are matched anywhere, not only from their start: `mpirun --tag-output` and `[pod]` prefixes
come before them. A line whose JSON is cut (a killed rank) or lacks the common fields is
skipped. The lines are for hvdk8s, not for people: `logs` hides them unless asked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator

from launcher.formats.benchmark_result import RESULT_PREFIX

REPORT_PREFIX = "HVDK8S_REPORT "
# mpirun's --tag-output: Open MPI 4 `[1,0]<stdout>:`, Open MPI 5 `[1,0]<stdout>: `, and the
# short `[0]<stdout>:` of some launch lines.
_RANK_TAG = re.compile(r"^\[(?:\d+,)?(\d+)\]<std(?:out|err)>: ?")


def is_report_line(line: str) -> bool:
    return REPORT_PREFIX in line


def tagged_rank(line: str) -> int | None:
    """The rank mpirun's --tag-output put at the start of `line`; None when untagged."""
    found = _RANK_TAG.match(line)
    return int(found.group(1)) if found else None


def for_people(line: str) -> str | None:
    """`line` as `logs` shows it to a person: without mpirun's rank tag; None for the lines
    meant for hvdk8s (reports, and the benchmark's result, which `get -o json` has)."""
    if REPORT_PREFIX in line or RESULT_PREFIX in line:
        return None
    return _RANK_TAG.sub("", line, count=1)


def iter_reports(lines: Iterable[str] | str, kind: str | None = None) -> Iterator[dict]:
    """The valid reports in `lines`, in order; only those of `kind` when given."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    for line in lines:
        at = line.find(REPORT_PREFIX)
        if at < 0:
            continue
        report = _report(line[at + len(REPORT_PREFIX):])
        if report is not None and (kind is None or report["kind"] == kind):
            yield report


def _report(text: str) -> dict | None:
    try:
        value = json.loads(text.strip())
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        return None
    rank, when = value.get("rank"), value.get("time")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        return None
    if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
        return None
    return value
