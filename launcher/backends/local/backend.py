"""The local backend: a job's ranks run as processes on this machine under real mpirun.

What a job runs is decided by `prepare` (launcher.backends.local.launching, which refuses
what this machine cannot run: no mpirun, too few free GPUs, too many ranks). `submit` starts
exactly that: it checks the name is free before it creates anything, writes the job
directory whole (see local_state), and starts a detached supervisor (local_supervisor)
that runs mpirun and records the outcome.
The other commands read that directory, so they work from any shell, while the job runs
and after it ended, as they do on Kubernetes.
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from launcher.backends.base import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    JobStatus,
    Prepared,
    ReplicaStatus,
    SubmitOptions,
    SubmitResult,
)
from launcher.backends.local import elastic as local_elastic
from launcher.backends.local import procs as local_procs
from launcher.backends.local import rank as local_rank
from launcher.backends.local.launching import (
    JobLaunch,
    LocalLaunches,
    LocalPrepared,
    ignored_options_note,
)
from launcher.backends.local.mpi import shim_scripts
from launcher.backends.local.quick_benchmark import describe_start, quick_sized
from launcher.backends.local.state import (
    DEFAULT_NAMESPACE,
    JobPaths,
    RankExit,
    StatusRecord,
    UnreadableState,
    all_job_paths,
    job_paths,
    new_status,
    read_json,
    read_status,
    write_json,
    write_status,
)
from launcher.backends.local.supervisor import (
    REPORT_TAIL_BYTES,
    STATE_DISK_FULL,
    TAIL_LINES,
    read_lines,
    tail,
    tail_text,
)
from launcher.errors import NotFound, Refused, Timeout, UsageError, UserError
from launcher.formats.causes import why
from launcher.formats.job_progress import summarize
from launcher.formats.preflight_reports import failure_reason, preflight_from_file
from launcher.formats.rank_reports import is_report_line, iter_reports
from launcher.timestamps import parse_utc
from mpijob.jobspec import defaults
from mpijob.jobspec.spec import JobSpec
from mpijob.phases import JobPhase
from mpijob.plural import plural

POLL_SECONDS = 0.2
# How long `submit` waits for the supervisor to record itself (Python start-up and imports).
START_TIMEOUT_SECONDS = 60.0
# A job that has had no supervisor for this long after creation lost it (submit crashed).
UNSUPERVISED_GRACE_SECONDS = 60.0
STOP_GRACE_SECONDS = 5.0
# The last lines of each rank that stopped reporting, shown with a stall.
STALL_TAIL_LINES = 5
# Phases of one rank of a failed job besides Succeeded and Failed (as a pod's would read):
# stopped because the job ended, or not known because nothing recorded its end.
TERMINATED = "Terminated"
UNKNOWN = JobPhase.UNKNOWN.value
# Less free than this and status.json (a few KiB with its log tail) may not have fit.
DISK_FULL_BYTES = 64 * 1024


@dataclass(frozen=True)
class LocalOptions(SubmitOptions):
    """Submit options of the local backend: the mode only (it is recorded, not acted on)."""


class LocalBackend(LocalLaunches):
    gang_note = "local backend: --gang has no effect (all ranks start together on this machine)"
    # The job commands pick Kubernetes wherever a kubeconfig is configured.
    job_command_flags = "--backend local"

    def __init__(self, namespace: str | None = None, *, poll_seconds: float = POLL_SECONDS,
                 stop_grace_seconds: float = STOP_GRACE_SECONDS):
        self._namespace = namespace or DEFAULT_NAMESPACE
        self.poll_seconds = poll_seconds
        self.stop_grace_seconds = stop_grace_seconds

    @property
    def namespace(self) -> str:
        return self._namespace

    def sized(self, values, command):
        """A bare built-in benchmark gets the quick size here (quick_benchmark.py)."""
        return quick_sized(values, command)

    def start_note(self, spec, plan, *, quick: bool) -> str | None:
        """Jobs run as processes of this machine: say what the benchmark is and how long it
        should take."""
        return describe_start(spec, plan, quick)

    # ------------------------------------------------------------------ submit
    def submit_options(self, *, mode: defaults.Mode, server_dry_run: bool,
                       schedule_timeout: float | None) -> LocalOptions:
        if server_dry_run:
            raise UsageError("--dry-run=server needs the Kubernetes backend; --dry-run shows "
                             "what the local backend would run")
        return LocalOptions(mode="pods" if mode == "auto" else mode)  # no operator here

    def submit(self, prepared: Prepared, options: SubmitOptions) -> SubmitResult:
        """Start exactly the launch that `prepare` decided (and a dry run printed)."""
        if not isinstance(prepared, LocalPrepared):
            raise TypeError("the local backend starts only what its own prepare returned")
        prediction = prepared.plan.prediction
        return self._start(prepared.spec, prepared.job, mode=options.mode,
                           predicted=prediction.images_per_sec if prediction else None)

    def _start(self, spec: JobSpec, prepared: JobLaunch, *, mode: defaults.Mode,
               predicted: float | None = None) -> SubmitResult:
        """Start the job; raises UserError, having changed nothing, when it cannot start."""
        paths = prepared.paths
        if paths.dir.exists():
            raise _exists(spec)
        uid = uuid.uuid4().hex
        status = new_status(uid=uid, phase=JobPhase.PENDING, mode=mode, node=prepared.host,
                            ranks=spec.ranks, gpus=prepared.gpus, argv=prepared.launch.argv,
                            rank_logs=prepared.launch.rank_logs,
                            predicted_images_per_sec=predicted)
        mpi = prepared.launch.mpi
        launch = {
            "argv": prepared.launch.argv,
            "env": prepared.launch.env,
            # whose mpirun it is: how its notices read when a rank fails
            "mpi": {"implementation": mpi.implementation, "major": mpi.major} if mpi else None,
            "cwd": spec.working_dir or os.getcwd(),
            "deadline_seconds": spec.run_policy.active_deadline_seconds,
            "stall_timeout_seconds": spec.stall_timeout,
            "ranks": spec.ranks,
        }
        self._create_dir(spec, paths, status, launch, prepared.hostfile)
        try:
            pid = self._start_supervisor(paths, uid)
        except BaseException:
            local_procs.terminate_job(uid, None, job_dir=str(paths.dir), grace=1.0)
            shutil.rmtree(paths.dir, ignore_errors=True)
            raise
        gpus = ",".join(map(str, prepared.gpus)) or "none (CPU)"
        notes = ignored_options_note(spec, mode)
        return SubmitResult(
            name=spec.name, namespace=spec.namespace, backend=self.name,
            objects=[{"kind": "LocalJob", "name": spec.name, "namespace": spec.namespace,
                      "dir": str(paths.dir), "supervisorPid": pid, "argv": prepared.launch.argv}],
            message=f"job {spec.name} started: {plural(spec.ranks, 'rank')} on {prepared.host}, "
                    f"GPUs {gpus}; state in {paths.dir}" + (f"\n{notes}" if notes else ""),
        )

    @staticmethod
    def _create_dir(spec: JobSpec, paths: JobPaths, status: StatusRecord, launch: dict,
                    hostfile: str) -> None:
        """Build the directory under a hidden name, then rename it into place: the rename
        fails if the name was taken meanwhile, so two submits cannot both win."""
        try:
            paths.dir.parent.mkdir(parents=True, exist_ok=True)
            building = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=paths.dir.parent))
        except OSError as exc:
            raise _cannot_write(spec, paths, exc) from None
        try:
            write_json(building / paths.spec.name, spec.model_dump(mode="json"))
            write_json(building / paths.launch.name, launch)
            write_status(building / paths.status.name, status)
            (building / paths.hostfile.name).write_text(hostfile)
            if spec.elastic:
                local_elastic.write_files(building, spec)
            shims = building / JobPaths.shims.name
            shims.mkdir()
            for name, text in shim_scripts().items():
                (shims / name).write_text(text)
                (shims / name).chmod(0o755)
            os.rename(building, paths.dir)
        except OSError as exc:
            shutil.rmtree(building, ignore_errors=True)
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _exists(spec) from None
            raise _cannot_write(spec, paths, exc) from None
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise

    @staticmethod
    def _start_supervisor(paths: JobPaths, uid: str) -> int:
        env = {**os.environ, local_procs.MARKER_ENV: uid,
               local_procs.DIR_MARKER_ENV: str(paths.dir)}
        with open(paths.supervisor_log, "ab") as log:
            starter = subprocess.Popen(
                [sys.executable, "-m", "launcher.backends.local.supervisor", str(paths.dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        try:
            code = starter.wait(timeout=START_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            starter.kill()
            starter.wait()
            code = None
        try:
            status = read_status(paths.status)
        except UnreadableState:
            status = None
        pid = status.supervisor_pid if status else None
        if code != 0 or pid is None:
            detail = " | ".join(tail(paths.supervisor_log, 5)) or f"exit status {code}"
            raise UserError(f"could not start the supervisor of job {paths.name}: {detail}")
        return pid

    # --------------------------------------------------------------------- get
    def get(self, name: str, namespace: str | None = None) -> JobStatus:
        """The job's status; UnreadableState (one line naming the file) for a broken one."""
        paths = self._existing(name, namespace)
        status = _status_of(paths, strict=True)
        if status is None:
            raise _not_found(name, paths.namespace)
        return status

    def list(self, namespace: str | None = None, all_namespaces: bool = False, *,
             live: bool = False) -> builtins.list[JobStatus]:
        """Every job; one whose state cannot be read is listed as Unknown with the reason.
        Progress is always read: it is in the job's own files here (`live` costs nothing)."""
        found = []
        try:
            every = all_job_paths(None if all_namespaces else (namespace or self.namespace))
        except OSError as exc:
            raise UserError(f"cannot read the local jobs in {exc.filename}: {exc.strerror}") from None
        for paths in every:
            status = _status_of(paths)
            if status is not None:  # None: deleted while listing
                found.append(status)
        return found

    # -------------------------------------------------------------------- logs
    def logs(self, name: str, namespace: str | None = None, *, follow: bool = False,
             rank: int | None = None, worker: int | None = None, all_replicas: bool = False,
             tail: int | None = None) -> Iterator[str]:
        """Lines (without newline) of the combined log, of one rank (stdout and stderr as
        printed), of one worker's ranks or of every rank (prefixed by the rank's name).
        With `follow`, keeps reading until the job has ended, like `tail -f`."""
        paths = self._existing(name, namespace)
        sources = self._log_sources(paths, rank, worker, all_replicas)
        if tail is not None and tail < 0:
            raise UsageError(f"--tail: expected a number of lines >= 0, got {tail}")
        return self._read_logs(paths, sources, follow=follow, tail=tail)

    def _log_sources(self, paths: JobPaths, rank: int | None, worker: int | None,
                     all_replicas: bool) -> builtins.list[tuple[str, int | None]]:
        """(line prefix, rank) per file to read; rank None is the combined log."""
        if rank is None and worker is None and not all_replicas:
            return [("", None)]  # the combined log needs no state: it works for a broken job
        status = read_status(paths.status) or StatusRecord()
        spec = read_json(paths.spec) or {}
        ranks = status.ranks
        per_worker = max(1, int(spec.get("gpus_per_worker") or 0))
        if rank is not None:
            if not 0 <= rank < ranks:
                raise UsageError(f"--rank: job {paths.name} has ranks 0..{ranks - 1}, not {rank}")
            chosen = [rank]
        elif worker is not None:
            workers = int(spec.get("workers") or 0)
            if not 0 <= worker < workers:
                raise UsageError(f"--worker: job {paths.name} has workers 0..{workers - 1}, not {worker}")
            chosen = list(range(worker * per_worker, (worker + 1) * per_worker))
        elif all_replicas:
            chosen = list(range(ranks))
        else:
            return [("", None)]
        if not status.writes_rank_logs:
            raise UserError(f"job {paths.name} runs its own mpirun line, which writes no "
                            f"per-rank logs: see hvdk8s logs {paths.name} --backend local")
        if len(chosen) == 1 and not all_replicas:
            return [("", chosen[0])]
        return [(f"[{_replica_name(paths.name, r)}] ", r) for r in chosen]

    def _read_logs(self, paths: JobPaths, sources, *, follow: bool, tail: int | None) -> Iterator[str]:
        def path_of(rank: int | None) -> Path:
            return paths.launcher_log if rank is None else paths.rank_log(rank)

        if not follow:
            for prefix, rank in sources:
                lines = read_lines(path_of(rank))
                if tail is not None:
                    lines = lines[-tail:] if tail else []
                for line in lines:
                    yield prefix + line
            return
        readers = [_Follower(prefix, lambda r=rank: path_of(r), tail) for prefix, rank in sources]
        while True:
            # Whether the job had ended is read before the files: what it wrote before it
            # ended is then surely in them.
            ended = self._ended(paths)
            got_any = False
            for reader in readers:
                for line in reader.read_new():
                    got_any = True
                    yield line
            if ended:
                for reader in readers:
                    yield from reader.flush()
                return
            if not got_any:
                time.sleep(self.poll_seconds)

    def _ended(self, paths: JobPaths) -> bool:
        status = _status_of(paths)
        # A job whose state is unreadable cannot say it is running: stop following.
        return status is None or status.phase in (*TERMINAL, UNKNOWN)

    # -------------------------------------------------------------------- wait
    def wait(self, name: str, namespace: str | None = None, *, timeout: float | None = None,
             on_change: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Until the job ended or stalled; `on_change` gets each status whose phase changed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last_phase = None
        while True:
            status = self.get(name, namespace)
            if status.done or (status.progress is not None and status.progress.stalled):
                return status
            if status.reason == STATE_DISK_FULL:  # over, but how is not known
                raise UserError(f"job {name} is {status.phase}: {status.message}")
            if on_change is not None and status.phase != last_phase:
                last_phase = status.phase
                on_change(status)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(f"job {name} is still {status.phase} after {timeout:g}s")
                time.sleep(min(self.poll_seconds, left))
            else:
                time.sleep(self.poll_seconds)

    # ------------------------------------------------------------------- scale
    def scale(self, name: str, namespace: str | None = None, *, workers: int,
              timeout: float = 60.0) -> str:
        """`hvdk8s scale`: the local hosts horovodrun's discovery lists from now on."""
        paths = self._existing(name, namespace)
        spec = read_json(paths.spec) or {}
        if spec.get("min_workers") is None and spec.get("max_workers") is None:
            raise UsageError(f"--workers: job {name} is not elastic (submitted without "
                             "--min-workers/--max-workers); only elastic jobs can be scaled")
        start = int(spec.get("workers") or 1)
        low, high = int(spec.get("min_workers") or start), int(spec.get("max_workers") or start)
        if not low <= workers <= high:
            raise UsageError(f"--workers: job {name} runs {low}..{high} workers "
                             f"(--min-workers/--max-workers), not {workers}")
        if self.get(name, namespace).done:
            raise UserError(f"job {name} has ended; nothing to scale")
        local_elastic.scale(paths.dir, workers)
        local_elastic.await_size(paths.dir, name, workers,
                                 int(spec.get("gpus_per_worker") or 0) or 1, timeout)
        return f"job {name}: scaled to {workers} workers (elastic {low}..{high})"

    # ------------------------------------------------------------------ delete
    def delete(self, name: str, namespace: str | None = None) -> bool:
        """Stop every process of the job and remove its directory; False if there was none."""
        paths = job_paths(name, namespace or self.namespace)
        if not paths.dir.is_dir():
            return False
        try:
            status = read_status(paths.status) or StatusRecord()
        except UnreadableState:
            # The processes are still found by the job directory in their environment.
            status = StatusRecord()
        left = local_procs.terminate_job(status.uid, status.supervisor_pid,
                                         job_dir=str(paths.dir), grace=self.stop_grace_seconds)
        if left:
            raise UserError(f"job {name}: processes {', '.join(map(str, left))} did not stop "
                            "after SIGKILL (stuck in the kernel?); nothing was removed")
        # Out of sight first (readers skip hidden entries), then removed: nobody sees a job
        # that is half gone.
        doomed = paths.dir.with_name(f".deleting.{paths.name}.{uuid.uuid4().hex[:8]}")
        try:
            os.rename(paths.dir, doomed)
            shutil.rmtree(doomed)
        except FileNotFoundError:
            pass  # deleted meanwhile by another `delete`
        except OSError as exc:
            raise UserError(f"job {name}: its processes are stopped but {exc.filename} could "
                            f"not be removed: {exc.strerror}") from None
        return True

    # ----------------------------------------------------------------- helpers
    def _existing(self, name: str, namespace: str | None) -> JobPaths:
        paths = job_paths(name, namespace or self.namespace)
        if not paths.dir.is_dir():
            raise _not_found(name, paths.namespace)
        return paths


def _exists(spec: JobSpec) -> UserError:
    where = "" if spec.namespace == DEFAULT_NAMESPACE else f" -n {spec.namespace}"
    return Refused(
        f"job {spec.name} already exists in namespace {spec.namespace}; delete it first: "
        f"hvdk8s delete {spec.name}{where}")


def _cannot_write(spec: JobSpec, paths: JobPaths, exc: OSError) -> UserError:
    if exc.errno == errno.ENOSPC:
        return UserError(f"cannot create job {spec.name}: no space left on the device of "
                         f"{paths.dir.parent}; "
                         "nothing was created (free some space, or set HVDK8S_HOME elsewhere)")
    return UserError(f"cannot create job {spec.name} in {paths.dir.parent}: {exc.strerror}; "
                     "nothing was created (set HVDK8S_HOME to a writable directory)")


def _not_found(name: str, namespace: str) -> NotFound:
    return NotFound(f"job {name} not found in namespace {namespace} (hvdk8s list shows the jobs)")


def _replica_name(job: str, rank: int) -> str:
    return f"{job}-rank-{rank}"


class _Follower:
    """Reads what a growing file gained since the last call, in whole lines."""

    def __init__(self, prefix: str, path_of, tail: int | None):
        self.prefix = prefix
        self.path_of = path_of  # looked up again until it exists (rank files appear late)
        self.offset = 0
        self.partial = ""
        self.skip_to_tail = tail

    def read_new(self) -> builtins.list[str]:
        try:
            with open(self.path_of(), "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode(errors="replace")
        *lines, self.partial = text.split("\n")
        if self.skip_to_tail is not None:
            # --tail N with -f: the last N lines written so far, then everything new.
            lines = list(deque(lines, maxlen=self.skip_to_tail))
            self.skip_to_tail = None
        return [self.prefix + line for line in lines]

    def flush(self) -> builtins.list[str]:
        rest = self.read_new()
        if self.partial:
            rest.append(self.prefix + self.partial)
            self.partial = ""
        return rest


# ------------------------------------------------------------------------ status
class _Gone(Exception):
    """The job directory went away while it was being read (deleted meanwhile)."""


def _read_state(paths: JobPaths, path: Path, read=read_json):
    data = read(path)
    if data is None:
        if not paths.dir.is_dir():
            raise _Gone
        raise UnreadableState(path, "missing")
    return data


def _status_of(paths: JobPaths, *, strict: bool = False) -> JobStatus | None:
    """The job's status, None when it is gone. A job whose state files cannot be read is
    Unknown with the reason (with `strict`, UnreadableState is raised instead)."""
    try:
        return _status_from_files(paths)
    except _Gone:
        return None
    except UnreadableState as exc:
        if strict:
            raise
        return _unreadable(paths, exc)


def _unreadable(paths: JobPaths, exc: UnreadableState) -> JobStatus:
    return JobStatus(name=paths.name, namespace=paths.namespace, backend=LocalBackend.name,
                     phase=UNKNOWN, reason="unreadable state", message=str(exc))


def _status_from_files(paths: JobPaths) -> JobStatus:
    record = _read_state(paths, paths.status, read_status)
    if not record.phase.terminal and _supervisor_lost(record):
        # The supervisor may have written the end and exited since the read above.
        record = _read_state(paths, paths.status, read_status)
    spec = _read_state(paths, paths.spec)
    _read_state(paths, paths.launch)  # what the supervisor runs: a broken one is reported too
    try:
        return _status_from(paths, record, spec)
    except (TypeError, ValueError, AttributeError) as exc:  # spec.json edited by hand
        raise UnreadableState(paths.spec, f"unexpected content: {exc}") from None


def _status_from(paths: JobPaths, record: StatusRecord, spec: dict) -> JobStatus:
    phase = record.phase.value
    reason, message, log_tail = record.reason, record.message, record.log_tail
    if not record.phase.terminal and record.reason != STATE_DISK_FULL and \
            _supervisor_lost(record):
        log_tail = tail(paths.launcher_log, TAIL_LINES)
        if (full := _disk_full(paths)) is not None:
            # It could not write the end, which says nothing of how the job ended: what the
            # ranks wrote of their exits is kept.
            phase, reason, message = UNKNOWN, STATE_DISK_FULL, full
            record = record.model_copy(update={"rank_exits": _rank_exits(paths)})
        else:
            phase, reason = FAILED, "supervisor lost"
            message = (f"the supervisor (pid {record.supervisor_pid}) is gone while the job "
                       f"was {record.phase.value} (machine restarted or process killed); "
                       f"hvdk8s delete {paths.name} stops what is left")
    preflight = preflight_from_file(paths.launcher_log)
    if phase == FAILED and (ended := failure_reason(preflight)):
        reason, message = ended
    node, gpus = record.node, record.gpus
    replicas = []
    for r in range(record.ranks):
        rank_phase, rank_message, exit_code = _rank_outcome(r, phase, reason, message, record)
        replicas.append(ReplicaStatus(
            name=_replica_name(paths.name, r), role="rank", phase=rank_phase, node=node,
            gpus=[gpus[r]] if r < len(gpus) else [],
            message=rank_message, exit_code=exit_code,
        ))
    elastic = spec.get("min_workers") is not None or spec.get("max_workers") is not None
    asked = local_elastic.scaled_history(paths.dir)[-1:] if elastic else []
    status = JobStatus(
        name=paths.name, namespace=paths.namespace, backend=LocalBackend.name, phase=phase,
        mode=record.mode, created=record.created, started=record.started,
        finished=record.finished,
        workers=int(asked[0].get("workers") or 0) if asked else int(spec.get("workers") or 0),
        size=local_elastic.size_lines(
            paths.dir, spec, None if record.phase.terminal else
            local_elastic.running_ranks(paths.dir)) if elastic else [],
        gpus_per_worker=int(spec.get("gpus_per_worker") or 0), replicas=replicas,
        placement=[{"node": node, "gpus": list(gpus)}] if node else [],
        reason=reason, message=message, log_tail=list(log_tail),
        images_per_sec=record.images_per_sec, result=record.result,
        predicted_images_per_sec=record.predicted_images_per_sec,
        preflight=preflight,
    )
    if record.started is not None and phase == RUNNING:  # `list` reads no ended job's log
        status.progress = summarize(
            iter_reports(tail_text(paths.launcher_log, REPORT_TAIL_BYTES)), time.time(),
            ranks=record.ranks, predicted_images_per_sec=record.predicted_images_per_sec,
            running=phase == RUNNING)
        for rank in status.progress.silent_ranks if status.progress is not None else ():
            if rank < len(replicas):
                replicas[rank].message = "not reporting (stopped, or gone)"
        for slow in status.progress.stragglers if status.progress is not None else ():
            if slow.rank < len(replicas):  # its node and GPUs are on the same row
                replicas[slow.rank].message = (f"straggler: {slow.compute_time:.3g}s compute "
                                               f"per step, others {slow.median:.3g}s")
        if status.progress is not None and status.progress.stalled and record.writes_rank_logs:
            # What the silent ranks said last: where they stopped.
            status.log_tail = [f"[rank {r}] {line}" for r in status.progress.silent_ranks
                               for line in tail(paths.rank_log(r), STALL_TAIL_LINES)
                               if not is_report_line(line)]
    status.why = why(status)
    return status


def _rank_outcome(rank: int, phase: str, reason: str | None, message: str | None,
                  record: StatusRecord) -> tuple[str, str | None, int | None]:
    """(phase, message, exit code) of one rank. A job fails as a whole, but only the rank
    that failed is Failed: one that exited 0 Succeeded, and one that mpirun stopped
    because of another's failure (or the deadline, or a signal) is Terminated."""
    if phase == SUCCEEDED:  # mpirun exits 0 only when every rank did
        return phase, None, 0
    if phase == UNKNOWN and reason == STATE_DISK_FULL:
        ended = record.rank_exits.get(rank)
        if ended is not None and ended.exit_code is not None:
            return (SUCCEEDED, None, 0) if ended.exit_code == 0 else (
                FAILED, f"rank {rank} exited with code {ended.exit_code}", ended.exit_code)
        return UNKNOWN, None, None
    if phase != FAILED:
        return phase, None, None
    failed_rank = record.failed_rank
    if rank == failed_rank:
        return FAILED, message, record.failed_rank_exit_code
    if reason == "supervisor lost":  # nothing recorded how the ranks ended
        return UNKNOWN, None, None
    ended = record.rank_exits.get(rank)
    code = ended.exit_code if ended else None
    if code == 0:
        return SUCCEEDED, None, 0
    if code is not None:
        return FAILED, f"rank {rank} exited with code {code}", code
    cause = f"rank {failed_rank} failed" if failed_rank is not None else (message or reason)
    return TERMINATED, f"terminated: {cause}" if cause else "terminated", None


def _disk_full(paths: JobPaths) -> str | None:
    """Why the job's state may not have been written: its file system has no space left
    (None when it has, or cannot tell)."""
    try:
        fs = os.statvfs(paths.dir)
    except OSError:
        return None
    if fs.f_bavail * fs.f_frsize >= DISK_FULL_BYTES:
        return None
    return (f"no space left on the file system of {paths.dir}: the supervisor could not "
            "record how the job ended; free some space (the ranks' exit codes below are "
            "what they wrote)")


def _rank_exits(paths: JobPaths) -> dict:
    try:
        return {int(r): RankExit(**v) for r, v in local_rank.read_records(paths.rank_exits).items()}
    except (OSError, ValueError, TypeError):
        return {}


def _supervisor_lost(record: StatusRecord) -> bool:
    if record.supervisor_pid is None:
        return _age_seconds(record.created) > UNSUPERVISED_GRACE_SECONDS
    return not local_procs.is_job_process(record.supervisor_pid, record.uid)


def _age_seconds(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    created = parse_utc(stamp)
    return (datetime.now(timezone.utc) - created).total_seconds()
