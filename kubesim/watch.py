"""?watch=true streams: newline-delimited JSON events over chunked transfer."""

from __future__ import annotations

import json
import time

from . import errors
from .store import TooOld


def _event_line(etype: str, obj: dict) -> bytes:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"


class WatchStream:
    """Serves one watch; `run(writer)` returns when the timeout passes, the client leaves
    or the server stops."""

    def __init__(self, store, rt, namespace, label_sel, field_sel, resource_version,
                 timeout_seconds, bookmarks=False, poll=0.25, bookmark_every=5.0):
        self.store, self.rt, self.ns = store, rt, namespace
        self.ls, self.fs = label_sel, field_sel
        self.rv = resource_version
        self.deadline = time.monotonic() + timeout_seconds
        self.poll = poll
        self.bookmarks = bookmarks
        self.bookmark_every = bookmark_every

    def _bookmark(self, rv: int) -> bytes:
        return _event_line("BOOKMARK", {"kind": self.rt.kind, "apiVersion": self.rt.api_version,
                                        "metadata": {"resourceVersion": str(rv)}})

    def _match(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        m = obj["metadata"]
        if self.ns is not None and m.get("namespace", "") != self.ns:
            return False
        return self.ls.matches(m.get("labels")) and self.fs.matches(obj, self.rt.fields)

    def _translate(self, etype: str, obj: dict, old: dict | None):
        """Selector-aware event type: objects moving in/out of the selection are ADDED/DELETED."""
        if etype == "MODIFIED":
            now, before = self._match(obj), self._match(old)
            if now and before:
                return "MODIFIED"
            if now:
                return "ADDED"
            if before:
                return "DELETED"
            return None
        return etype if self._match(obj) else None

    def run(self, writer) -> None:
        store = self.store
        with store.lock:
            if self.rv in (None, "", "0"):
                # "Get state and start at most recent": synthetic ADDED for what exists now.
                initial = [o for o in store.items(self.rt.key, self.ns) if self._match(o)]
                cursor = store.rv
            else:
                initial = []
                try:
                    cursor = int(self.rv)
                except ValueError:
                    raise errors.bad_request(
                        f"invalid resource version: {self.rv!r}") from None
        for obj in sorted(initial, key=lambda o: int(o["metadata"]["resourceVersion"])):
            if not writer.write(_event_line("ADDED", obj)):
                return
        next_bookmark = time.monotonic() + self.bookmark_every
        while True:
            try:
                events = store.events_after(self.rt.key, cursor)
            except TooOld as e:
                status = errors.gone(f"too old resource version: {cursor} ({e.oldest})").status()
                writer.write(_event_line("ERROR", status))
                return
            if events:
                cursor = events[-1][0]
                for _, etype, obj, old in events:
                    t = self._translate(etype, obj, old)
                    if t and not writer.write(_event_line(t, obj)):
                        return
                continue
            now = time.monotonic()
            remaining = self.deadline - now
            if self.bookmarks and (now >= next_bookmark or remaining <= 0):
                # Bookmarks let clients resume from a fresh resourceVersion after a quiet spell.
                next_bookmark = now + self.bookmark_every
                with store.lock:
                    if not store.events_after(self.rt.key, cursor):
                        cursor = store.rv  # safe: later events of this kind get a higher rv
                if not writer.write(self._bookmark(cursor)):
                    return
            if remaining <= 0 or store.closed or not writer.alive():
                return
            with store.cond:
                if store.last_rv(self.rt.key) <= cursor and not store.closed:
                    store.cond.wait(min(remaining, self.poll))
