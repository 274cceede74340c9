"""When `wait` looks for a stall on Kubernetes: the ranks' reports are in the launcher's log,
which no watch delivers, so `wait` reads its tail, and only rarely.

The first look is as the job is first seen running; then every STEPS_BETWEEN times the
expected step time the reports give (the same measure a stall is judged by), at least
MIN_SECONDS apart: at most 60 / MIN_SECONDS log reads a minute, none when nothing runs.
A program that does not report (yet: a warm-up, a compile) is looked at ever more rarely,
doubling up to IDLE_MAX_SECONDS. Cost measured in benchmarks/progress/README.md.
"""

from __future__ import annotations

from launcher.formats.job_progress import JobProgress

MIN_SECONDS = 30.0
STEPS_BETWEEN = 3.0
IDLE_MAX_SECONDS = 600.0


class StallCheck:
    """The next time (on the caller's monotonic clock) `wait` reads the launcher's log."""

    def __init__(self) -> None:
        self.next_at: float | None = None  # None: at once
        self.idle = MIN_SECONDS  # the pause after a look that found no report

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
