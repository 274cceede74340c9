"""One job's objects kept current by watches, for `wait` and `get --watch`.

Polling a job costs the API server a GET and a list every few seconds per waiter; a watch
costs it nothing while nothing changes. Each kind the job has (pods, the launcher Job, the
MPIJob) is listed once and then watched from the list's resourceVersion, the way client-go's
reflector does (k8s.io/client-go/tools/cache/reflector.go, ListAndWatch):

- the watch asks for bookmarks (`allowWatchBookmarks`), so that it resumes from a fresh
  resourceVersion after a quiet spell instead of one the server compacted away;
- it runs for a randomised 5-10 minutes (the reflector's `minWatchTimeout * (1 + rand)`,
  which spreads many clients' reconnections apart) and is resumed where it ended, with no
  list in between: in steady state a watcher costs len(kinds) requests per 5-10 minutes;
- an ERROR event with 410 Gone (the resourceVersion is too old) means one relist, as the
  reflector does; any other failure is retried with backoff, and after
  FAILURES_BEFORE_POLLING failures in a row the kind is polled instead (a list each time,
  the interval doubling while nothing changes), which `--debug` says.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from launcher.output import debug

# client-go reflector: minWatchTimeout = 5 * time.Minute; timeoutSeconds = min * (rand + 1).
WATCH_TIMEOUT_SECONDS = 300
FAILURES_BEFORE_POLLING = 3
RETRY_BACKOFF = (1.0, 30.0)  # after a failed watch: first delay, cap (doubling)
POLL_BACKOFF = (2.0, 30.0)   # polling fallback: first interval, cap (doubling while quiet)
SHORT_WATCH = 1.0            # a watch that ends this fast with no event counts as a failure


class WatchError(Exception):
    """An ERROR event other than 410 Gone."""


class KindWatch:
    """The objects of one kind that match a label selector in a namespace, by name."""

    def __init__(self, client, kind, namespace: str, selector: str, changed: threading.Event,
                 stop: threading.Event, *, watch_timeout: int = WATCH_TIMEOUT_SECONDS,
                 rand: Callable[[], float] = random.random):
        self.client, self.kind, self.ns, self.selector = client, kind, namespace, selector
        self.changed, self.stop = changed, stop
        self.watch_timeout, self.rand = watch_timeout, rand
        self.lock = threading.Lock()
        self.objects: dict[str, dict] = {}
        self.rv: str | None = None
        self.polling = False

    # -- reading -------------------------------------------------------------------------------
    def items(self) -> list[dict]:
        with self.lock:
            return list(self.objects.values())

    def get(self, name: str) -> dict | None:
        with self.lock:
            return self.objects.get(name)

    # -- keeping current -----------------------------------------------------------------------
    def relist(self) -> bool:
        """One list; True when it changed what we hold."""
        data = self.client.list(self.kind, self.ns, label_selector=self.selector)
        fresh = {o["metadata"]["name"]: o for o in data.get("items") or []}
        with self.lock:
            differs = _versions(fresh) != _versions(self.objects)
            self.objects = fresh
            self.rv = (data.get("metadata") or {}).get("resourceVersion") or self.rv
        if differs:
            self.changed.set()
        return differs

    def _apply(self, etype: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        with self.lock:
            self.rv = meta.get("resourceVersion") or self.rv
            if etype == "BOOKMARK":
                return
            if etype == "DELETED":
                self.objects.pop(name, None)
            else:
                self.objects[name] = obj
        self.changed.set()

    def _watch_once(self) -> bool:
        """One watch until the server ends it; True when it ran as a healthy watch does."""
        timeout = int(self.watch_timeout * (1 + self.rand()))
        started, events = time.monotonic(), 0
        for etype, obj in self.client.watch(self.kind, self.ns, label_selector=self.selector,
                                            resource_version=self.rv,
                                            timeout_seconds=timeout):
            if self.stop.is_set():
                return True
            if etype == "ERROR":
                if obj.get("code") == 410:  # our resourceVersion was compacted: relist once
                    debug(f"watch on {self.kind.plural}: {obj.get('message')}; listing again")
                    self.relist()
                    return True
                raise WatchError(obj.get("message") or "ERROR event")
            events += 1
            self._apply(etype, obj)
        return events > 0 or time.monotonic() - started >= SHORT_WATCH

    def run(self) -> None:
        failures = 0
        while not self.stop.is_set():
            if failures >= FAILURES_BEFORE_POLLING:
                self._poll()
                return
            try:
                healthy = self._watch_once()
                why = "it ended at once"
            except Exception as exc:  # noqa: BLE001 - any broken watch is retried, then polled
                healthy, why = False, str(exc) or type(exc).__name__
            if healthy:
                failures = 0
                continue
            failures += 1
            delay = min(RETRY_BACKOFF[1], RETRY_BACKOFF[0] * 2 ** (failures - 1))
            debug(f"watch on {self.kind.plural} failed ({why}), {failures} in a row")
            self.stop.wait(delay * (0.5 + self.rand() / 2))

    def _poll(self) -> None:
        self.polling = True
        interval = POLL_BACKOFF[0]
        debug(f"watches on {self.kind.plural} keep failing: polling instead, every "
              f"{POLL_BACKOFF[0]:g}s doubling to {POLL_BACKOFF[1]:g}s while nothing changes")
        while not self.stop.wait(interval):
            try:
                changed = self.relist()
            except Exception as exc:  # noqa: BLE001 - keep polling; the waiter has a timeout
                debug(f"polling {self.kind.plural} failed: {exc}")
                changed = False
            interval = POLL_BACKOFF[0] if changed else min(POLL_BACKOFF[1], interval * 2)


def _versions(objects: dict[str, dict]) -> dict[str, str | None]:
    return {n: (o.get("metadata") or {}).get("resourceVersion") for n, o in objects.items()}


class JobWatch:
    """Lists each kind once, then keeps it current in a background thread per kind."""

    def __init__(self, client, namespace: str, selector: str, kinds, **kw):
        self.changed = threading.Event()
        self._stop = threading.Event()
        self.kinds = {kind.resource: KindWatch(client, kind, namespace, selector, self.changed,
                                               self._stop, **kw)
                      for kind in kinds}
        self._threads: list[threading.Thread] = []

    def start(self) -> JobWatch:
        for w in self.kinds.values():
            w.relist()
        for key, w in self.kinds.items():
            t = threading.Thread(target=w.run, daemon=True, name=f"hvdk8s-watch-{key}")
            t.start()
            self._threads.append(t)
        self.changed.clear()
        return self

    def of(self, kind) -> KindWatch:
        return self.kinds[kind.resource]

    def has(self, kind) -> bool:
        return kind.resource in self.kinds

    def wait(self, seconds: float | None) -> bool:
        """Until something changed (True) or `seconds` passed (None: no limit)."""
        fired = self.changed.wait(None if seconds is None else max(0.0, seconds))
        self.changed.clear()
        return fired

    @property
    def polling(self) -> list[str]:
        return [k for k, w in self.kinds.items() if w.polling]

    def close(self) -> None:
        self._stop.set()

    def __enter__(self) -> JobWatch:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
