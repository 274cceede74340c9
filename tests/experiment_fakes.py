"""A fake backend (the launcher.backends.base.Backend protocol) and submit function for the
experiment runner's fast tests: each job's fate is scripted from its submit options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from launcher.backends.base import FAILED, PENDING, RUNNING, SUCCEEDED, JobStatus
from launcher.errors import NotFound, Timeout, UserError
from launcher.pipeline.submitting import SubmitOutcome
from launcher.preparing.planning import Plan
from mpijob.phases import START_TIMEOUT_REASON


@dataclass
class Fate:
    """What happens to one job. `on_wait`: None, "interrupt" or "timeout"."""

    phase: str = SUCCEEDED
    images_per_sec: float | None = 100.0
    reason: str | None = None
    message: str | None = None
    on_wait: str | None = None
    submit_error: str | None = None
    polls_until_done: int = 0  # get() calls that still see it Running
    log_only: bool = False  # the rate only in the log, not in the status
    # Past --start-timeout: reads show it Pending, reason StartTimeout; `tidy` fails it.
    start_timeout: bool = False


@dataclass
class FakePrediction:
    images_per_sec: float
    scaling_efficiency: float

    def to_json(self) -> dict:
        return {"images_per_sec": self.images_per_sec, "scaling_efficiency": self.scaling_efficiency,
                "step_seconds": 0.1, "compute_seconds": 0.08, "allreduce_seconds": 0.02,
                "bottleneck": "compute"}


@dataclass
class FakeBackend:
    fate_of: Callable[[dict], Fate] = lambda options: Fate()
    prediction_of: Callable[[dict], FakePrediction | None] = lambda options: None
    name: str = "local"
    jobs: dict[str, dict] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    waited_timeouts: list[float | None] = field(default_factory=list)
    tidied: list[str] = field(default_factory=list)

    # -- the submit pipeline's stand-in --------------------------------------------------
    def submit_request(self, request) -> SubmitOutcome:
        options = dict(request.options.values)  # the fates read them by spec field
        fate = self.fate_of(options)
        if fate.submit_error:
            raise UserError(fate.submit_error)
        name = options["name"]
        if name in self.jobs:
            raise UserError(f"job {name} already exists")
        self.jobs[name] = {"options": options, "fate": fate, "polls": 0}
        self.submitted.append(name)
        plan = Plan(spec=None, prediction=self.prediction_of(options))
        return SubmitOutcome(name, options.get("namespace") or "default", backend=self, plan=plan)

    # -- Backend protocol -----------------------------------------------------------------
    def _job(self, name: str) -> dict:
        if name not in self.jobs:
            raise NotFound(f"job {name} not found")
        return self.jobs[name]

    def _status(self, name: str, phase: str) -> JobStatus:
        job = self._job(name)
        fate: Fate = job["fate"]
        o = job["options"]
        done = phase in (SUCCEEDED, FAILED)
        return JobStatus(
            name=name, namespace="default", backend=self.name, phase=phase,
            started="2025-01-01T00:00:00Z", finished="2025-01-01T00:01:30Z" if done else None,
            workers=o["workers"], gpus_per_worker=o["gpus_per_worker"],
            placement=[{"node": f"node-{i}", "gpus": [0]} for i in range(o["workers"])],
            reason=fate.reason if done else None, message=fate.message if done else None,
            images_per_sec=None if fate.log_only or not done else fate.images_per_sec,
        )

    def _overdue(self, name: str) -> JobStatus | None:
        job = self._job(name)
        if not job["fate"].start_timeout or job.get("tidied"):
            return None
        status = self._status(name, PENDING)
        status.reason, status.message = START_TIMEOUT_REASON, "not running 60s after it was scheduled"
        return status

    def tidy(self, name: str, namespace: str | None = None):
        job = self._job(name)
        self.tidied.append(name)
        if self._overdue(name) is not None:
            job["tidied"] = True
            yield f"job {name}: failed ({START_TIMEOUT_REASON}: ...)"

    def get(self, name: str, namespace: str | None = None) -> JobStatus:
        if (overdue := self._overdue(name)) is not None:
            return overdue
        job = self._job(name)
        job["polls"] += 1
        if job["polls"] <= job["fate"].polls_until_done:
            return self._status(name, RUNNING)
        return self._status(name, job["fate"].phase)

    def wait(self, name: str, namespace: str | None = None, *, timeout: float | None = None):
        job = self._job(name)
        self.waited_timeouts.append(timeout)
        if job["fate"].on_wait == "interrupt":
            raise KeyboardInterrupt
        if job["fate"].on_wait == "timeout":
            raise Timeout(f"job {name} is still Running after {timeout:g}s")
        return self._overdue(name) or self._status(name, job["fate"].phase)

    def logs(self, name: str, namespace: str | None = None, **_kw):
        fate: Fate = self._job(name)["fate"]
        yield f"starting {name}"
        if fate.phase == SUCCEEDED and fate.images_per_sec is not None:
            yield f"total images/sec: {fate.images_per_sec:.2f}"
            yield 'HVDK8S_RESULT {"world_size": 1}'
        elif fate.phase == FAILED:
            yield "Traceback (most recent call last):"
            yield "RuntimeError: rank 1 ran out of memory"

    def list(self, namespace=None, all_namespaces=False, *, live=False):
        return [self.get(n) for n in self.jobs]

    def delete(self, name: str, namespace: str | None = None) -> bool:
        if name not in self.jobs:
            return False
        del self.jobs[name]
        self.deleted.append(name)
        return True
