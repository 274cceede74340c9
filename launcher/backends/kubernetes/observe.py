"""Reading a job's status: `_status_of` (root and pods to a JobStatus), `get` and `list`.
Reads only, for any user: a state that calls for a write (a job past --start-timeout, a
started job's workers still owned by the start gate's pod, pods a finished job left) is
named in one line (owed.py) for `hvdk8s tidy` (tidying.py) to take."""

from __future__ import annotations

import builtins
import time

from launcher.backends.base import FAILED, RUNNING, JobStatus
from launcher.backends.kubernetes import cleanup, elastic
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import EVENT, RESOURCE_CLAIM, ApiError
from launcher.backends.kubernetes.connection import Connection, _api_errors
from launcher.backends.kubernetes.dra_status import add_to_placement, allocated_devices
from launcher.backends.kubernetes.gpu_status import agent_allocations, apply_view, worker_gpu_view
from launcher.backends.kubernetes.listing import list_jobs
from launcher.backends.kubernetes.logs import pod_log_lines
from launcher.backends.kubernetes.owed import say_owed
from launcher.backends.kubernetes.queue import queued
from launcher.errors import NotFound
from launcher.formats.causes import why
from launcher.formats.job_progress import summarize
from launcher.formats.preflight_reports import HEAD_BYTES, failure_reason, preflight_status
from launcher.formats.rank_reports import iter_reports
from mpijob.jobspec import names

LOG_TAIL_FOR_RESULT = 500


class Observing(Connection):
    def _status(self, name: str, ns: str, *, detail: bool = False) -> JobStatus:
        root, mode = self._root(name, ns)
        return self._status_of(name, ns, root, mode, self._pods(name, ns), detail=detail)

    def _status_of(self, name: str, ns: str, root: dict | None, mode: str, pods: list[dict],
                   *, detail: bool = False) -> JobStatus:
        """The job's status from its root and pods; reads more (events, logs) with `detail`."""
        if root is None and not pods:
            raise NotFound(f"job {name} not found in namespace {ns}")
        events: builtins.list[dict] = []
        launcher_log: builtins.list[str] = []
        launcher = None
        if detail:
            if any(not st.is_scheduled(p) for p in pods):
                events = self.client.items(EVENT, ns, field_selector="involvedObject.kind=Pod,"
                                           "reason=FailedScheduling")
            launcher = st.current_launcher(pods)
            if launcher is not None:
                launcher_log = pod_log_lines(self.client, launcher, tail=LOG_TAIL_FOR_RESULT)
        status = st.job_status(name, ns, root=root, pods=pods, mode=mode, events=events,
                               launcher_log=launcher_log)
        if detail and launcher is not None and st.preflight_unread(root, status):
            # The preflight prints first: a long log's tail has lost it, its head has it.
            head = pod_log_lines(self.client, launcher, limit_bytes=HEAD_BYTES)
            status.preflight = preflight_status(list(dict.fromkeys(head + launcher_log))) \
                or status.preflight
        if status.phase == FAILED and (ended := failure_reason(status.preflight)):
            status.reason, status.message = ended
        if detail and status.gpus_per_worker:
            nodes = [r.node for r in status.replicas if r.node and r.role != names.ROLE_LAUNCHER]
            apply_view(status, worker_gpu_view(ns, status.replicas,
                                               agent_allocations(self.client, nodes)))
        if detail and any((p.get("spec") or {}).get("resourceClaims") for p in pods):
            add_to_placement(status.placement,
                             allocated_devices(pods, self.client.items(RESOURCE_CLAIM, ns)))
        if detail and status.phase == FAILED:
            pod = st.failing_pod(pods)
            if pod is not None:
                lines = (launcher_log if pod is st.current_launcher(pods)
                         else pod_log_lines(self.client, pod, tail=st.FAILED_TAIL_LINES))
                status.log_tail = lines[-st.FAILED_TAIL_LINES:]
        queued(self.client, status, root, mode)
        if detail and mode == "operator" and not status.done:
            _add_operator_warning(self.client, status, name, ns)
        if detail and mode == "trainjob" and not status.done:
            # Trainer's and JobSet's own words (a runtime gone, a Job it could not create)
            for kind, who in (("TrainJob", "trainer"), ("JobSet", "jobset")):
                _add_operator_warning(self.client, status, name, ns, kind, who)
        status.why = why(status)  # again: the failing log, the queue and the operator's words
        return status

    @_api_errors
    def get(self, name: str, namespace: str | None = None) -> JobStatus:
        """`hvdk8s get` (and the end of `wait`): the job's status in detail, and the one
        line naming `hvdk8s tidy` when its state calls for a write (owed.py)."""
        ns = self._job_ns(name, namespace)
        root, mode = self._root(name, ns)
        if (worker := self._dispatched(root, name, ns)) is not None:
            return worker.get(name, ns)
        pods = self._pods(name, ns)
        status = self._status_of(name, ns, root, mode, pods, detail=True)
        worker_job = cleanup.worker_job_of(self.client, root, mode)
        if root is not None and mode == "pods" and elastic.bounds(root) is not None:
            status.size = elastic.size_lines(self.client, root, pods)
        say_owed(status, root, mode, pods, worker_job, self.client)
        return status

    @_api_errors
    def list(self, namespace: str | None = None, all_namespaces: bool = False, *,
             live: bool = False) -> builtins.list[JobStatus]:
        """Every hvdk8s job: one paged list per kind (listing.py), none per job, as kubectl
        pays; a finished job's rate comes from its launcher's termination message. `live`
        (`list -o wide`) adds a running job's progress from its launcher's log tail, one read
        each (none where a TrainJob's status.trainerStatus has it): the cost grows with the
        running jobs, so only when asked."""
        statuses = list_jobs(self.client, self._ns(namespace), all_namespaces)
        for status in statuses if live else ():
            if status.phase == RUNNING and status.progress is None:  # a TrainJob may say it
                self._running_progress(status)
        return statuses

    def _running_progress(self, status: JobStatus) -> None:
        """A running job's progress for `list`: its launcher's log tail, one read."""
        launcher = next((r for r in status.replicas if r.role == names.ROLE_LAUNCHER), None)
        if launcher is None or launcher.phase != RUNNING:
            return
        try:
            text = self.client.pod_log(launcher.name, status.namespace, tail=LOG_TAIL_FOR_RESULT)
        except ApiError as exc:
            if exc.status in (400, 403, 404):  # not started, gone or not readable: unknown
                return
            raise
        status.progress = summarize(iter_reports(text.splitlines()), time.time(),
                                    predicted_images_per_sec=status.predicted_images_per_sec)


def _add_operator_warning(client, status: JobStatus, name: str, ns: str, kind: str = "MPIJob",
                          who: str = "operator") -> None:
    """The controller's latest Warning event on the job's object (the MPI Operator's on the
    MPIJob: a worker pod refused by admission, a validation error; Trainer's on the
    TrainJob, JobSet's on the JobSet): they retry forever, so only they say why."""
    try:
        events = client.items(EVENT, ns, field_selector=f"involvedObject.kind={kind},"
                              f"involvedObject.name={name},type=Warning")
    except ApiError:
        return
    if events:
        last = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        said = f"{who}: {last.get('reason')}: {last.get('message')}"
        status.message = f"{status.message}; {said}" if status.message else said
