"""A job's status from its objects (pure: dicts in, JobStatus out).

The phase is the honest one, not the operator's: a job is Running only when its launcher
runs AND every worker runs; it is Pending (with each waiting pod and why) while any worker
is unscheduled or still starting; Failed as soon as the launcher Job fails or any worker
fails; Succeeded when the launcher Job completes.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from launcher.backends.base import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    JobStatus,
    ReplicaStatus,
)
from launcher.backends.kubernetes.snapshot import parse_index_list
from launcher.formats.benchmark_result import parse_benchmark_output
from launcher.formats.causes import why
from launcher.formats.job_progress import JobProgress, summarize
from launcher.formats.preflight_reports import preflight_status
from launcher.formats.rank_reports import for_people, is_report_line, iter_reports, tagged_rank
from launcher.formats.trainer_status import progress_from_trainer_status
from mpijob.jobspec import defaults, names
from mpijob.phases import STALLED_REASON
from mpijob.progress import STALL_MESSAGE_PREFIX
from mpijob.wellknown import COMPLETION_INDEX_LABEL

OPERATOR_ROLE_LABEL = "training.kubeflow.org/job-role"
# Container waiting reasons that mean "this will not start by itself".
STUCK_REASONS = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})
FAILED_TAIL_LINES = 20
STALL_TAIL_LINES = 5  # of each silent rank
# The measured rate, recorded on the root by `hvdk8s tidy` or the start guard once the job is
# done: `list` reads it from the roots it lists anyway once the launcher pod is gone.
ANNOTATION_IMAGES_PER_SEC = f"{names.GROUP}/images-per-sec"
# "REASON: message" of a failure hvdk8s decided (start_guard: StartTimeout) and recorded on
# the root, whose own status cannot say it (a suspended Job or MPIJob is not Failed).
ANNOTATION_FAILED = f"{names.GROUP}/failed"


# --- small readers ----------------------------------------------------------------------------
def meta(obj: dict | None) -> dict:
    return (obj or {}).get("metadata") or {}


def labels(obj: dict | None) -> dict:
    return meta(obj).get("labels") or {}


def annotations_of(obj: dict | None) -> dict:
    return meta(obj).get("annotations") or {}


def job_name_of(obj: dict) -> str | None:
    return labels(obj).get(names.LABEL_JOB)


def pod_role(pod: dict) -> str:
    lab = labels(pod)
    return lab.get(names.LABEL_ROLE) or lab.get(OPERATOR_ROLE_LABEL) or "worker"


def pod_index(pod: dict) -> int:
    # An elastic job's workers are an Indexed Job's pods: the Job controller's index label.
    found = labels(pod)
    index = found.get(names.LABEL_INDEX) or found.get(COMPLETION_INDEX_LABEL, "")
    try:
        return int(index)
    except ValueError:
        name = meta(pod).get("name", "")
        tail = name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0


def _json_annotation(obj: dict | None, key: str):
    text = annotations_of(obj).get(key)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


# On an elastic job's launcher Job: each change of size `hvdk8s scale` asked for, as a
# JSON list of {"at", "workers"} (launcher.backends.kubernetes.elastic).
ANNOTATION_SCALED = f"{names.GROUP}/scaled"


def scaled_history(root: dict | None) -> list[dict]:
    value = _json_annotation(root, ANNOTATION_SCALED)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def asked_workers(root: dict | None, spec: dict) -> int | None:
    """The workers the job runs: the last size `scale` asked for, else as submitted."""
    history = scaled_history(root)
    if history and isinstance(history[-1].get("workers"), int):
        return history[-1]["workers"]
    return int(spec["workers"]) if spec.get("workers") else None


def job_spec_of(root: dict | None) -> dict:
    """The JobSpec JSON the renderer stored on the root (workers, GPUs, run policy)."""
    value = _json_annotation(root, names.ANNOTATION_SPEC)
    return value if isinstance(value, dict) else {}


def expected_worker_pods(root: dict | None) -> int:
    """Worker pods the renderer made: one per placed assignment, else one per worker."""
    planned = _json_annotation(root, names.ANNOTATION_PLACEMENT)
    if isinstance(planned, list) and planned:
        return len(planned)
    return int(job_spec_of(root).get("workers") or 0)


def clean_pod_policy(root: dict | None) -> str:
    return (job_spec_of(root).get("run_policy") or {}).get("clean_pod_policy") or defaults.CLEAN_POD_POLICY


def condition(obj: dict | None, ctype: str) -> dict | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def _by_time(obj: dict) -> str:
    return meta(obj).get("creationTimestamp") or ""


# --- pods -------------------------------------------------------------------------------------
def is_scheduled(pod: dict) -> bool:
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return cond.get("status") == "True"
    return False


def unscheduled_reason(pod: dict, events: Sequence[dict] = ()) -> str | None:
    """The scheduler's own words: the newest FailedScheduling event, else the condition."""
    name = meta(pod).get("name")
    mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name
            and e.get("reason") in ("FailedScheduling", "Unschedulable", "NotTriggerScaleUp")]
    if mine:
        newest = max(mine, key=lambda e: e.get("lastTimestamp") or e.get("eventTime")
                     or _by_time(e))
        if newest.get("message"):
            return newest["message"]
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            return cond.get("message") or cond.get("reason") or "not scheduled yet"
    return None


def _containers(pod: dict) -> list[dict]:
    status = pod.get("status") or {}
    return (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])


def replica(pod: dict, events: Sequence[dict] = ()) -> ReplicaStatus:
    m = meta(pod)
    status = pod.get("status") or {}
    phase = status.get("phase") or PENDING
    r = ReplicaStatus(name=m.get("name", "?"), role=pod_role(pod), phase=phase,
                      node=(pod.get("spec") or {}).get("nodeName"),
                      gpus=list(parse_index_list(annotations_of(pod).get(names.ANNOTATION_GPUS))))
    r.restarts = sum(int(c.get("restartCount") or 0) for c in _containers(pod))
    for c in _containers(pod):
        state = c.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            w = state["waiting"]
            if w["reason"] in STUCK_REASONS or r.reason is None:
                r.reason, r.message = w["reason"], w.get("message")
        term = state.get("terminated")
        if term:
            r.exit_code = term.get("exitCode")
            if term.get("exitCode") not in (None, 0):
                r.reason = term.get("reason") or "Error"
                r.message = term.get("message") or r.message
                if r.reason == "OOMKilled" and not r.message:
                    r.message = _memory_limit(pod, c.get("name"))
    if phase == PENDING and not is_scheduled(pod):
        r.reason = "Unschedulable"
        r.message = unscheduled_reason(pod, events) or "waiting for the scheduler"
    if phase == FAILED and r.reason is None:
        r.reason, r.message = status.get("reason") or "Failed", status.get("message")
    if m.get("deletionTimestamp"):
        r.reason = "Terminating"
    return r


def _memory_limit(pod: dict, container: str | None) -> str | None:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
            return f"memory limit {limit}" if limit else None
    return None


# --- the job ----------------------------------------------------------------------------------
def _launcher_age(pod: dict) -> tuple:
    """Oldest first. Timestamps have one-second resolution, so a replacement created in the
    same second as the pod it replaces is told apart by still being active."""
    phase = (pod.get("status") or {}).get("phase")
    return _by_time(pod), phase not in (SUCCEEDED, FAILED), phase == SUCCEEDED


def _launcher_pods(pods: list[dict]) -> list[dict]:
    return sorted((p for p in pods if pod_role(p) == names.ROLE_LAUNCHER), key=_launcher_age)


def launcher_pods(pods: list[dict]) -> list[dict]:
    return _launcher_pods(pods)


def _worker_pods(pods: list[dict]) -> list[dict]:
    return sorted((p for p in pods if pod_role(p) != names.ROLE_LAUNCHER), key=pod_index)


def _finished_at(root: dict | None, ctype: str) -> str | None:
    cond = condition(root, ctype)
    status = (root or {}).get("status") or {}
    return status.get("completionTime") or (cond or {}).get("lastTransitionTime")


def decide_phase(root: dict | None, mode: str, pods: list[dict], events: Sequence[dict] = (),
                 replica_of: Callable[[dict], ReplicaStatus] | None = None,
                 ) -> tuple[str, str | None, str | None]:
    """(phase, reason, message). `replica_of` reads a pod (default: replica(pod, events)):
    job_status passes one that remembers, so each pod is read once."""
    if replica_of is None:
        replica_of = lambda pod: replica(pod, events)  # noqa: E731
    done_type, fail_type = ("Succeeded", "Failed") if mode == "operator" else ("Complete", "Failed")
    if condition(root, done_type) or (mode != "operator" and
                                      int(((root or {}).get("status") or {}).get("succeeded") or 0)):
        return SUCCEEDED, None, None
    failed = condition(root, fail_type)
    if failed:
        return FAILED, failed.get("reason") or "Failed", failed.get("message")
    recorded = annotations_of(root).get(ANNOTATION_FAILED)
    if recorded:
        reason, _, message = recorded.partition(": ")
        return FAILED, reason, message or None
    spec = job_spec_of(root)
    if root is not None and mode == "pods" and (spec.get("min_workers") or spec.get("max_workers")):
        return _elastic_phase(root, pods)
    workers = _worker_pods(pods)
    launchers = _launcher_pods(pods)
    for w in workers:
        if (w.get("status") or {}).get("phase") == FAILED:
            r = replica(w)
            detail = f"exit {r.exit_code}" if r.exit_code is not None else (r.reason or "failed")
            why = f"{detail}: {r.message}" if r.message else detail
            return FAILED, "WorkerFailed", f"{r.name} failed ({why})"
    if launchers and (launchers[-1].get("status") or {}).get("phase") == SUCCEEDED:
        return SUCCEEDED, None, None
    suspended = bool(((root or {}).get("spec") or {}).get("suspend"))
    if mode == "pods" and root is not None and not suspended:
        job = job_name_of(root) or ""
        present = {meta(w).get("name") for w in workers}
        gone = [n for n in (names.worker(job, i) for i in range(expected_worker_pods(root)))
                if n not in present]
        if gone:
            return (FAILED, "WorkerLost",
                    f"{', '.join(gone)} gone (deleted or evicted) before the job ended")
    waiting, stuck, unscheduled = [], None, False
    for w in workers:
        r = replica_of(w)
        if r.phase == PENDING or r.reason in STUCK_REASONS:
            waiting.append(f"{r.name} {r.phase}: {r.message or r.reason or 'starting'}")
        if r.reason in STUCK_REASONS:
            stuck = stuck or r.reason
        unscheduled = unscheduled or not is_scheduled(w)
    if waiting:
        reason = stuck or ("Unschedulable" if unscheduled else "WorkersStarting")
        return PENDING, reason, "; ".join(waiting)
    if mode == "trainjob" and suspended:  # Kueue holds it until it admits it whole
        return PENDING, "Suspended", "the TrainJob is suspended: Kubeflow Trainer makes no pods"
    if mode != "operator" and suspended:
        return PENDING, "WaitingForGang", "the launcher starts once every worker is scheduled"
    if not workers:
        if mode == "operator":
            return PENDING, "WaitingForOperator", "the MPI operator has not created the pods yet"
        if mode == "trainjob":
            return (PENDING, "WaitingForTrainer",
                    "Kubeflow Trainer and its JobSet have not created the pods yet")
        return PENDING, "Creating", "no worker pods yet"
    return _launcher_phase(launchers, replica_of, lambda current: (
        f"{current.name} Pending: {current.message}" if current.message else None))


def _launcher_phase(launchers: list[dict], replica_of: Callable[[dict], ReplicaStatus],
                    waiting: Callable[[ReplicaStatus], str | None],
                    ) -> tuple[str, str | None, str | None]:
    """Once the workers no longer hold it up, the newest launcher pod decides the phase;
    `waiting` says what a launcher that is not running yet waits on."""
    if not launchers:
        return PENDING, "LauncherStarting", "the launcher pod is not created yet"
    current = replica_of(launchers[-1])
    if current.phase == RUNNING:
        return RUNNING, None, None
    if current.phase == FAILED:
        return PENDING, "LauncherRetrying", f"{current.name} failed; the Job retries it"
    return PENDING, current.reason or "LauncherStarting", waiting(current)


def live_workers(pods: list[dict]) -> list[dict]:
    """Worker pods not ended and not being deleted (a replaced one has ended)."""
    return [p for p in pods if pod_role(p) != names.ROLE_LAUNCHER
            and (p.get("status") or {}).get("phase") not in (SUCCEEDED, FAILED)
            and not meta(p).get("deletionTimestamp")]


def _elastic_phase(root: dict, pods: list[dict]) -> tuple[str, str | None, str | None]:
    """An elastic job (mpijob.k8s.render_elastic) whose root records no end: a failed or
    lost worker is replaced by the worker Job and does not fail the job; the launcher
    (horovodrun, its --elastic-timeout) decides when too few are left."""
    launchers = _launcher_pods(pods)
    if launchers and (launchers[-1].get("status") or {}).get("phase") == SUCCEEDED:
        return SUCCEEDED, None, None
    if (root.get("spec") or {}).get("suspend"):
        return PENDING, "WaitingForGang", "the launcher starts once the minimum is scheduled"

    def running(_: ReplicaStatus) -> str:
        return f"{sum(1 for p in live_workers(pods) if replica(p).phase == RUNNING)} worker(s) running"

    return _launcher_phase(launchers, replica, running)


def job_status(name: str, namespace: str, *, root: dict | None, pods: list[dict],
               mode: str = "pods", events: Sequence[dict] = (), launcher_log: list[str] | None = None,
               failed_logs: dict[str, list[str]] | None = None,
               now: float | None = None) -> JobStatus:
    """root: the launcher Job (pods mode) or the MPIJob (operator mode)."""
    spec = job_spec_of(root)
    read: dict[int, ReplicaStatus] = {}  # id(pod) -> its replica: `list -A` reads 8,000

    def replica_of(pod: dict) -> ReplicaStatus:
        r = read.get(id(pod))
        if r is None:
            r = read[id(pod)] = replica(pod, events)
        return r

    phase, reason, message = decide_phase(root, mode, pods, events, replica_of)
    workers = _worker_pods(pods)
    launchers = _launcher_pods(pods)
    replicas = [replica_of(p) for p in launchers[-1:] + workers]
    # Older launcher pods of a retried Job: shown after the current one, for the record.
    replicas[1:1] = [replica_of(p) for p in launchers[:-1]]
    placement = [{"pod": r.name, "node": r.node, "gpus": r.gpus} for r in replicas
                 if r.role != names.ROLE_LAUNCHER]
    if not placement:
        planned = _json_annotation(root, names.ANNOTATION_PLACEMENT) or []
        placement = [{"pod": None, "node": p.get("node"), "gpus": p.get("gpus", [])}
                     for p in planned if isinstance(p, dict)]
    prediction = _json_annotation(root, names.ANNOTATION_PREDICTION) or {}
    status = (root or {}).get("status") or {}
    first = root or (min(pods, key=_by_time) if pods else None)
    out = JobStatus(
        name=name, namespace=namespace, backend="kubernetes", phase=phase, mode=mode,
        created=meta(first).get("creationTimestamp"),
        started=status.get("startTime"),
        finished=_finished_at(root, "Failed" if phase == FAILED else
                              ("Succeeded" if mode == "operator" else "Complete"))
        if phase in (SUCCEEDED, FAILED) else None,
        workers=asked_workers(root, spec) or len(workers),
        gpus_per_worker=int(spec.get("gpus_per_worker") or 0),
        replicas=replicas, placement=placement, reason=reason, message=message,
        predicted_images_per_sec=prediction.get("images_per_sec")
        if isinstance(prediction, dict) else None,
    )
    if launcher_log:
        out.images_per_sec, out.result = parse_result(launcher_log)
        out.progress = summarize(iter_reports(launcher_log), time.time() if now is None else now,
                                 predicted_images_per_sec=out.predicted_images_per_sec,
                                 running=phase == RUNNING)
        out.preflight = preflight_status(launcher_log)
        if out.progress is not None:
            name_rank_pods(out.progress, pods, replicas)
            if out.progress.stalled:
                out.log_tail = silent_rank_lines(out.progress, launcher_log,
                                                 meta(current_launcher(pods)).get("name"))
    if out.progress is None and mode == "trainjob":  # Trainer's TrainJobStatus, if on
        out.progress = progress_from_trainer_status(
            root, time.time() if now is None else now,
            predicted_images_per_sec=out.predicted_images_per_sec)
    if out.images_per_sec is None:
        rate, result = parse_result(termination_messages(current_launcher(pods)))
        out.images_per_sec = rate if rate is not None else recorded_images_per_sec(root)
        out.result = out.result or result
    if phase == FAILED and (stall := stall_ending(current_launcher(pods))) is not None:
        out.reason, out.message = STALLED_REASON, stall
    if phase == FAILED and failed_logs:
        pod = failing_pod(pods)
        pod_name = meta(pod).get("name") if pod else None
        if pod_name and failed_logs.get(pod_name):
            out.log_tail = failed_logs[pod_name][-FAILED_TAIL_LINES:]
    out.why = why(out)
    return out


def _pod_of_host(host: str, pods: list[dict]) -> dict | None:
    """The pod a rank reported from: an hvdk8s worker's hostname is its pod's name (pods and
    operator modes), or its spec.hostname (a JobSet's pods); an FQDN's first label counts."""
    short = host.split(".", 1)[0]
    for pod in pods:
        if short in (meta(pod).get("name"), (pod.get("spec") or {}).get("hostname")):
            return pod
    return None


def name_rank_pods(progress: JobProgress, pods: list[dict],
                   replicas: list[ReplicaStatus]) -> None:
    """Each reporting rank's pod, node and GPUs (progress.places), and the silent ranks and
    stragglers marked on their pods' rows, as the local backend marks its ranks'."""
    by_name = {r.name: r for r in replicas}
    for rank, host in progress.hosts.items():
        pod = _pod_of_host(host, pods)
        r = by_name.get(meta(pod).get("name", "")) if pod is not None else None
        if r is None:
            continue
        gpus = f", GPUs {','.join(map(str, r.gpus))}" if r.gpus else ""
        progress.places[rank] = f"pod {r.name}" + (f", node {r.node}" if r.node else "") + gpus
        if progress.stalled and rank in progress.silent_ranks:
            r.message = f"rank {rank} not reporting (stopped, or gone)"
        for slow in progress.stragglers:
            if slow.rank == rank:
                r.message = (f"rank {rank} straggler: {slow.compute_time:.3g}s compute per "
                             f"step, others {slow.median:.3g}s")


def silent_rank_lines(progress: JobProgress, launcher_log: list[str],
                      launcher: str | None) -> list[str]:
    """What the silent ranks said last, from the launcher's log: only lines mpirun tagged
    with their rank (`--tag-output`) can be told apart; without them, which pod to look at."""
    out = []
    for rank in progress.silent_ranks:
        tagged = [line for line in launcher_log if tagged_rank(line) == rank
                  and not is_report_line(line)][-STALL_TAIL_LINES:]
        if tagged:
            out += [f"[rank {rank}] {for_people(line) or ''}" for line in tagged]
            continue
        where = progress.places.get(rank)
        pod = where.split(",", 1)[0].removeprefix("pod ") if where else None
        out.append(f"[rank {rank}] its output is not tagged with its rank in the launcher's "
                   "log (mpirun without --tag-output): "
                   + (f"kubectl describe pod {pod}; " if pod else "")
                   + (f"kubectl logs {launcher}" if launcher else "kubectl logs its launcher"))
    return out


def termination_messages(pod: dict | None) -> list[str]:
    """The lines a finished pod's containers left in their termination message: the launch
    script writes the benchmark's result there (mpijob/k8s/podscripts/launcher.sh), so a
    list of pods carries a finished job's rate without a log read."""
    lines: list[str] = []
    for c in _containers(pod or {}):
        message = ((c.get("state") or {}).get("terminated") or {}).get("message")
        if isinstance(message, str):
            lines += message.splitlines()
    return lines


def stall_ending(launcher: dict | None) -> str | None:
    """Why the launcher's monitor ended the launch line for its stall (--stall-timeout), from
    its termination message (mpijob/k8s/podscripts/hvdk8s_monitor.py); None otherwise."""
    for line in termination_messages(launcher):
        if line.startswith(STALL_MESSAGE_PREFIX):
            return line[len(STALL_MESSAGE_PREFIX):]
    return None


def recorded_images_per_sec(root: dict | None) -> float | None:
    """The rate `hvdk8s tidy` or the start guard recorded on the root
    (ANNOTATION_IMAGES_PER_SEC), if any."""
    text = annotations_of(root).get(ANNOTATION_IMAGES_PER_SEC)
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def failing_pod(pods: list[dict]) -> dict | None:
    """The pod whose log explains a failure: a failed worker first, else the last launcher."""
    for w in _worker_pods(pods):
        if (w.get("status") or {}).get("phase") == FAILED:
            return w
    launchers = _launcher_pods(pods)
    return launchers[-1] if launchers else None


def preflight_unread(root: dict | None, status: JobStatus) -> bool:
    """The job runs a preflight (its spec says warn or fail) whose verdict its launcher log's
    tail did not hold."""
    if job_spec_of(root).get("preflight") not in ("warn", "fail"):
        return False
    return (status.preflight or {}).get("verdict") in (None, "running", "none")


def current_launcher(pods: list[dict]) -> dict | None:
    launchers = _launcher_pods(pods)
    return launchers[-1] if launchers else None


def parse_result(lines: list[str]) -> tuple[float | None, dict | None]:
    return parse_benchmark_output(lines)


# --- many jobs at once ------------------------------------------------------------------------
def group_statuses(roots: list[dict], pods: list[dict], refine=None) -> list[JobStatus]:
    """JobStatus rows for every job seen in the roots or the pods (no extra calls);
    `refine(status, root)` may adjust each row in place."""
    by_job: dict[tuple[str, str], dict] = defaultdict(
        lambda: {"root": None, "pods": [], "mode": "pods"})
    for root in roots:
        name = job_name_of(root)
        if not name:
            continue
        entry = by_job[(meta(root).get("namespace", ""), name)]
        entry["root"] = root
        entry["mode"] = {"MPIJob": "operator", "TrainJob": "trainjob"}.get(root.get("kind") or "",
                                                                          "pods")
    for pod in pods:
        name = job_name_of(pod)
        if name:
            by_job[(meta(pod).get("namespace", ""), name)]["pods"].append(pod)
    out = []
    for (ns, name), entry in sorted(by_job.items()):
        status = job_status(name, ns, root=entry["root"], pods=entry["pods"], mode=entry["mode"])
        if refine is not None:
            refine(status, entry["root"])
        out.append(status)
    return out
