"""Elastic jobs (Horovod elastic, https://horovod.readthedocs.io/en/stable/elastic_include.html):
`--min-workers N --max-workers M` with `--workers` the count to start with.

The job runs `horovodrun --min-np/--max-np --host-discovery-script` over Gloo; the workers
that are alive (Ready) are its hosts; a lost worker does not end it while at least the
minimum remain, and workers join up to the maximum. Which worker counts the job can have
(`sizes`) is what the plan predicts for, and which modes can run it (`refusal`) is said
before anything is planned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpijob.jobspec.spec import JobSpec

# The most sizes a plan predicts one by one; between, every few (a 1..4096 range is not
# 4096 placements).
MAX_SIZES_SHOWN = 12

# Why each mode other than the built-in one cannot run an elastic job, until it can.
_REFUSED = {
    "operator": ("the Kubeflow MPI Operator has no elastic MPIJob (its launcher runs a fixed "
                 "mpirun over a fixed hostfile; proposal kubeflow/mpi-operator#278)"),
    "trainjob": ("Kubeflow Trainer's TrainJob does not support elastic training yet (on its "
                 "roadmap, kubeflow/trainer#2903)"),
}


def refusal(spec: JobSpec, mode: str) -> str | None:
    """One line saying why `mode` cannot run this elastic job; None where it can (what this
    machine can give a local one, launcher.backends.local.elastic says)."""
    if not spec.elastic or mode == "pods":
        return None
    why = _REFUSED.get(mode, f"--mode {mode} has no elastic jobs")
    return (f"--min-workers/--max-workers: {why}; use --mode pods (built-in mode runs "
            "horovodrun elastic)")


def sizes(spec: JobSpec) -> list[int]:
    """The worker counts the job can have, min to max (at most MAX_SIZES_SHOWN of them,
    always with both ends and the starting count)."""
    low, high = spec.min_size, spec.max_size
    every = list(range(low, high + 1))
    if len(every) <= MAX_SIZES_SHOWN:
        return every
    step = (high - low) / (MAX_SIZES_SHOWN - 1)
    picked = {round(low + i * step) for i in range(MAX_SIZES_SHOWN)} | {spec.workers}
    return sorted(picked)
