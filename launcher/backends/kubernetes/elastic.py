"""Elastic built-in jobs on the cluster (mpijob.k8s.render_elastic): `scale`, the phase of a
job whose workers come and go, its size and size history (its worker Job is stopped once
the launcher is done by cleanup.py).

An elastic job holds what it was planned at: the workers it started with (README, "Elastic
jobs"). `scale` up plans the workers that join on the cluster as it is then, every node
included (the worker template only prefers the first plan's nodes), refuses in one line
when they cannot fit, and says "scaled" only once the cluster shows the new size: the
workers that join Running, those removed gone."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from launcher.backends.base import FAILED, RUNNING
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import EVENT, JOB, POD, ApiError, KubeClient
from launcher.errors import NotFound, Refused, Timeout, UsageError, UserError
from mpijob.jobspec import names
from mpijob.plural import plural

ANNOTATION_SCALED = st.ANNOTATION_SCALED
_scaled = st.scaled_history


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


def scale(client: KubeClient, root: dict | None, name: str, ns: str, workers: int, *,
          timeout: float = 60.0, poll: float = 0.5) -> str:
    """Change a running elastic job's workers within its bounds: the worker Job's
    completions and parallelism together (elastic Indexed Jobs), once the workers that
    join are known to fit; then wait up to `timeout` seconds for the cluster to show it."""
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
    worker_job = client.get(JOB, names.service(name), ns)
    if worker_job is None:
        raise UserError(f"job {name} has no worker Job {names.service(name)} (deleted?)")
    now = int((worker_job.get("spec") or {}).get("parallelism") or 0)
    if workers > now and (why := growth_refusal(client, root, worker_job, workers - now, ns)):
        raise Refused(f"job {name}: {plural(workers - now, 'more worker')} cannot be placed "
                      f"now: {why}; nothing was changed (it runs {now})")
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
    return _confirmed(client, name, ns, workers, (low, high), timeout, poll)


def _confirmed(client: KubeClient, name: str, ns: str, workers: int,
               bounds_: tuple[int, int], timeout: float, poll: float) -> str:
    """"scaled" once `workers` worker pods run and no other is left; else what it waits for
    (Timeout, exit 124: the change stands, the cluster has not made it yet)."""
    selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_WORKER}"
    deadline = time.monotonic() + timeout
    while True:
        pods = live_workers(client.items(POD, ns, label_selector=selector))
        running = sorted((p for p in pods if st.replica(p).phase == RUNNING),
                         key=lambda p: st.replica(p).name)
        waiting = [p for p in pods if st.replica(p).phase != RUNNING]
        if len(running) == workers and not waiting:
            where = "; ".join(f"{st.replica(p).name} on {st.replica(p).node}" for p in running)
            return (f"job {name}: scaled to {workers} workers (elastic {bounds_[0]}.."
                    f"{bounds_[1]}): {where}")
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
    why = [f"{r.name} {r.phase}" + (f" ({r.reason}: {r.message})" if r.message else
                                    f" ({r.reason})" if r.reason else "")
           for r in (st.replica(p) for p in waiting)]
    if len(running) + len(waiting) > workers:
        why.append(f"{len(running) + len(waiting) - workers} to leave")
    elif len(running) + len(waiting) < workers:
        why.append(f"{workers - len(running) - len(waiting)} not created yet")
    raise Timeout(f"job {name}: asked for {workers} workers; {len(running)} running after "
                  f"{timeout:g}s, waiting for: {'; '.join(why) or 'the worker Job'} "
                  f"(hvdk8s get {name} -n {ns} follows it)")


def growth_refusal(client: KubeClient, root: dict, worker_job: dict, added: int,
                   ns: str) -> str | None:
    """Why `added` more workers, each one pod of the worker template's requests, cannot be
    placed on the cluster as it is now (None: they can, or GPUs are not hvdk8s's to place)."""
    # lazy: the spec's models and placement load only to scale up
    from launcher.backends.kubernetes.snapshot import SnapshotUnreadable, take_snapshot
    from mpijob.jobspec.decisions import asked_of_record
    from mpijob.jobspec.spec import JobSpec
    from mpijob.scheduling.placement import PlacementRequest, place

    spec = JobSpec.model_validate(asked_of_record(st.job_spec_of(root)))
    if not spec.gpus_per_worker:
        return None  # CPU workers are the scheduler's to place, as at submit
    pod = ((worker_job.get("spec") or {}).get("template") or {}).get("spec") or {}
    requests = next((c.get("resources") or {} for c in pod.get("containers") or []
                     if c.get("name") == "worker"), {}).get("requests") or {}
    try:
        snap = take_snapshot(client, ns, gpu_nodes_only=True)
    except SnapshotUnreadable:
        return None  # the scheduler has the last word; `scale` waits and says what it saw
    grow = spec.model_copy(update={"workers": added, "cpu": requests.get("cpu"),
                                   "memory": requests.get("memory")})
    placed = place(snap.cluster, PlacementRequest.from_spec(grow), policy=spec.placement_policy)
    return None if placed.feasible else placed.reason


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
