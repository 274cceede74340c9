"""One line of `hvdk8s doctor`: what was found, what it changes for a job, how to fix it.
Its own module so that the gang schedulers (mpijob.gang) describe themselves to doctor."""

from __future__ import annotations

from dataclasses import asdict, dataclass

OK, INFO, WARN, FAIL = "ok", "info", "warn", "fail"


@dataclass
class Finding:
    check: str
    status: str
    finding: str
    effect: str = ""
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)
