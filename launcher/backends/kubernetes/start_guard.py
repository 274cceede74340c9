"""--start-timeout: a job whose pods do not all run in time fails, and gives its GPUs back.

Nothing in Kubernetes fails a pod that never starts: ErrImagePull/ImagePullBackOff,
CreateContainerConfigError or CrashLoopBackOff leave it Pending (or restarting) for
ever, holding its GPUs, and the MPI Operator creates the launcher only once every worker
is Ready (mpi_job_controller.go syncHandler), so its MPIJob never fails either.

The deadline of a pod counts from when it was scheduled (its PodScheduled condition),
never from when a gang scheduler's queue released it, so a queued job is not failed for
queueing. Past it, a scheduled pod that is not running fails the job:
- the reason (`demo-worker-1: ImagePullBackOff: Back-off pulling image "x"`) is recorded
  on the root (ANNOTATION_FAILED), where `get`, `wait` and `list` read it;
- built-in mode: the launcher Job is suspended (the Job controller deletes its pod and
  keeps the Job) and, per cleanPodPolicy, the worker pods are deleted;
- operator mode: the MPIJob gets runPolicy.suspend (the operator deletes its workers and
  suspends its launcher Job, keeping the MPIJob: mpi_job_controller.go cleanUpWorkerPods).

`enforce` writes, so no read command calls it: `hvdk8s tidy` does (the user's explicit step,
which `get`, `wait` and `logs -f` name when they see a job past its timeout: `overdue`, no
request) and, with nobody's hvdk8s running, the start guard's sweep (`sweep_node`, the
hvdk8s-start-guard Deployment: docs/cleanup.md).
"""

from __future__ import annotations

from datetime import datetime, timezone

from launcher.backends.base import FAILED, PENDING, SUCCEEDED
from launcher.backends.kubernetes import cleanup
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import (
    EVENT,
    JOB,
    MPIJOB,
    POD,
    TRAINJOBS,
    ApiError,
    kind_of,
)
from launcher.timestamps import parse_utc
from mpijob.jobspec import defaults, names
from mpijob.phases import START_TIMEOUT_REASON

ANNOTATION_FAILED = st.ANNOTATION_FAILED
REASON = START_TIMEOUT_REASON


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def start_timeout(root: dict | None) -> int:
    value = st.job_spec_of(root).get("start_timeout", defaults.START_TIMEOUT_SECONDS)
    return int(value) if isinstance(value, int) and value >= 0 else defaults.START_TIMEOUT_SECONDS


def recorded_failure(root: dict | None) -> str | None:
    return st.annotations_of(root).get(ANNOTATION_FAILED)


def _scheduled_at(pod: dict) -> datetime | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            try:
                return parse_utc(c.get("lastTransitionTime") or "")
            except ValueError:
                pass
    if (pod.get("spec") or {}).get("nodeName"):
        try:
            return parse_utc(st.meta(pod).get("creationTimestamp") or "")
        except ValueError:
            return None
    return None


def _not_running(pod: dict) -> str | None:
    """Why a scheduled pod is not running, or None when it runs (or already ended)."""
    phase = (pod.get("status") or {}).get("phase")
    r = st.replica(pod)
    if r.reason in st.STUCK_REASONS:
        return f"{r.name}: {r.reason}: {r.message}" if r.message else f"{r.name}: {r.reason}"
    if phase == PENDING:
        return f"{r.name}: {r.reason or 'Pending'}" + (f": {r.message}" if r.message else "")
    return None


def overdue(root: dict | None, pods: list[dict], now: datetime | None = None
            ) -> tuple[dict, str] | None:
    """(pod, why) when a pod of the job missed the start timeout, else None."""
    timeout = start_timeout(root)
    if not timeout or root is None or recorded_failure(root):
        return None
    now = now or utc_now()
    spec = st.job_spec_of(root)
    minimum = spec.get("min_workers") or (spec.get("workers") if spec.get("max_workers") else None)
    # An elastic job running on its minimum goes on without a worker that cannot start
    # (a replacement on a bad node): only the launcher counts then.
    running = sum(1 for p in st.live_workers(pods)
                  if (p.get("status") or {}).get("phase") == "Running")
    enough = minimum is not None and running >= int(minimum)
    # Workers first: they hold the GPUs, and the launcher of a job waits on them.
    for pod in sorted(pods, key=lambda p: (st.pod_role(p) == names.ROLE_LAUNCHER, st.pod_index(p))):
        if st.meta(pod).get("deletionTimestamp"):
            continue
        if enough and st.pod_role(pod) != names.ROLE_LAUNCHER:
            continue
        since = _scheduled_at(pod)
        if since is None or (now - since).total_seconds() < timeout:
            continue
        why = _not_running(pod)
        if why:
            return pod, f"not running {timeout}s after it was scheduled: {why}"
    return None


def seconds_left(root: dict | None, pods: list[dict], now: datetime | None = None
                 ) -> float | None:
    """Seconds until the first pod not running yet reaches its start timeout (None: no such
    pod, or no timeout): when a watch-driven `wait` must look again though nothing changed."""
    timeout = start_timeout(root)
    if not timeout or root is None or recorded_failure(root):
        return None
    now = now or utc_now()
    left = [timeout - (now - since).total_seconds() for pod in pods
            if not st.meta(pod).get("deletionTimestamp") and _not_running(pod)
            and (since := _scheduled_at(pod)) is not None]
    return max(0.0, min(left)) if left else None


def pull_error(client, pod: dict) -> str | None:
    """ImagePullBackOff says only `Back-off pulling image "x"`; the kubelet's latest
    `Failed` event on the pod has the registry's answer (kubelet/images/image_manager.go)."""
    m = st.meta(pod)
    try:
        events = client.items(EVENT, m.get("namespace"), field_selector=(
            f"involvedObject.kind=Pod,involvedObject.name={m.get('name')},reason=Failed"))
    except ApiError:
        return None
    # Each attempt also leaves `Error: ErrImagePull` / `Error: ImagePullBackOff` (Failed too:
    # kuberuntime_container.go startContainer), which say nothing more than the state.
    events = [e for e in events if not (e.get("message") or "").startswith("Error: ")]
    if not events:
        return None
    last = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return last.get("message")


def fail(client, root: dict, mode: str, pods: list[dict], reason: str) -> list[str]:
    """Record the reason on the root and release the pods per the clean pod policy; the
    worker pods deleted (each confirmed) are returned."""
    m = root["metadata"]
    ns, kind = m["namespace"], MPIJOB if mode == "operator" else JOB
    if mode == "trainjob":  # suspended, Trainer suspends its JobSet, which ends the pods
        kind = kind_of(root)
    patch: dict = {"metadata": {"annotations": {ANNOTATION_FAILED: f"{REASON}: {reason}"}}}
    if mode == "operator":
        patch["spec"] = {"runPolicy": {"suspend": True}}
    else:
        patch["spec"] = {"suspend": True}
    client.patch(kind, m["name"], patch, ns)
    deleted: list[str] = []
    if mode in ("operator", "trainjob") or st.clean_pod_policy(root) == "None":
        return deleted
    for pod in pods:
        if st.pod_role(pod) == names.ROLE_LAUNCHER or st.meta(pod).get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in (SUCCEEDED, FAILED):
            continue
        try:
            client.delete(POD, st.meta(pod)["name"], ns)
        except ApiError as exc:
            if not exc.not_found:
                raise
            continue
        deleted.append(st.meta(pod)["name"])
    return deleted


def enforce(client, root: dict | None, mode: str, pods: list[dict],
            now: datetime | None = None) -> tuple[str, list[str]] | None:
    """Fail the job if it missed its start timeout: (the reason recorded, the pods
    deleted) when it did just now, else None."""
    found = overdue(root, pods, now)
    if found is None or root is None:
        return None
    pod, reason = found
    reason = with_pull_error(client, pod, reason)
    return reason, fail(client, root, mode, pods, reason)


def with_pull_error(client, pod: dict, reason: str) -> str:
    """`reason` with the registry's answer for a pod whose image does not pull (one read)."""
    if st.replica(pod).reason in ("ImagePullBackOff", "ErrImagePull"):
        pulled = pull_error(client, pod)
        if pulled and pulled not in reason:
            return f"{reason} ({pulled})"
    return reason


def sweep_node(client, node: str | None, now: datetime | None = None,
               errors: list[str] | None = None, tidied: list[str] | None = None) -> list[str]:
    """The start guard's pass: jobs with a pod on `node` (None: on any node) that missed
    their start timeout are failed (patches are idempotent), and the others get what
    `hvdk8s tidy` does for them (cleanup.py: a started job's workers handed to its
    launcher Job, a finished job's rate recorded from its launcher's termination message
    and its idle pods removed), each added to `tidied` when given. Returns the jobs failed;
    a job the API refuses to read or write is skipped, the others still swept, and its
    error added to `errors` when given (else raised once the pass is done)."""

    pods = client.items(POD, None, all_namespaces=True, label_selector=names.job_selector(),
                        field_selector=f"spec.nodeName={node}" if node else None)
    failed: list[str] = []
    refused: list[str] = []
    first: ApiError | None = None
    seen = set()
    for pod in pods:
        ns, name = st.meta(pod).get("namespace") or "", st.job_name_of(pod) or ""
        if (ns, name) in seen or not name:
            continue
        seen.add((ns, name))
        try:
            root, mode = _root(client, name, ns)
            if root is None:
                continue
            job_pods = client.items(POD, ns, label_selector=names.job_selector(name))
            if enforce(client, root, mode, job_pods, now):
                failed.append(f"{ns}/{name}")
                continue
            # No log read (the guard may not): the rate from the termination message.
            status = st.job_status(name, ns, root=root, pods=job_pods, mode=mode)
            found = cleanup.due(root, mode, job_pods, status,
                                cleanup.worker_job_of(client, root, mode))
            for done in cleanup.take(client, root, mode, found, status):
                if tidied is not None:
                    tidied.append(f"{ns}/{name}: {done}")
        except ApiError as exc:
            first = first or exc
            refused.append(f"{ns}/{name}: {exc.message}")
    if errors is not None:
        errors.extend(refused)
    elif first is not None:
        raise first
    return failed


def _root(client, name: str, ns: str) -> tuple[dict | None, str]:
    job = client.get(JOB, names.launcher(name), ns)
    if job is not None and st.job_name_of(job) == name:
        if not any(r.get("kind") == "MPIJob" for r in st.meta(job).get("ownerReferences") or []):
            return job, "pods"
    mpijob = client.get(MPIJOB, name, ns) if client.serves(MPIJOB) else None
    if mpijob is None:
        for kind in TRAINJOBS:
            if client.serves(kind) and (found := client.get(kind, name, ns)) is not None:
                return found, "trainjob"
    return mpijob, "operator"
