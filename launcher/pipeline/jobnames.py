"""A name for a job submitted without `--name`, free in its namespace (mpijob.jobspec.jobname)."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator

from launcher.errors import UserError
from mpijob.jobspec.jobname import SUFFIX_ALPHABET, SUFFIX_LENGTH, base_name, generate

# 27^5 suffixes: even a namespace with thousands of jobs takes a handful of tries at most.
MAX_TRIES = 100


def random_suffixes() -> Iterator[str]:
    while True:
        yield "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))


def taken_names(backend, namespace: str | None) -> set[str]:
    """The names of the jobs the backend knows in the namespace (none without a backend: an
    offline dry run has nothing to compare with)."""
    if backend is None:
        return set()
    try:
        return {status.name for status in backend.list(namespace)}
    except UserError:
        # Listing refused (RBAC) or failed: the backend's own check at creation still
        # refuses a taken name, and 27^5 suffixes make that rare.
        return set()


def generated_name(*, model: str, command: tuple[str, ...], shell: bool, workers: int,
                   backend, namespace: str | None) -> str:
    workers = workers if isinstance(workers, int) and workers > 0 else 1  # checked later
    taken = taken_names(backend, namespace)
    return generate(base_name(model, command, shell), workers, taken,
                    itertools.islice(random_suffixes(), MAX_TRIES))
