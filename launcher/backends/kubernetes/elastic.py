"""Elastic built-in jobs on the cluster (mpijob.k8s.render_elastic): `scale`, the phase of a
job whose workers come and go, its size and size history, and stopping its worker Job
once the launcher is done."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from launcher.backends.base import FAILED, RUNNING
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import EVENT, JOB, ApiError, KubeClient
from launcher.errors import NotFound, UsageError, UserError
from mpijob.jobspec import names

# On the launcher Job: each change of size asked for, as a JSON list (for `get`).
ANNOTATION_SCALED = f"{names.GROUP}/scaled"


def bounds(root: dict | None) -> tuple[int, int, int] | None:
    """(min, start, max) of an elastic job's root, None for a job that is not elastic."""
    spec = st.job_spec_of(root)
    if spec.get("min_workers") is None and spec.get("max_workers") is None:
        return None
    start = int(spec.get("workers") or 1)
    return (int(spec.get("min_workers") or start), start, int(spec.get("max_workers") or start))


def is_worker_job(job: dict) -> bool:
    return st.labels(job).get(names.LABEL_ROLE) == names.ROLE_WORKER


live_workers = st.live_workers


def size_lines(client: KubeClient, root: dict, pods: list[dict]) -> list[str]:
    """What `get` says of an elastic job: its size now and when workers left and joined,
    and why (the worker Job's events, hvdk8s scale)."""
    low, start, high = bounds(root) or (1, 1, 1)
    ns, job = st.meta(root)["namespace"], st.job_name_of(root) or ""
    running = [p for p in live_workers(pods) if st.replica(p).phase == RUNNING]
    lines = [f"workers: {len(running)} running (elastic {low}..{high}, started with {start})"]
    history: list[tuple[str, str]] = []
    try:
        events = client.items(EVENT, ns, field_selector=(
            f"involvedObject.kind=Job,involvedObject.name={names.service(job)}"))
    except ApiError:
        events = []
    for e in events:
        when = e.get("lastTimestamp") or e.get("eventTime") or ""
        msg = e.get("message") or ""
        if e.get("reason") == "SuccessfulCreate":
            history.append((when, f"joined: {msg.removeprefix('Created pod: ')}"))
        elif e.get("reason") == "SuccessfulDelete":
            history.append((when, f"left: {msg.removeprefix('Deleted pod: ')} (scaled down)"))
    for p in pods:
        r = st.replica(p)
        if st.pod_role(p) == names.ROLE_LAUNCHER or r.phase != FAILED:
            continue
        ended = [((c.get("state") or {}).get("terminated") or {}).get("finishedAt")
                 for c in (p.get("status") or {}).get("containerStatuses") or []]
        when = max(filter(None, ended), default=st.meta(p).get("creationTimestamp") or "")
        history.append((when, f"left: {r.name} ({r.reason or 'failed'}"
                              f"{': ' + r.message if r.message else ''}); the worker Job "
                              "replaces it"))
    for item in _scaled(root):
        history.append((item.get("at", ""), f"scaled to {item.get('workers')} workers "
                                            "(hvdk8s scale)"))
    lines += [f"  {when} {what}" for when, what in sorted(history)]
    return lines


def _scaled(root: dict | None) -> list[dict]:
    try:
        value = json.loads(st.annotations_of(root).get(ANNOTATION_SCALED) or "[]")
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def scale(client: KubeClient, root: dict | None, name: str, ns: str, workers: int) -> str:
    """Change a running elastic job's workers within its bounds: the worker Job's
    completions and parallelism together (elastic Indexed Jobs)."""
    if root is None:
        raise NotFound(f"job {name} not found in namespace {ns}")
    found = bounds(root)
    if found is None:
        raise UsageError(f"--workers: job {name} is not elastic (submitted without "
                         "--min-workers/--max-workers); only elastic jobs can be scaled")
    low, _, high = found
    if not low <= workers <= high:
        raise UsageError(f"--workers: job {name} runs {low}..{high} workers "
                         f"(--min-workers/--max-workers), not {workers}")
    if st.condition(root, "Complete") or st.condition(root, "Failed"):
        raise UserError(f"job {name} has ended; nothing to scale")
    try:
        client.patch(JOB, names.service(name), {"spec": {"completions": workers,
                                                         "parallelism": workers}}, ns)
    except ApiError as exc:
        if exc.not_found:
            raise UserError(f"job {name} has no worker Job {names.service(name)} (deleted?)") \
                from None
        raise
    history = [*_scaled(root), {"at": datetime.now(timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"), "workers": workers}]
    client.patch(JOB, names.launcher(name), {"metadata": {"annotations": {
        ANNOTATION_SCALED: json.dumps(history, separators=(",", ":"))}}}, ns)
    return f"job {name}: scaled to {workers} workers (elastic {low}..{high})"


def stop_workers(client: KubeClient, name: str, ns: str) -> None:
    """The launcher is done: the worker Job must not replace the workers released or
    removed now (the clean pod policy), so it goes first, its pods with it."""
    try:
        client.delete(JOB, names.service(name), ns, propagation="Background")
    except ApiError as exc:
        if not exc.not_found:
            raise


def current_sizes(client: KubeClient, namespace: str | None) -> dict[tuple[str, str], str]:
    """`top job`'s SIZE of each elastic job (one list call): the worker pods running now of
    the size asked (its worker Job's parallelism), e.g. "2/3"."""
    selector = f"{names.job_selector()},{names.LABEL_ROLE}={names.ROLE_WORKER}"
    try:
        jobs = client.items(JOB, namespace, all_namespaces=namespace is None,
                            label_selector=selector)
    except ApiError:
        return {}
    out = {}
    for job in jobs:
        name = st.job_name_of(job)
        if not name:
            continue
        status, spec = job.get("status") or {}, job.get("spec") or {}
        running = int(status.get("ready") or status.get("active") or 0)
        out[(st.meta(job).get("namespace") or "", name)] = f"{running}/{spec.get('parallelism', 0)}"
    return out
