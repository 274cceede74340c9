"""Reads the figures a benchmark run printed: `total images/sec: N` and `HVDK8S_RESULT {json}`.

The same output reaches us in several shapes (the launcher's log on this machine, a
launcher pod's log, lines tagged by `mpirun --tag-output`), so lines are matched anywhere,
not only from their start. When a run printed several (a retried job's log), the last
one wins, as it is the run that finished.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable

RESULT_PREFIX = "HVDK8S_RESULT "
_TOTAL = re.compile(r"total images/sec:\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)")


def is_result_line(line: str) -> bool:
    """The benchmark's machine-readable line (alone, or after a `[pod]`/`[rank]` prefix):
    for `get -o json` and the experiment records, not for people reading a log."""
    return line.startswith(RESULT_PREFIX) or bool(
        line.startswith("[") and line.partition("] ")[2].startswith(RESULT_PREFIX))


def parse_benchmark_output(lines: Iterable[str] | str) -> tuple[float | None, dict | None]:
    """(total images/sec, the HVDK8S_RESULT object); None for what the output lacks.

    A result line whose JSON is cut or invalid (a killed rank) is skipped. When only the
    JSON line is there, its `total_images_per_sec` gives the rate.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    images_per_sec: float | None = None
    result: dict | None = None
    for line in lines:
        match = _TOTAL.search(line)
        if match:
            value = float(match.group(1))
            if math.isfinite(value):
                images_per_sec = value
        at = line.find(RESULT_PREFIX)
        if at >= 0:
            parsed = _json_object(line[at + len(RESULT_PREFIX):])
            if parsed is not None:
                result = parsed
    if images_per_sec is None and result is not None:
        images_per_sec = _number(result.get("total_images_per_sec"))
    return images_per_sec, result


def _json_object(text: str) -> dict | None:
    try:
        value = json.loads(text.strip())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
