"""The phases of a job, one definition for every backend, the experiment records and the
calibration that reads them.

Named as the MPI Operator's conditions name them. Records keep the plain strings (the
`.value`s): they go to JSON, YAML and CSV as they are. Imports nothing, so `list` and
`get` load it without loading pydantic.
"""

from __future__ import annotations

from enum import Enum


class JobPhase(Enum):
    PENDING = "Pending"
    QUEUED = "Queued"  # Pending because a gang scheduler holds it (its reason in the message)
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"  # the state could not be read (the reason in the message)

    @property
    def terminal(self) -> bool:
        """Nothing more will happen to the job."""
        return self in (JobPhase.SUCCEEDED, JobPhase.FAILED)

    @classmethod
    def of(cls, text: str | None) -> JobPhase:
        """The phase a record names; UNKNOWN for anything else."""
        try:
            return cls(text)
        except ValueError:
            return cls.UNKNOWN


# The reason of a job ended because its ranks stopped reporting steps (--stall-timeout), and
# of `wait`'s exit 3: the supervisor writes it, the CLI reads it.
STALLED_REASON = "stalled"
# The reason of a job past --start-timeout (launcher/backends/kubernetes/start_guard.py).
START_TIMEOUT_REASON = "StartTimeout"
