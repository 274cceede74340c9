"""A TrainJob's `status.trainerStatus` as a job's progress (pure).

Kubeflow Trainer (v2.3.0, its TrainJobStatus feature gate on) writes there what the
trainer pods post to its status endpoint: `progressPercentage`, `estimatedRemainingSeconds`,
`metrics` (name and value, both strings) and `lastUpdatedTime`. hvdk8s's poster
(mpijob/k8s/podscripts/hvdk8s_trainer_status.py) adds the metrics named below. It comes
with the TrainJob that `get` and `list` read anyway: no log read. It says less than the
ranks' own reports (rank_reports.py): no rank's step time, so no straggler, and no
heartbeat, so no stall; `get` prefers the reports where the launcher's log has them.
"""

from __future__ import annotations

import math

from launcher.formats.job_progress import JobProgress
from launcher.timestamps import parse_utc

# The poster's metric names (its STEP_METRIC, TOTAL_STEPS_METRIC, RATE_METRIC).
STEP_METRIC = "step"
TOTAL_STEPS_METRIC = "total_steps"
RATE_METRIC = "images_per_sec"
SOURCE = "trainerStatus"  # JobProgress.source of a progress read from there


def progress_from_trainer_status(root: dict | None, now: float, *,
                                 predicted_images_per_sec: float | None = None
                                 ) -> JobProgress | None:
    """The progress a TrainJob's status.trainerStatus says, None where it says none."""
    status = ((root or {}).get("status") or {}).get("trainerStatus")
    if not isinstance(status, dict):
        return None
    metrics = {m.get("name"): m.get("value") for m in status.get("metrics") or []
               if isinstance(m, dict)}
    step, total = _number(metrics.get(STEP_METRIC)), _number(metrics.get(TOTAL_STEPS_METRIC))
    rate = _number(metrics.get(RATE_METRIC))
    percent = status.get("progressPercentage")
    percent = percent if isinstance(percent, int) and not isinstance(percent, bool) else None
    if step is None and percent is None and rate is None:
        return None
    eta = status.get("estimatedRemainingSeconds")
    try:
        updated = parse_utc(status["lastUpdatedTime"]).timestamp()
    except (KeyError, TypeError, ValueError):
        updated = now
    return JobProgress(
        step=int(step) if step is not None else 0,
        total_steps=int(total) if total else None,
        images_per_sec=rate, images_per_sec_avg=None,
        predicted_images_per_sec=predicted_images_per_sec,
        last_step_age=max(0.0, now - updated), expected_step_time=None,
        eta_seconds=float(eta) if isinstance(eta, int) and not isinstance(eta, bool) else None,
        warmup=False, percent=percent if step is None else None, source=SOURCE)


def _number(text: object) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None
