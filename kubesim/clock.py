"""The model cluster's clock: what its controllers read as now (the Job controller's
activeDeadlineSeconds and TTL, the kubelet's scripted delays, the scheduler's waits).

It runs with the wall clock, and a test moves it forward with `advance` instead of sleeping
through a deadline or a delay: the controllers then act as if that much time had passed.
Processes outside the server (a CLI in a subprocess, a real kubectl) keep their own time, so a
test advances it only where none of them waits on the same span."""

from __future__ import annotations

import threading
import time


class Clock:
    def __init__(self) -> None:
        self._ahead = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return time.monotonic() + self._ahead

    def time(self) -> float:
        """Seconds since the epoch, as time.time()."""
        return time.time() + self._ahead

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._ahead += seconds
