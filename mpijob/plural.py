"""Counted nouns for messages: "1 rank", "2 ranks", never "1 ranks" or "2 rank(s)"."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, with `many` (default noun + "s") unless count is 1."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
