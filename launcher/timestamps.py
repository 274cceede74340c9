"""Timestamps as hvdk8s writes and reads them: UTC, to the second, RFC 3339 with a `Z`, the
form the Kubernetes API uses for creationTimestamp and condition times."""

from __future__ import annotations

from datetime import datetime, timezone

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(FORMAT)


def utc_now() -> str:
    return format_utc(datetime.now(timezone.utc))


def parse_utc(text: str) -> datetime:
    """ValueError when `text` is not in FORMAT."""
    return datetime.strptime(text, FORMAT).replace(tzinfo=timezone.utc)
