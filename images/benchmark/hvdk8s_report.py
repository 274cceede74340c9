"""Report to hvdk8s from inside a job: one `HVDK8S_REPORT {json}` line on stdout.

mpirun forwards every rank's stdout to the launcher's log, where `hvdk8s get` reads it
(launcher/formats/rank_reports.py): no rights, no network, no dependency beyond Python.
Python 3.8 syntax: stock images (horovod/horovod) run it.

    from hvdk8s_report import report
    report("progress", step=10, total_steps=100, images_per_sec=512.0)
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

REPORT_PREFIX = "HVDK8S_REPORT "
# Where each MPI tells a process its rank: Open MPI, MPICH/Intel MPI (PMI), Horovod's own.
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK")


def own_rank() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def report(kind: str, rank: int | None = None, stream=None, **fields) -> None:
    """Write one report line and flush it (a buffered line would arrive late or never).
    Non-finite numbers become null: the line stays valid JSON."""
    record = {"kind": kind, "rank": own_rank() if rank is None else int(rank),
              "time": time.time()}
    record.update({key: _finite(value) for key, value in fields.items()})
    out = stream or sys.stdout
    out.write(REPORT_PREFIX + json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")
    out.flush()


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
