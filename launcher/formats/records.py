"""Field types shared by the records hvdk8s writes to files (a local job's status.json, an
experiment's result rows). Kept out of launcher.timestamps, which `list` and `get` load
without pydantic."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from launcher.timestamps import parse_utc


def _timestamp(text: str) -> str:
    parse_utc(text)  # ValueError unless in launcher.timestamps.FORMAT
    return text


# A moment as hvdk8s writes it (launcher.timestamps.FORMAT), kept as the text.
Timestamp = Annotated[str, AfterValidator(_timestamp)]
