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


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's AGE column: how long ago, as k8s.io/apimachinery/pkg/util/duration.
    HumanDuration writes it (`45s`, `5m30s`, `17m`, `5h12m`, `30h`, `3d4h`, `120d`, `2y30d`);
    `<unknown>` for a missing or unreadable time, as kubectl prints it."""
    if not timestamp:
        return "<unknown>"
    try:
        then = parse_utc(timestamp)
    except ValueError:
        return "<unknown>"
    seconds = int(((now or datetime.now(timezone.utc)) - then).total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m" if seconds % 60 == 0 else f"{minutes}m{seconds % 60}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"
