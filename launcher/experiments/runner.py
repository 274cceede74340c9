"""Runs an experiment's matrix: submit, wait, record, delete; run after run.

Each run goes through the same pipeline as `hvdk8s submit mpi` (launcher.pipeline.submitting), then
the runner waits for it (the experiment's per-run timeout), reads `total images/sec` and the
benchmark's JSON result, saves the launcher log, appends one record to the results files,
and deletes the job. A failed run is recorded with its reason and the matrix goes on.
Runs already recorded as Succeeded are skipped, so running the same file again resumes.

With `parallel: N` (Kubernetes), up to N runs are in flight; a run that cannot be submitted
while others run (no room) waits for one of them to end and is tried again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from launcher.backends import select
from launcher.errors import Timeout, UserError
from launcher.experiments import aggregate
from launcher.experiments.results import (
    FAILED,
    NO_RESULT,
    SUCCEEDED,
    TIMED_OUT,
    ResultsStore,
)
from launcher.experiments.spec import LoadedExperiment
from launcher.formats.benchmark_result import parse_benchmark_output
from launcher.pipeline.submitting import JobOptions, SubmitRequest, run_submit
from launcher.timestamps import format_utc
from mpijob.jobspec.experiment_matrix import Run, expand, fixed_settings
from mpijob.phases import START_TIMEOUT_REASON
from mpijob.plural import plural

# Seconds between status polls when several runs are in flight.
POLL_SECONDS = {"local": 0.5, "kubernetes": 5.0}
MAX_REASON_CHARS = 400


class Reporter(Protocol):
    """What the runner tells the person watching (a progress bar, or nothing in tests)."""

    def start(self, total: int, skipped: int) -> None: ...

    def submitted(self, run: Run) -> None: ...

    def finished(self, record: dict) -> None: ...

    def note(self, message: str) -> None: ...

    def stop(self) -> None: ...


class QuietReporter:
    def start(self, total: int, skipped: int) -> None: ...

    def submitted(self, run: Run) -> None: ...

    def finished(self, record: dict) -> None: ...

    def note(self, message: str) -> None: ...

    def stop(self) -> None: ...


class Interrupted(Exception):
    """Ctrl-C: the running jobs were deleted (or are listed in `left_running`)."""

    def __init__(self, recorded: int, remaining: int, left_running: list[str]):
        super().__init__("interrupted")
        self.recorded = recorded
        self.remaining = remaining
        self.left_running = left_running


@dataclass
class Summary:
    total: int  # runs in the matrix
    skipped: int  # already succeeded before this invocation
    recorded: list[dict] = field(default_factory=list)  # records written now

    def count(self, status: str) -> int:
        return sum(1 for r in self.recorded if r["status"] == status)

    @property
    def all_succeeded(self) -> bool:
        return all(r["status"] == SUCCEEDED for r in self.recorded)


@dataclass
class _InFlight:
    run: Run
    name: str
    namespace: str
    backend: Any
    plan: Any
    submitted: datetime
    deadline: float  # on `clock`


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(moment: datetime | None) -> str | None:
    return format_utc(moment) if moment else None


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def one_line(text: str | None) -> str | None:
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def submit_options(loaded: LoadedExperiment, run: Run) -> JobOptions:
    """The run as `hvdk8s submit mpi` options, as the spec fields take them."""
    exp = loaded.experiment
    values = {
        "name": run.run_id, "workers": run.workers, "gpus_per_worker": run.gpus,
        "image": exp.image, "namespace": exp.namespace, "placement_policy": run.placement,
        "benchmark.model": run.model, "benchmark.batch_size": run.batch_size,
        "benchmark.num_batches": run.num_batches,
        "benchmark.num_warmup_batches": run.num_warmup_batches,
        "benchmark.image_size": run.image_size, "benchmark.use_fp16": run.precision == "fp16",
        "benchmark.xla": run.xla, "env": exp.env, "cpu": exp.cpu, "memory": exp.memory,
        "node_selector": exp.node_selector, "benchmark.data_name": run.data,
        "benchmark.data_dir": _data_dir(loaded) if run.data != "synthetic" else None}
    return JobOptions({k: v for k, v in values.items() if v is not None})


def _data_dir(loaded: LoadedExperiment) -> str | None:
    """The experiment's data_dir; on this machine relative to the experiment file."""
    exp = loaded.experiment
    if exp.data_dir is None or exp.backend != "local" or Path(exp.data_dir).is_absolute():
        return exp.data_dir
    return str((loaded.path.parent / exp.data_dir).resolve())


def _default_submit(request):
    return run_submit(request)


def _default_open_backend(name: str, context: str | None, namespace: str | None):
    return select.make_backend(name, context=context, namespace=namespace)


class ExperimentRunner:
    def __init__(
        self,
        loaded: LoadedExperiment,
        store: ResultsStore,
        *,
        backend: str | None = None,
        context: str | None = None,
        rerun: bool = False,
        limit: int | None = None,
        reporter: Reporter | None = None,
        submit: Callable[[Any], Any] | None = None,
        open_backend: Callable[[str, str | None, str | None], Any] | None = None,
        poll_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        calibration: str | None = None,
    ):
        self.loaded = loaded
        self.calibration = calibration
        self.experiment = loaded.experiment
        self.store = store
        self.backend_name = backend or self.experiment.backend
        self.context = context
        self.rerun = rerun
        self.limit = limit
        self.reporter = reporter or QuietReporter()
        # Looked up now, not at import: tests replace the module's defaults.
        self._submit = submit or _default_submit
        self._open_backend = open_backend or _default_open_backend
        self.poll_seconds = poll_seconds if poll_seconds is not None else POLL_SECONDS.get(
            self.backend_name, 5.0)
        self.clock = clock
        self.sleep = sleep
        # This machine runs one job at a time: two would share its cores and GPUs.
        self.parallel = 1 if self.backend_name == "local" else self.experiment.parallel
        self._records: dict[str, dict] = {}  # run id -> its latest record
        self._submitting: Run | None = None
        self._fixed = {**fixed_settings(self.experiment), "backend": self.backend_name}

    # ------------------------------------------------------------------ planning
    def plan(self) -> tuple[list[Run], list[Run]]:
        """(runs to do now, runs skipped as already succeeded)."""
        runs = self.runs()
        done = set() if self.rerun else self.store.succeeded_ids()
        todo = [r for r in runs if r.run_id not in done]
        skipped = [r for r in runs if r.run_id in done]
        if self.limit is not None:
            todo = todo[: self.limit]
        return todo, skipped

    def runs(self) -> list[Run]:
        """The matrix; with --backend overriding the file, the ids follow the backend used."""
        experiment = self.experiment
        if self.backend_name != experiment.backend:
            experiment = experiment.model_copy(update={"backend": self.backend_name})
        return expand(experiment)

    # --------------------------------------------------------------------- running
    def run(self) -> Summary:
        todo, skipped = self.plan()
        summary = Summary(total=len(self.runs()), skipped=len(skipped))
        self._records = self.store.latest()
        if skipped:
            self.reporter.note(f"{len(skipped)} of {plural(summary.total, 'run')} already succeeded in "
                               f"{self.store.root} (skipped; --rerun runs them again)")
        self.reporter.start(len(todo), len(skipped))
        pending = list(todo)
        inflight: list[_InFlight] = []
        backend = None
        try:
            backend = self._open_backend(self.backend_name, self.context, self.experiment.namespace)
            if pending:
                # No cluster access fails here, once, instead of in every run's record.
                backend.list(self.experiment.namespace)
            while pending or inflight:
                self._fill(pending, inflight, backend, summary)
                if not inflight:
                    continue
                for job, status, timed_out, error in self._wait_any(inflight):
                    summary.recorded.append(self._finish(job, status, timed_out, error))
                    inflight.remove(job)
        except KeyboardInterrupt:
            left = self._stop_all(inflight, backend)
            raise Interrupted(len(summary.recorded), len(pending) + len(inflight), left) from None
        finally:
            self.reporter.stop()
        return summary

    def _fill(self, pending: list[Run], inflight: list[_InFlight], backend,
              summary: Summary) -> bool:
        """Submit until `parallel` runs are in flight; True when a run waits for room."""
        while pending and len(inflight) < self.parallel:
            run = pending[0]
            try:
                job = self._start(run, backend)
            except Exception as exc:  # a bad run must not stop the matrix
                if inflight:
                    # Probably no room while the others run: try again when one has ended.
                    self.reporter.note(f"{run.run_id}: not submitted while "
                                       f"{plural(len(inflight), 'run is', 'runs are')} in flight "
                                       f"({one_line(str(exc))}); "
                                       "trying again when one ends")
                    return True
                pending.pop(0)
                summary.recorded.append(self._record_submit_failure(run, exc))
                continue
            pending.pop(0)
            inflight.append(job)
        return False

    def _start(self, run: Run, backend) -> _InFlight:
        self._delete_leftover(run, backend)
        request = SubmitRequest(
            options=submit_options(self.loaded, run), backend=self.backend_name,
            context=self.context, mode=self.experiment.mode,
            cluster=str(self.loaded.cluster) if self.loaded.cluster else None,
            calibration=self.calibration,
        )
        submitted = utc_now()
        self._submitting = run  # stays set if Ctrl-C lands mid-submit: the job may exist
        try:
            outcome = self._submit(request)
        except Exception:
            self._submitting = None
            raise
        self._submitting = None
        self.reporter.submitted(run)
        return _InFlight(run=run, name=outcome.name, namespace=outcome.namespace,
                         backend=outcome.backend or backend, plan=outcome.plan,
                         submitted=submitted, deadline=self.clock() + self.experiment.timeout)

    def _delete_leftover(self, run: Run, backend) -> None:
        """A job of this run still there was left by a runner that was killed: its name is
        this run's, so nobody else owns it."""
        try:
            if backend.delete(run.run_id, self.experiment.namespace):
                self.reporter.note(f"{run.run_id}: deleted the job left by an earlier, "
                                   "interrupted invocation")
        except UserError:
            pass  # submit will say what is wrong

    def _wait_any(self, inflight: list[_InFlight]):
        """Runs that ended (or ran out of time): [(job, status, timed_out, error)]."""
        if len(inflight) == 1:
            # Nothing else can start before this one ends: let the backend wait for it.
            job = inflight[0]
            left = max(job.deadline - self.clock(), 0.0)
            try:
                status = job.backend.wait(job.name, job.namespace, timeout=left)
                return [(job, self._settled(job, status), False, None)]
            except Timeout:
                return [(job, self._status_or_none(job), True, None)]
            except UserError as exc:
                return [(job, None, False, exc)]
        while True:
            ended = []
            for job in inflight:
                try:
                    status = job.backend.get(job.name, job.namespace)
                except UserError as exc:
                    ended.append((job, None, False, exc))
                    continue
                if status.done or status.reason == START_TIMEOUT_REASON:
                    ended.append((job, self._settled(job, status), False, None))
                elif self.clock() >= job.deadline:
                    ended.append((job, status, True, None))
            if ended:
                return ended
            self.sleep(self.poll_seconds)

    @staticmethod
    def _settled(job: _InFlight, status):
        """A job past --start-timeout will not start, and reading it fails nothing: the
        explicit step (`hvdk8s tidy`) fails it, so that its record has the cluster's reason
        (with the registry's answer for an image that does not pull)."""
        if status.done or status.reason != START_TIMEOUT_REASON:
            return status
        try:
            for _ in job.backend.tidy(job.name, job.namespace):
                pass
            return job.backend.get(job.name, job.namespace)
        except UserError:  # not allowed to fail it (RBAC): the reading is the record
            return status

    @staticmethod
    def _status_or_none(job: _InFlight):
        try:
            return job.backend.get(job.name, job.namespace)
        except UserError:
            return None

    # ------------------------------------------------------------------ recording
    def _finish(self, job: _InFlight, status, timed_out: bool, error: Exception | None) -> dict:
        """Record the run, then delete its job (the record is on disk first)."""
        ended = utc_now()
        lines = self._logs(job)
        log_path = self.store.save_log(job.run.run_id, lines) if lines else None
        images_per_sec = getattr(status, "images_per_sec", None)
        result = getattr(status, "result", None)
        if images_per_sec is None or result is None:
            parsed_rate, parsed_result = parse_benchmark_output(lines)
            images_per_sec = images_per_sec if images_per_sec is not None else parsed_rate
            result = result if result is not None else parsed_result
        phase = getattr(status, "phase", None)
        if error is not None:
            outcome, reason = FAILED, f"lost track of the job: {error}"
        elif timed_out:
            outcome = TIMED_OUT
            reason = f"still {phase or 'unknown'} after {self.experiment.timeout:g}s (timeout)"
        elif phase == SUCCEEDED and images_per_sec is not None:
            outcome, reason = SUCCEEDED, None
        elif phase == SUCCEEDED:
            outcome, reason = NO_RESULT, "the job succeeded but printed no `total images/sec`"
        else:
            outcome, reason = FAILED, _failure_reason(status, lines)
        record = self._record(
            job.run, status=outcome, reason=reason, images_per_sec=images_per_sec,
            result=result, plan=job.plan, job_status=status, submitted=job.submitted,
            ended=ended, log_path=log_path,
        )
        record = self._append(record)
        try:
            job.backend.delete(job.name, job.namespace)
        except UserError as exc:
            self.reporter.note(f"{job.name}: recorded, but not deleted: {exc}")
        return record

    def _record_submit_failure(self, run: Run, exc: BaseException) -> dict:
        now = utc_now()
        message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        record = self._record(run, status=FAILED, reason=f"not submitted: {message}",
                              images_per_sec=None, result=None, plan=None, job_status=None,
                              submitted=now, ended=now, log_path=None)
        return self._append(record)

    def _append(self, record: dict) -> dict:
        record = self.store.append(record)
        self._records[record["run_id"]] = record
        self.reporter.finished(record)
        return record

    def _logs(self, job: _InFlight) -> list[str]:
        try:
            return list(job.backend.logs(job.name, job.namespace))
        except UserError:
            return []

    def _record(self, run: Run, *, status: str, reason: str | None, images_per_sec,
                result, plan, job_status, submitted: datetime, ended: datetime,
                log_path) -> dict:
        prediction = getattr(plan, "prediction", None)
        predicted = prediction.to_json() if prediction is not None else None
        predicted_ips = (predicted or {}).get("images_per_sec")
        if predicted_ips is None and job_status is not None:
            predicted_ips = job_status.predicted_images_per_sec
        started = parse_time(getattr(job_status, "started", None))
        finished = parse_time(getattr(job_status, "finished", None))
        placement = _placement_detail(job_status, plan)
        record = {
            "run_id": run.run_id, "experiment": run.experiment, **run.point(),
            "repetition": run.repetition, "backend": self.backend_name,
            "status": status, "reason": one_line(reason),
            "images_per_sec": images_per_sec,
            "predicted_images_per_sec": predicted_ips,
            "scaling_efficiency": None, "efficiency_source": None,
            "predicted_scaling_efficiency": (predicted or {}).get("scaling_efficiency"),
            "nodes": len({p.get("node") for p in placement if p.get("node")}) or None,
            "placement_detail": placement,
            "submitted": rfc3339(submitted), "started": rfc3339(started),
            "finished": rfc3339(finished),
            "duration_seconds": (round((finished - started).total_seconds(), 3)
                                 if started and finished else None),
            "wall_seconds": round((ended - submitted).total_seconds(), 3),
            "config_hash": run.config_hash,
            "log": str(log_path.relative_to(self.store.root)) if log_path else None,
            "settings": self._fixed,
            "prediction": predicted,
            "result": result,
            "input_wait_share": (result or {}).get("input_wait_share"),
        }
        others = [r for rid, r in self._records.items() if rid != run.run_id]
        baselines = aggregate.single_rank_baselines([*others, record])
        value, source = aggregate.efficiency(record, baselines)
        record["scaling_efficiency"] = round(value, 4) if value is not None else None
        record["efficiency_source"] = source
        return record

    # ------------------------------------------------------------------ stopping
    def _stop_all(self, inflight: list[_InFlight], backend) -> list[str]:
        """Delete the running jobs (and one caught mid-submit); the names of those that
        could not be deleted."""
        jobs = [(job.name, job.namespace, job.backend) for job in inflight]
        if self._submitting is not None and backend is not None:
            jobs.append((self._submitting.run_id, self.experiment.namespace, backend))
        left = []
        for name, namespace, owner in jobs:
            try:
                self.reporter.note(f"deleting {name} ...")
                owner.delete(name, namespace)
            except (UserError, KeyboardInterrupt):
                left.append(name)
        return left


def _placement_detail(job_status, plan) -> list[dict]:
    """Where the ranks ran: the backend's report, else the plan's placement."""
    reported = list(getattr(job_status, "placement", None) or [])
    if reported:
        return [{"node": p.get("node"), "gpus": list(p.get("gpus") or [])} for p in reported]
    placement = getattr(plan, "placement", None)
    if placement is None:
        return []
    return [{"node": a.node, "gpus": list(a.gpus)} for a in placement.assignments]


def _failure_reason(status, lines: list[str]) -> str:
    if status is None:
        return "no status"
    parts = [p for p in (status.reason, status.message) if p]
    text = ": ".join(parts)
    tail = [t for t in (status.log_tail or lines[-5:]) if t.strip()]
    if tail:
        text = f"{text} (last log line: {tail[-1].strip()})" if text else f"last log line: {tail[-1].strip()}"
    return text or f"job ended {status.phase}"
