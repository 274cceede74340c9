"""A Kubernetes list answer parsed as it arrives, one item at a time.

`json.loads` on a 150,000-pod list holds the whole body and every object at once (about a
gigabyte at 5,000 nodes). Here the body is read in chunks; the list's own fields are
decoded whole (they are small), and the `items` array is decoded one object at a time and
handed to a `keep` function that returns what to hold (a few fields) or None to drop it,
so the whole objects never accumulate.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"
_COMPACT_AT = 1 << 18  # drop what is parsed once this much of the buffer is behind us


class TruncatedList(ValueError):
    """The body ended inside the list."""


class _Reader:
    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.done = False

    def more(self) -> None:
        chunk = next(self._chunks, None)
        if chunk is None:
            if self.done:
                raise TruncatedList("the list answer ended early")
            self.done = True
            self.buf += self._utf8.decode(b"", final=True)
            return
        if self.pos >= _COMPACT_AT:
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += self._utf8.decode(chunk)

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            self.more()

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise ValueError(f"expected {ch!r} at offset {self.pos} of a list answer")
        self.pos += 1

    def value(self):
        self.peek()  # raw_decode starts at a value, not at the whitespace before one
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                self.more()
                continue
            if end == len(self.buf) and not self.done and not isinstance(value, (dict, list, str)):
                self.more()  # a number or literal may go on in the next chunk
                continue
            self.pos = end
            return value


def parse_list(chunks: Iterable[bytes], keep: Callable[[dict], object | None]
               ) -> tuple[dict, list]:
    """(the list without its items, [keep(item) for each item, Nones left out])."""
    r = _Reader(chunks)
    head: dict = {}
    kept: list = []
    r.expect("{")
    if r.peek() == "}":
        r.pos += 1
        return head, kept
    while True:
        key = r.value()
        r.expect(":")
        if key == "items" and r.peek() == "[":
            r.pos += 1
            if r.peek() == "]":
                r.pos += 1
            else:
                while True:
                    item = keep(r.value())
                    if item is not None:
                        kept.append(item)
                    if r.peek() == ",":
                        r.pos += 1
                        continue
                    r.expect("]")
                    break
        else:
            head[key] = r.value()
        if r.peek() == ",":
            r.pos += 1
            continue
        r.expect("}")
        return head, kept
