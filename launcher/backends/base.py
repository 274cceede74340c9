"""What every backend (local processes, Kubernetes) offers the CLI, and the status it reports.

The CLI commands (`submit`, `get`, `list`, `logs`, `wait`, `delete`) talk only to this
interface, so a job behaves the same on this machine and on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: `list` and `get` stay fast without pydantic models
    from mpijob.jobspec.spec import JobSpec
    from mpijob.scheduling.placement import Placement

# Job phases, as the MPI Operator's conditions name them.
PENDING = "Pending"
QUEUED = "Queued"  # Pending because a gang scheduler holds it (its reason in the message)
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL = (SUCCEEDED, FAILED)


@dataclass
class ReplicaStatus:
    """One pod (Kubernetes) or one rank/process group (local)."""

    name: str
    role: str  # launcher | worker | rank
    phase: str
    node: str | None = None
    gpus: list[int] = field(default_factory=list)
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    restarts: int = 0


@dataclass
class JobStatus:
    name: str
    namespace: str
    backend: str
    phase: str
    mode: str | None = None
    created: str | None = None
    started: str | None = None
    finished: str | None = None
    workers: int = 0
    gpus_per_worker: int = 0
    replicas: list[ReplicaStatus] = field(default_factory=list)
    placement: list[dict] = field(default_factory=list)  # [{"node": str, "gpus": [int]}]
    reason: str | None = None
    message: str | None = None
    log_tail: list[str] = field(default_factory=list)
    images_per_sec: float | None = None
    predicted_images_per_sec: float | None = None
    result: dict | None = None  # the benchmark's HVDK8S_RESULT JSON line
    # Per worker pod, the GPUs a reporter (topology agent) says it holds vs the plan
    # (mpijob.scheduling.gpu_view.PodGpus.to_json, plus "note"); empty when nothing reported.
    gpu_allocation: list[dict] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.phase in TERMINAL

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SubmitResult:
    name: str
    namespace: str
    backend: str
    objects: list[dict] = field(default_factory=list)
    message: str | None = None


class Backend(Protocol):
    name: str

    def submit(self, spec: JobSpec, placement: Placement | None, *, mode: str) -> SubmitResult: ...

    def get(self, name: str, namespace: str | None = None) -> JobStatus: ...

    def list(self, namespace: str | None = None, all_namespaces: bool = False) -> list[JobStatus]: ...

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        follow: bool = False,
        rank: int | None = None,
        worker: int | None = None,
        all_replicas: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]: ...

    def wait(self, name: str, namespace: str | None = None, *, timeout: float | None = None) -> JobStatus: ...

    def delete(self, name: str, namespace: str | None = None) -> bool: ...
