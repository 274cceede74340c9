"""The results directory of an experiment:

    results.jsonl   one JSON object per finished run (the full record)
    results.csv     the same records, flat, for spreadsheets and pandas
    logs/<run_id>.log  each run's launcher log, kept after its job is deleted
    plots (report):    placement.png, scaling.png, predicted.png

Both files are appended to and flushed to disk after every run, so an interruption loses
at most the run in progress. A run may appear several times (a failure, then a retry, or
--rerun): the last record of a run id is the one that counts.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from launcher.errors import UserError
from launcher.phases import JobPhase

SUCCEEDED = JobPhase.SUCCEEDED.value
FAILED = JobPhase.FAILED.value
TIMED_OUT = "TimedOut"
NO_RESULT = "NoResult"  # the job succeeded but printed no `total images/sec`
STATUSES = (SUCCEEDED, FAILED, TIMED_OUT, NO_RESULT)

CSV_COLUMNS = (
    "run_id", "experiment", "model", "workers", "gpus", "placement", "batch_size",
    "precision", "image_size", "num_batches", "num_warmup_batches", "xla", "repetition",
    "backend", "status", "reason", "images_per_sec", "predicted_images_per_sec",
    "scaling_efficiency", "efficiency_source", "predicted_scaling_efficiency", "nodes",
    "placement_detail", "submitted", "started", "finished", "duration_seconds",
    "wall_seconds", "config_hash", "log",
)
INT_COLUMNS = frozenset({"workers", "gpus", "batch_size", "image_size", "num_batches",
                         "num_warmup_batches", "repetition", "nodes"})
FLOAT_COLUMNS = frozenset({"images_per_sec", "predicted_images_per_sec", "scaling_efficiency",
                           "predicted_scaling_efficiency", "duration_seconds", "wall_seconds"})
BOOL_COLUMNS = frozenset({"xla"})
JSON_COLUMNS = frozenset({"placement_detail"})


def csv_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def from_csv_cell(column: str, text: str):
    if text == "":
        return None
    try:
        if column in INT_COLUMNS:
            return int(text)
        if column in FLOAT_COLUMNS:
            return float(text)
        if column in JSON_COLUMNS:
            return json.loads(text)
    except ValueError:
        return text
    if column in BOOL_COLUMNS:
        return text.lower() == "true"
    return text


class ResultsStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.skipped_lines = 0  # unreadable JSON lines met by the last `records()`

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
    def append(self, record: dict) -> None:
        """Add one run's record to both files, on disk before returning."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.jsonl_path, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
            _sync(f)
        columns = self._csv_header() or list(CSV_COLUMNS)
        new_file = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        with open(self.csv_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(columns)
            writer.writerow([csv_cell(record.get(c)) for c in columns])
            _sync(f)

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
        import fcntl

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
        """Every record in file order (JSON Lines; the CSV when only it is there)."""
        self.skipped_lines = 0
        if self.jsonl_path.is_file():
            out = []
            with open(self.jsonl_path) as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        value = json.loads(line)
                    except ValueError:  # a line cut by a crash mid-write
                        self.skipped_lines += 1
                        continue
                    if isinstance(value, dict) and value.get("run_id"):
                        out.append(value)
                    else:
                        self.skipped_lines += 1
            return out
        if self.csv_path.is_file():
            with open(self.csv_path, newline="") as f:
                return [{k: from_csv_cell(k, v or "") for k, v in row.items() if k}
                        for row in csv.DictReader(f) if row.get("run_id")]
        return []

    def latest(self) -> dict[str, dict]:
        """The last record of each run id, in the order the runs were first recorded."""
        out: dict[str, dict] = {}
        for record in self.records():
            out[record["run_id"]] = record
        return out

    def succeeded_ids(self) -> set[str]:
        return {rid for rid, r in self.latest().items() if r.get("status") == SUCCEEDED}


def _sync(f) -> None:
    f.flush()
    try:
        os.fsync(f.fileno())
    except OSError:  # a file system without fsync (some FUSE mounts): flushed is enough
        pass
