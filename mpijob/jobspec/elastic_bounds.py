"""The bounds of an elastic job (mpijob.jobspec.elastic), checked by the spec's validator:
from its values, so that the spec does not import what imports the spec."""

from __future__ import annotations

from mpijob.errors import SpecError

HOROVOD_ELASTIC_DOCS = "https://horovod.readthedocs.io/en/stable/elastic_include.html"


def check_bounds(*, min_size: int, max_size: int, workers: int, gang: str,
                 user_gives_mpirun: bool) -> None:
    """--min-workers <= --workers <= --max-workers, and an elastic job's command is a
    program (horovodrun starts it), never the user's own mpirun line. Call for elastic
    jobs only."""
    if min_size > workers:
        raise SpecError("min_workers", f"{min_size} is more than --workers "
                        f"{workers}: the job starts with --workers, at least the minimum")
    if max_size < workers:
        raise SpecError("max_workers", f"{max_size} is less than --workers "
                        f"{workers}: the job starts with --workers, at most the maximum")
    if gang != "none":
        raise SpecError("gang", "elastic jobs do not take a gang scheduler yet (its group "
                        "would have to be the minimum and admit joiners); without --gang "
                        "hvdk8s waits for the minimum to be scheduled")
    if user_gives_mpirun:
        raise SpecError("command", "an elastic job is started by horovodrun (elastic, Gloo), "
                        "not by your own launch line: give the training program, which must "
                        f"use hvd.elastic ({HOROVOD_ELASTIC_DOCS})")
