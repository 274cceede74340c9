"""A job's preflight as `get` keeps it: its "preflight" reports (launcher.formats.rank_reports)
judged into one verdict (mpijob.perf.preflight.verdict_of), for JobStatus.preflight.

The program (mpijob/k8s/podscripts/hvdk8s_preflight.py) reports from rank 0, with `check`:
- "gpu": one per GPU: gpu (index), uuid, host, node, pod, pcie, nvlinks_up, problems (text
  each), unreadable (what NVML would not say), verdict ("ok" or "unhealthy");
- "xid": host, node, lines (the kernel's NVRM Xid lines, where readable);
- "allreduce": one per path: path ("node", "nodes", "pair", "job"), pods, nodes, host,
  ranks, bytes, seconds, busbw_gbs, expected_gbs, link, link_kind, backend ("mpi",
  "horovod-nccl", "horovod-cpu"), verdict ("ok", "slow", "unjudged");
- "summary": verdict ("pass", "fail"), policy, threshold, findings (what failed, named),
  notes, gpu_checks (where from), backend, ranks, seconds (the program's own time).
"""

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


# The preflight prints before the program: its reports are in the log's first MiB (a line
# per GPU and per path of a 512-GPU job is well within it).
HEAD_BYTES = 1 << 20


def preflight_from_file(path: Path) -> dict | None:
    """A local job's preflight, from the head of its launcher log (logs grow large)."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    return preflight_status(line for line in head.splitlines() if is_report_line(line))


def failure_reason(preflight: dict | None) -> tuple[str, str] | None:
    """(reason, message) of a job its preflight ended (--preflight fail), naming what failed."""
    if not preflight or preflight.get("verdict") != "fail" or preflight.get("policy") != "fail":
        return None
    found = preflight.get("findings") or []
    first = found[0] if found else "it did not pass (hvdk8s get shows its figures)"
    more = f" (and {len(found) - 1} more: hvdk8s get)" if len(found) > 1 else ""
    return "PreflightFailed", f"the program did not start: {first}{more}"
