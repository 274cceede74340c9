"""Base class for the fake control-plane loops: a background thread and a `step()` for tests."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class Loop:
    name = "loop"

    def __init__(self, tick: float = 0.02):
        self.tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._step_lock = threading.Lock()  # step() may be called by tests while the thread runs

    def step(self) -> None:
        with self._step_lock:
            self._step()

    def _step(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"kubeapi-{self.name}",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # a broken tick must not kill the loop; tests see the log
                log.exception("kubeapi %s loop tick failed", self.name)
            self._stop.wait(self.tick)
