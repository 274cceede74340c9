"""When `wait` looks for a stall on Kubernetes: the ranks' reports are in the launcher's log,
which no watch delivers, so `wait` reads its tail, and only rarely.

Not at all while the launcher's readiness probe says all is well (`probe_says_progressing`):
the monitor in the launcher pod judges the reports there (mpijob.k8s.monitor), and the
kubelet's probe turns a stall into the pod's Ready condition, which `wait`'s pod watch
delivers. So `wait` reads the log only when the probe fails: a stall (to show the ranks'
last lines), or an image without python3 (no monitor: launcher.sh says so through it).

The first look is as the job is first seen running; then every STEPS_BETWEEN times the
expected step time the reports give (the same measure a stall is judged by), at least
MIN_SECONDS apart: at most 60 / MIN_SECONDS log reads a minute, none when nothing runs.
A program that does not report (yet: a warm-up, a compile) is looked at ever more rarely,
doubling up to IDLE_MAX_SECONDS. Cost measured in benchmarks/progress/README.md.
"""

from __future__ import annotations

from launcher.formats.job_progress import JobProgress
from mpijob.progress import MONITOR_DIR

MIN_SECONDS = 30.0
STEPS_BETWEEN = 3.0
IDLE_MAX_SECONDS = 600.0


class StallCheck:
    """The next time (on the caller's monotonic clock) `wait` reads the launcher's log."""

    def __init__(self) -> None:
        self.next_at: float | None = None  # None: at once
        self.idle = MIN_SECONDS  # the pause after a look that found no report

    def reset(self) -> None:
        """Look at once (the launcher's probe just failed)."""
        self.next_at, self.idle = None, MIN_SECONDS

    def due(self, now: float) -> bool:
        return self.next_at is None or now >= self.next_at

    def seconds_left(self, now: float) -> float | None:
        return None if self.next_at is None else max(0.0, self.next_at - now)

    def looked(self, progress: JobProgress | None, now: float) -> None:
        if progress is None:
            pause, self.idle = self.idle, min(IDLE_MAX_SECONDS, self.idle * 2)
        else:
            self.idle = MIN_SECONDS
            pause = max(MIN_SECONDS, STEPS_BETWEEN * (progress.expected_step_time or 0.0))
        self.next_at = now + pause


def probe_says_progressing(launcher: dict | None) -> bool:
    """The launcher pod runs hvdk8s' monitor probe and every probed container is ready."""
    if launcher is None:
        return False
    probed = {c.get("name") for c in (launcher.get("spec") or {}).get("containers") or []
              if _probes_monitor(c)}
    statuses = (launcher.get("status") or {}).get("containerStatuses") or []
    return bool(probed) and all(
        any(s.get("name") == name and s.get("ready") is True and "running" in (s.get("state") or {})
            for s in statuses) for name in probed)


def _probes_monitor(container: dict) -> bool:
    command = ((container.get("readinessProbe") or {}).get("exec") or {}).get("command") or []
    return any(MONITOR_DIR in str(word) for word in command)
