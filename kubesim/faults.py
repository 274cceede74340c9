"""Fault injection: fail the next N matching requests so client retry logic can be tested."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from . import errors


@dataclass
class Fault:
    remaining: int
    status: int | None  # None means drop the connection without answering
    method: str | None = None
    path_regex: str | None = None
    retry_after: int | None = 1  # Retry-After header for 429; None omits it
    message: str | None = None
    after: bool = False  # drop only after the request took effect: the answer is lost
    query: tuple[str, ...] = ()  # only requests with all these query parameters
    hits: list[tuple[str, str]] = field(default_factory=list)

    def matches(self, method: str, path: str, query: dict | None = None) -> bool:
        if self.method and self.method.upper() != method:
            return False
        if any(k not in (query or {}) for k in self.query):
            return False
        return not self.path_regex or re.search(self.path_regex, path) is not None

    def error(self) -> errors.ApiError:
        if self.status == 429:
            return errors.too_many_requests(self.retry_after)
        if self.status == 503:
            return errors.service_unavailable(self.message or
                                              "the server is currently unable to handle the "
                                              "request")
        if self.status == 500:
            return errors.internal(self.message or "injected fault")
        if self.status == 410:
            return errors.continue_expired()
        if self.status == 504:
            return errors.ApiError(504, "Timeout", self.message or
                                   "Timeout: request did not complete within the allotted "
                                   "timeout", {})
        return errors.ApiError(self.status, "InternalError", self.message or "injected fault", {})


class Faults:
    def __init__(self):
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults = []

    def take(self, method: str, path: str, query: dict | None = None) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.remaining > 0 and f.matches(method, path, query):
                    f.remaining -= 1
                    f.hits.append((method, path))
                    if f.remaining == 0:
                        self._faults.remove(f)
                    return f
        return None

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(f.remaining for f in self._faults)
