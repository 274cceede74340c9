"""Container log storage written by the fake kubelet and read by the pods/log endpoint."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from .util import now_nano


@dataclass
class Attempt:
    """One run of one container (a restart starts a new attempt)."""

    lines: list[tuple[float, str, str]] = field(default_factory=list)  # (epoch, stamp, text)
    finished: bool = False


class LogBook:
    def __init__(self):
        self._lock = threading.Lock()
        self.cond = threading.Condition(self._lock)
        self._logs: dict[tuple[str, str], list[Attempt]] = {}
        self.closed = False

    def start_attempt(self, uid: str, container: str) -> None:
        with self.cond:
            attempts = self._logs.setdefault((uid, container), [])
            if attempts:
                attempts[-1].finished = True
            attempts.append(Attempt())
            self.cond.notify_all()

    def append(self, uid: str, container: str, text: str) -> None:
        with self.cond:
            attempts = self._logs.get((uid, container))
            if attempts:
                attempts[-1].lines.append((time.time(), now_nano(), text))
                self.cond.notify_all()

    def finish(self, uid: str, container: str) -> None:
        with self.cond:
            for a in self._logs.get((uid, container), ()):
                a.finished = True
            self.cond.notify_all()

    def forget(self, uid: str) -> None:
        with self.cond:
            for key in [k for k in self._logs if k[0] == uid]:
                for a in self._logs.pop(key):
                    a.finished = True
            self.cond.notify_all()

    def attempt(self, uid: str, container: str, previous: bool = False) -> Attempt | None:
        with self.cond:
            attempts = self._logs.get((uid, container)) or []
            if previous:
                return attempts[-2] if len(attempts) >= 2 else None
            return attempts[-1] if attempts else None

    def snapshot(self, attempt: Attempt) -> tuple[list[tuple[float, str, str]], bool]:
        with self.cond:
            return list(attempt.lines), attempt.finished

    def wait(self, attempt: Attempt, seen: int, timeout: float) -> None:
        with self.cond:
            if len(attempt.lines) == seen and not attempt.finished and not self.closed:
                self.cond.wait(timeout)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def format_lines(lines, timestamps: bool) -> bytes:
    if timestamps:
        return "".join(f"{stamp} {text}\n" for _, stamp, text in lines).encode()
    return "".join(f"{text}\n" for _, _, text in lines).encode()
