"""`wait` and `get --watch`: a job's status at each change, woken by the watches of
watching.py, reading only. Both end with `get` once the job has ended, or has a pod past
--start-timeout (which nothing may have failed: `get` says what does, owed.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from launcher.backends.base import RUNNING, SUCCEEDED, JobStatus, status_key
from launcher.backends.kubernetes import start_guard
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.client import JOB, MPIJOB, POD
from launcher.backends.kubernetes.connection import _api_errors, _api_errors_gen
from launcher.backends.kubernetes.listing import owned_by_mpijob
from launcher.backends.kubernetes.logs import pod_log_lines
from launcher.backends.kubernetes.observe import LOG_TAIL_FOR_RESULT, Observing
from launcher.backends.kubernetes.stallcheck import StallCheck, probe_says_progressing
from launcher.backends.kubernetes.watching import JobWatch
from launcher.errors import NotFound, Timeout
from launcher.formats.job_progress import summarize
from launcher.formats.rank_reports import iter_reports
from mpijob.jobspec import names


class Waiting(Observing):
    @_api_errors
    def wait(self, name: str, namespace: str | None = None, *,
             timeout: float | None = None,
             on_change: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Block until the job is terminal, woken by watches on its pods and roots
        (watching.py): no request while they are healthy and nothing changes. `on_change`
        gets each status whose phase or cause changed (what the wait waits for)."""
        ns = self._job_ns(name, namespace)
        deadline = None if timeout is None else time.monotonic() + timeout
        status, settle = None, None
        last_shown: tuple = ()
        stall, was_progressing = StallCheck(), False
        with self._job_watch(name, ns) as seen:
            while True:
                root, mode = _root_of(name, seen)
                if (worker := self._dispatched(root, name, ns)) is not None:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    return worker.wait(name, ns, timeout=left, on_change=on_change)
                pods = seen.of(POD).items()
                if start_guard.overdue(root, pods) is not None:
                    return self.get(name, ns)  # it will not start: `get` says what fails it
                try:
                    status = self._status_of(name, ns, root, mode, pods)
                except NotFound:
                    if status is None:
                        raise
                    raise NotFound(f"job {name} was deleted while waiting") from None
                if on_change is not None and not status.done:
                    shown = what_it_waits_for(status)
                    if shown != last_shown:
                        last_shown = shown
                        on_change(status)
                # A succeeded launcher pod is recorded by the Job a moment later; waiting for
                # that lets the clean pod policy remove the launcher pod too (All).
                now = time.monotonic()
                # No log read while the launcher's probe says the ranks progress; one at once
                # when it stops saying so.
                progressing = probe_says_progressing(st.current_launcher(pods))
                if was_progressing and not progressing:
                    stall.reset()
                was_progressing = progressing
                look = status.phase == RUNNING and not progressing
                if look and stall.due(now):
                    if (stalled := self._stalled(name, ns, status, pods, stall, now)) is not None:
                        return stalled
                if status.done:
                    settle = settle or now + 5.0
                    if status.finished or status.phase != SUCCEEDED or now >= settle:
                        return self.get(name, ns)
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    why = f" ({status.reason}: {status.message})" if status.message else ""
                    raise Timeout(f"job {name} is still {status.phase} after {timeout:g}s{why}")
                # Nothing may change while a pod sits in ImagePullBackOff: look again at its
                # start deadline too.
                start = start_guard.seconds_left(root, pods)
                wake = [t for t in (left, settle and settle - now,
                                    None if start is None else start + 0.5,
                                    stall.seconds_left(now) if look else None)
                        if t is not None]
                seen.wait(min(wake) if wake else None)

    def _stalled(self, name: str, ns: str, status: JobStatus, pods: list[dict],
                 stall: StallCheck, now: float) -> JobStatus | None:
        """`get`'s status when the launcher's log tail shows a stall (read at stall's rate,
        one request), else None."""
        launcher = st.current_launcher(pods)
        lines = pod_log_lines(self.client, launcher, tail=LOG_TAIL_FOR_RESULT) if launcher else []
        progress = summarize(iter_reports(lines), time.time(),
                             predicted_images_per_sec=status.predicted_images_per_sec)
        stall.looked(progress, now)
        if progress is None or not progress.stalled:
            return None
        got = self.get(name, ns)  # names the silent ranks' pods; still stalled when read?
        return got if got.progress is not None and got.progress.stalled else None

    @_api_errors_gen
    def watch_status(self, name: str, namespace: str | None = None, *,
                     poll: float = 2.0) -> Iterator[JobStatus]:
        """`get --watch`: the status now and at each change, woken by the same watches as
        `wait` (no polling while they are healthy); the last one is `get`'s."""
        ns = self._job_ns(name, namespace)
        last, seen_once = None, False
        with self._job_watch(name, ns) as seen:
            while True:
                root, mode = _root_of(name, seen)
                try:
                    status = self._status_of(name, ns, root, mode, seen.of(POD).items())
                except NotFound:
                    if not seen_once:
                        raise
                    raise NotFound(f"job {name} was deleted while watching") from None
                seen_once = True
                if status.done or start_guard.overdue(root, seen.of(POD).items()) is not None:
                    yield self.get(name, ns)
                    return
                if status_key(status) != last:
                    last = status_key(status)
                    yield status
                seen.wait(None)

    def _job_watch(self, name: str, ns: str) -> JobWatch:
        trainjob = trainer.trainjob_kind(self.client)
        kinds = [POD, JOB] + ([MPIJOB] if self.client.serves(MPIJOB) else []) + (
            [trainjob] if trainjob is not None else [])
        return JobWatch(self.client, ns, names.job_selector(name), kinds,
                        watch_timeout=self.watch_timeout)


def _root_of(name: str, seen: JobWatch) -> tuple[dict | None, str]:
    """`_root` from watched objects: the launcher Job (pods mode), else the MPIJob."""
    job = seen.of(JOB).get(names.launcher(name))
    if job is not None and st.job_name_of(job) == name and not owned_by_mpijob(job):
        return job, "pods"
    if seen.has(MPIJOB):
        mpijob = seen.of(MPIJOB).get(name)
        if mpijob is not None:
            return mpijob, "operator"
    for kind in trainer.TRAINJOBS:
        if seen.has(kind) and (found := seen.of(kind).get(name)) is not None:
            found.setdefault("kind", "TrainJob")
            return found, "trainjob"
    return None, "pods"


def what_it_waits_for(status: JobStatus) -> tuple:
    """The phase and the cause without its detail: the kubelet alternates ErrImagePull and
    ImagePullBackOff for one image that does not pull (kuberuntime image back-off), which is
    one cause to a person waiting, not a change to report each time."""
    cause = status.why or status.reason or ""
    return status.phase, cause.split(" (", 1)[0]
