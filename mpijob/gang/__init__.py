"""Gang schedulers behind one protocol (mpijob.gang.base), one module per scheduler, and the
registry: which exist, in the order `--gang` prefers them when several are installed.

Nothing outside this package compares a gang scheduler's name
(tests/mpijob/gang/test_gang_registry.py)."""

from __future__ import annotations

from mpijob.gang.base import OPERATOR, PODS, ApiKind, GangRequest, GangScheduler
from mpijob.gang.coscheduling import Coscheduling
from mpijob.gang.kai import Kai
from mpijob.gang.kueue import Kueue
from mpijob.gang.volcano import Volcano
from mpijob.gang.workload_api import WorkloadApi

NONE = "none"
SCHEDULERS: dict[str, GangScheduler] = {s.name: s for s in (
    Volcano(), Coscheduling(), Kueue(), Kai(),
    # Last: Kubernetes' own, for --gang where no add-on is installed.
    WorkloadApi())}
NAMES = (NONE, *SCHEDULERS)

__all__ = ["NAMES", "NONE", "OPERATOR", "PODS", "SCHEDULERS", "ApiKind", "GangRequest",
           "GangScheduler", "get", "installed", "listed"]


def get(name: str | None) -> GangScheduler | None:
    """The scheduler of that name; None for "none" (hvdk8s's own all-or-nothing check)."""
    return SCHEDULERS.get(name or NONE)


def listed(built_in: bool = False) -> str:
    """The add-on schedulers for a sentence: "Volcano, scheduler-plugins, Kueue or KAI";
    with `built_in`, Kubernetes' own: "the Workload API (scheduling.k8s.io/v1alpha1)"."""
    titles = [s.short_title + (f" ({k.api_version})" if k is not None else "")
              for s in SCHEDULERS.values() if ((k := s.detect_kind) is not None) == built_in]
    return ", ".join(titles[:-1]) + " or " + titles[-1] if len(titles) > 1 else titles[0]


def installed(groups, served=lambda kind: False) -> GangScheduler | None:
    """The scheduler `--gang` picks among those discovery lists (`served(kind)`: whether a
    kind a scheduler declares in detect_kind is served)."""
    return next((s for s in SCHEDULERS.values() if s.installed(groups, served)), None)
