"""Client-side rate limiting: a token bucket, and a pause when the server says 429.

client-go limits every client with a token bucket (k8s.io/client-go/util/flowcontrol,
NewTokenBucketRateLimiter(qps, burst), taken before each request in rest/request.go's
tryThrottle, retries included): `burst` requests may go at once, then `qps` a second.
Its defaults (rest.DefaultQPS 5, DefaultBurst 10) are for controllers that run forever;
they would make a 512-pod submit take 100 s. A CLI sends one short burst per command (a
64-node submit: about 210 requests), so hvdk8s lets a burst of BURST through and then paces
at QPS, the values kubectl's discovery client uses (burst 300, 50 a second), and answers
flow control's own signal: a 429 with Retry-After holds every request of this client (all
threads) until then, not just the one retried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

QPS = 50.0
BURST = 300


class RateLimiter:
    def __init__(self, qps: float = QPS, burst: int = BURST, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.qps, self.burst = qps, burst
        self.clock, self.sleep = clock, sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()
        self._held_until = 0.0
        self.waited = 0.0  # seconds spent waiting in total, for --debug and benchmarks

    def acquire(self) -> None:
        """Take one token, waiting for it (and for any Retry-After hold) first."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1  # may go negative: the debt is this caller's wait
            delay = max(-self._tokens / self.qps, self._held_until - now, 0.0)
        if delay > 0:
            self.waited += delay
            self.sleep(delay)

    def hold(self, seconds: float) -> None:
        """The server asked us to wait (429 Retry-After): nothing goes before then."""
        with self._lock:
            self._held_until = max(self._held_until, self.clock() + seconds)
