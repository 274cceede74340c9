"""Where local jobs keep their state, and how it is written.

    $HVDK8S_HOME (default ~/.hvdk8s)/jobs/<namespace>/<name>/
        spec.json       the JobSpec as submitted
        launch.json     what the supervisor runs: argv, cwd, environment overrides
        hostfile        `localhost slots=<ranks>`
        status.json     phase, times, pids, exit code, result (`StatusRecord`)
        supervisor.log  the supervisor's own errors (normally empty)
        launcher.log    mpirun's combined stdout and stderr
        bin/            python, python3, pip, horovodrun: the Python that runs hvdk8s
        ranks/rank.<i>.log   rank i's stdout and stderr (local_rank writes it; jobs of
                        earlier versions have Open MPI 4's ranks/1/rank.<i>/stdout)
        rank-exits/<i>  how rank i ended, "exit N" or "signal N" (local_rank writes it)

A job directory appears whole (built under a hidden name, then renamed), and JSON files
are replaced atomically (temporary file, then rename), so readers never see half of one.
After `submit`, status.json has one writer: the job's supervisor. Other tools, full disks
and hand edits can still break a file: reading one raises UnreadableState, which names it,
and never breaks more than that one job.

status.json is a `StatusRecord`: every field has a default, so the files of earlier
versions (which lacked some fields) still read, and a field that is not one of its own or
has the wrong type makes the file unreadable, naming the field.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from launcher.backends.base import check_job, check_namespace
from launcher.backends.local import rank as local_rank
from launcher.errors import UserError
from launcher.formats.home import home
from launcher.formats.records import Timestamp
from launcher.timestamps import utc_now
from mpijob.jobspec import defaults
from mpijob.phases import JobPhase

DEFAULT_NAMESPACE = defaults.NAMESPACE  # as on a cluster: -n default is left out of hints



def jobs_root() -> Path:
    return home() / "jobs"


class _InDir:
    """A file or folder of the job directory (`JobPaths.dir`), by its name there."""

    def __init__(self, name: str):
        self.name = name

    @overload
    def __get__(self, paths: None, owner: type) -> _InDir: ...
    @overload
    def __get__(self, paths: JobPaths, owner: type) -> Path: ...
    def __get__(self, paths, owner):
        return self if paths is None else paths.dir / self.name


@dataclass(frozen=True)
class JobPaths:
    dir: Path

    # The layout the module docstring lists.
    spec = _InDir("spec.json")
    launch = _InDir("launch.json")
    hostfile = _InDir("hostfile")
    status = _InDir("status.json")
    supervisor_log = _InDir("supervisor.log")
    launcher_log = _InDir("launcher.log")
    shims = _InDir(local_rank.SHIMS)
    ranks = _InDir(local_rank.LOGS)
    rank_exits = _InDir(local_rank.EXITS)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def namespace(self) -> str:
        return self.dir.parent.name

    def rank_log(self, rank: int) -> Path:
        """The rank wrapper's file; a job of an earlier version has what Open MPI 4's
        --output-filename wrote, `<dir>/<job id>/rank.<rank>/stdout` (job id looked up)."""
        own = self.ranks / local_rank.log_name(rank)
        if own.exists():
            return own
        found = sorted(self.ranks.glob(f"*/rank.{rank}/stdout"))
        return found[0] if found else own


def job_paths(name: str, namespace: str) -> JobPaths:
    """The job's directory; a name or namespace that is not one (`..`), or a directory that
    resolves outside the state directory, is refused before anything reads or removes it."""
    check_job(name, namespace)
    return JobPaths(_inside(jobs_root() / namespace / name))


def _inside(path: Path) -> Path:
    root = jobs_root().resolve()
    if not path.resolve().is_relative_to(root):
        raise UserError(f"{path} resolves to {path.resolve()}, outside the state directory "
                        f"{root}; nothing was read or removed")
    return path


def all_job_paths(namespace: str | None) -> list[JobPaths]:
    """Job directories of one namespace, or of all when `namespace` is None, by name."""
    root = jobs_root()
    if namespace is not None:
        namespaces = [_inside(root / check_namespace(namespace))]
    else:
        namespaces = sorted(p for p in _subdirs(root))
    found: list[JobPaths] = []
    for ns_dir in namespaces:
        found.extend(JobPaths(d) for d in sorted(_subdirs(ns_dir)))
    return found


def _subdirs(path: Path) -> list[Path]:
    try:
        # Hidden entries are directories still being built by `submit`.
        return [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except FileNotFoundError:
        return []


def now() -> str:
    """RFC 3339 UTC to the second, as Kubernetes writes timestamps."""
    return utc_now()


def write_json(path: Path, data: dict) -> None:
    """Replace `path` atomically: readers see the old content or the new, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class UnreadableState(UserError):
    """A state file of a local job that exists but cannot be read back as a JSON object."""

    def __init__(self, path: Path, why: str):
        self.path, self.why = path, why
        job, namespace = path.parent.name, path.parent.parent.name
        where = "" if namespace == DEFAULT_NAMESPACE else f" -n {namespace}"
        problem = "is missing" if why == "missing" else f"is unreadable ({why})"
        super().__init__(f"job {job}: {path.name} {problem}; "
                         f"hvdk8s delete {job}{where} --backend local removes the job")


def read_json(path: Path) -> dict | None:
    """The object in `path`, or None when the file is missing (a job being deleted);
    UnreadableState when it is there but not a whole JSON object."""
    try:
        with open(path) as f:
            text = f.read()
        data = json.loads(text)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        why = "empty" if not text.strip() else (
            f"truncated or not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
        raise UnreadableState(path, why) from None
    except ValueError as exc:  # not UTF-8
        raise UnreadableState(path, f"not text: {exc}") from None
    except OSError as exc:
        raise UnreadableState(path, exc.strerror or str(exc)) from None
    if not isinstance(data, dict):
        raise UnreadableState(path, f"a JSON {type(data).__name__} where an object belongs")
    return data


class RankExit(BaseModel):
    """How one rank ended (local_rank writes it): its exit code, or the signal that ended it."""

    model_config = ConfigDict(extra="forbid")
    exit_code: int | None = None
    signal: int | None = None


class StatusRecord(BaseModel):
    """status.json: what the job is doing and how it ended. Written by `submit` (Pending),
    then only by the job's supervisor."""

    model_config = ConfigDict(extra="forbid")
    uid: str | None = None  # also HVDK8S_JOB_UID in every process of the job
    phase: JobPhase = JobPhase.PENDING
    mode: str | None = None
    node: str | None = None
    ranks: int = Field(0, ge=0)
    gpus: list[int] = []  # CUDA_VISIBLE_DEVICES, in local-rank order
    argv: list[str] = []
    rank_logs: bool = False  # each rank's output has a file of its own (ranks/)
    created: Timestamp | None = None
    started: Timestamp | None = None
    finished: Timestamp | None = None
    supervisor_pid: int | None = None  # also the session id of every process of the job
    pgid: int | None = None  # the supervisor's process group (OpenMPI gives each rank its own)
    mpirun_pid: int | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    failed_rank: int | None = None
    failed_rank_exit_code: int | None = None
    rank_exits: dict[int, RankExit] = {}  # by rank, once the job ended
    log_tail: list[str] = []
    images_per_sec: float | None = None
    predicted_images_per_sec: float | None = None  # the plan's, shown beside the measured
    result: dict | None = None  # the benchmark's HVDK8S_RESULT JSON line

    @property
    def writes_rank_logs(self) -> bool:
        """Whether each rank's output has a file of its own: hvdk8s's launch line runs each
        rank under the rank wrapper (earlier versions: Open MPI's --output-filename); a
        job's own mpirun line has the combined log only."""
        return self.rank_logs or "--output-filename" in self.argv


def _invalid(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(map(str, error["loc"]))
    problem = "not a field of this file" if error["type"] == "extra_forbidden" else error["msg"]
    return f"unexpected content: {where + ': ' if where else ''}{problem}"


def read_status(path: Path) -> StatusRecord | None:
    """The record in `path`, None when the file is missing (a job being deleted);
    UnreadableState when it is not a whole, valid record."""
    data = read_json(path)
    if data is None:
        return None
    try:
        return StatusRecord.model_validate(data)
    except ValidationError as exc:
        raise UnreadableState(path, _invalid(exc)) from None


def write_status(path: Path, record: StatusRecord) -> None:
    write_json(path, record.model_dump(mode="json"))


def _salvaged(path: Path) -> dict:
    """What can be kept of a record someone else broke: none of a file that is not JSON,
    the valid fields of one edited by hand."""
    try:
        data = read_json(path) or {}
    except UnreadableState:
        return {}
    try:
        return StatusRecord.model_validate(data).model_dump()
    except ValidationError as exc:
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
        kept = {k: v for k, v in data.items() if k not in bad}
        try:
            return StatusRecord.model_validate(kept).model_dump()
        except ValidationError:
            return {}


def update_status(paths: JobPaths, **changes) -> StatusRecord:
    """Read-modify-write of status.json; only the job's single writer calls this. A broken
    file is replaced by what could be kept of it and the changes."""
    record = StatusRecord.model_validate({**_salvaged(paths.status), **changes})
    write_status(paths.status, record)
    return record


def new_status(*, uid: str, phase: JobPhase, mode: str | None, node: str, ranks: int,
               gpus: list[int], argv: list[str], rank_logs: bool,
               predicted_images_per_sec: float | None = None) -> StatusRecord:
    return StatusRecord(uid=uid, phase=phase, mode=mode, node=node, ranks=ranks, gpus=gpus,
                        argv=argv, rank_logs=rank_logs, created=now(),
                        predicted_images_per_sec=predicted_images_per_sec)
