"""Gang schedulers behind one protocol (mpijob.gang.base), one module per scheduler, and the
registry: which exist, in the order `--gang` prefers them when several are installed.

Nothing outside this package compares a gang scheduler's name (tests/test_gang_registry.py)."""

from __future__ import annotations

from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler
from mpijob.gang.coscheduling import Coscheduling
from mpijob.gang.kai import Kai
from mpijob.gang.kueue import Kueue
from mpijob.gang.volcano import Volcano

NONE = "none"
SCHEDULERS: dict[str, GangScheduler] = {s.name: s for s in (Volcano(), Coscheduling(), Kueue(),
                                                                Kai())}
NAMES = (NONE, *SCHEDULERS)

__all__ = ["NAMES", "NONE", "OPERATOR", "PODS", "SCHEDULERS", "ApiKind", "GangRequest",
           "GangScheduler", "get", "installed", "listed"]


def get(name: str | None) -> GangScheduler | None:
    """The scheduler of that name; None for "none" (hvdk8s's own all-or-nothing check)."""
    return SCHEDULERS.get(name or NONE)


def listed() -> str:
    """The schedulers for a sentence: "Volcano, scheduler-plugins or Kueue"."""
    titles = [s.short_title for s in SCHEDULERS.values()]
    return ", ".join(titles[:-1]) + " or " + titles[-1]


def installed(groups: set[str] | frozenset[str]) -> GangScheduler | None:
    """The scheduler `--gang` picks among those whose API group discovery lists."""
    return next((s for s in SCHEDULERS.values() if s.group in groups), None)
