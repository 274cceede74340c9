"""The results directory of an experiment:

    results.jsonl   one JSON object per finished run (the full record)
    results.csv     the same records, flat, for spreadsheets and pandas
    logs/<run_id>.log  each run's launcher log, kept after its job is deleted
    plots (report):    placement.png, scaling.png, predicted.png

Both files are appended to and flushed to disk after every run, so an interruption loses
at most the run in progress. A run may appear several times (a failure, then a retry, or
--rerun): the last record of a run id is the one that counts.

A record is a `ResultRow` (its fields are the CSV's columns, in order, plus three nested
JSON objects that only results.jsonl keeps): it is checked when written and when read, and
handed on as a plain dict, which the aggregation and mpijob.perf.calibration work on.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from launcher.errors import UserError
from launcher.formats.records import Timestamp
from mpijob.phases import JobPhase

SUCCEEDED = JobPhase.SUCCEEDED.value
FAILED = JobPhase.FAILED.value
TIMED_OUT = "TimedOut"
NO_RESULT = "NoResult"  # the job succeeded but printed no `total images/sec`
STATUSES = (SUCCEEDED, FAILED, TIMED_OUT, NO_RESULT)


def _json_text(value: Any) -> Any:
    """A CSV cell holds nested values as JSON text."""
    return json.loads(value) if isinstance(value, str) else value


class Placed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: str | None = None
    gpus: list[int] = []


class ResultRow(BaseModel):
    """One run of an experiment. Only run_id is required: rows written by hand or by an
    older hvdk8s may lack fields, which read as null."""

    model_config = ConfigDict(extra="forbid")
    run_id: str
    experiment: str | None = None
    # The matrix point (mpijob.jobspec.experiment_matrix.Run.point) and repetition.
    model: str | None = None
    workers: int | None = None
    gpus: int | None = None
    placement: str | None = None
    batch_size: int | None = None
    precision: str | None = None
    image_size: int | None = None
    num_batches: int | None = None
    num_warmup_batches: int | None = None
    xla: bool | None = None
    data: str | None = None  # the benchmark's input; absent (older rows): synthetic
    repetition: int | None = None
    backend: str | None = None
    status: Literal[STATUSES] | None = None  # type: ignore[valid-type]
    reason: str | None = None
    images_per_sec: float | None = None
    predicted_images_per_sec: float | None = None
    scaling_efficiency: float | None = None
    efficiency_source: Literal["measured", "predicted"] | None = None
    predicted_scaling_efficiency: float | None = None
    nodes: int | None = None
    placement_detail: Annotated[list[Placed] | None, BeforeValidator(_json_text)] = None
    submitted: Timestamp | None = None
    started: Timestamp | None = None
    finished: Timestamp | None = None
    duration_seconds: float | None = None
    wall_seconds: float | None = None
    config_hash: str | None = None
    input_wait_share: float | None = None  # the ranks' share of step time spent on input
    log: str | None = None  # the run's launcher log, relative to the results directory
    # Nested, so in results.jsonl only:
    settings: dict | None = None  # the experiment's fixed settings
    prediction: dict | None = None  # the performance model's prediction
    result: dict | None = None  # the benchmark's HVDK8S_RESULT line


JSONL_ONLY = ("settings", "prediction", "result")
CSV_COLUMNS = tuple(f for f in ResultRow.model_fields if f not in JSONL_ONLY)


def csv_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _row(data: dict) -> dict | None:
    """The record as a checked plain dict, None when it is not a ResultRow."""
    try:
        return ResultRow.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return None


class ResultsStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.skipped_lines = 0  # unreadable lines or rows met by the last `records()`

    @property
    def jsonl_path(self) -> Path:
        return self.root / "results.jsonl"

    @property
    def csv_path(self) -> Path:
        return self.root / "results.csv"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    def exists(self) -> bool:
        return self.jsonl_path.is_file() or self.csv_path.is_file()

    # ------------------------------------------------------------------ writing
    def append(self, record: dict) -> dict:
        """Add one run's record to both files, on disk before returning; the record as
        written (every field of a ResultRow). ValidationError for a record that is not one."""
        record = ResultRow.model_validate(record).model_dump(mode="json")
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.jsonl_path, "a") as f:
            f.write(json.dumps(record) + "\n")
            _sync(f)
        columns = self._csv_header() or list(CSV_COLUMNS)
        new_file = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        with open(self.csv_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(columns)
            writer.writerow([csv_cell(record.get(c)) for c in columns])
            _sync(f)
        return record

    def _csv_header(self) -> list[str] | None:
        """An existing file keeps its columns, so rows always line up with its header."""
        try:
            with open(self.csv_path, newline="") as f:
                return next(csv.reader(f), None)
        except FileNotFoundError:
            return None

    def save_log(self, run_id: str, lines: list[str]) -> Path:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        path = self.logs_dir / f"{run_id}.log"
        path.write_text("".join(line + "\n" for line in lines))
        return path

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One runner per results directory: two would run the same jobs twice."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / ".lock"
        with open(path, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "?"
                raise UserError(f"{self.root} is in use by another `hvdk8s experiment run` "
                                f"(pid {holder}); wait for it or give another --out") from None
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ reading
    def records(self) -> list[dict]:
        """Every record in file order (JSON Lines; the CSV when only it is there). A line
        cut by a crash mid-write, or a row that is not a ResultRow, is skipped and counted."""
        self.skipped_lines = 0
        if self.jsonl_path.is_file():
            with open(self.jsonl_path) as f:
                return self._checked(_json_or_none(line) for line in f if line.strip())
        if self.csv_path.is_file():
            with open(self.csv_path, newline="") as f:
                return self._checked({k: v or None for k, v in row.items() if k}
                                     for row in csv.DictReader(f))
        return []

    def _checked(self, values) -> list[dict]:
        out = []
        for value in values:
            row = _row(value) if isinstance(value, dict) and value.get("run_id") else None
            if row is None:
                self.skipped_lines += 1
            else:
                out.append(row)
        return out

    def latest(self) -> dict[str, dict]:
        """The last record of each run id, in the order the runs were first recorded."""
        out: dict[str, dict] = {}
        for record in self.records():
            out[record["run_id"]] = record
        return out

    def succeeded_ids(self) -> set[str]:
        return {rid for rid, r in self.latest().items() if r.get("status") == SUCCEEDED}


def _json_or_none(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _sync(f) -> None:
    f.flush()
    try:
        os.fsync(f.fileno())
    except OSError:  # a file system without fsync (some FUSE mounts): flushed is enough
        pass
