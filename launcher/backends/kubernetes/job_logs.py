"""`logs`: which pods of a job to read (the launcher, a worker, all), now or followed
(the streams: logs.py), and what a follow waits for. Reads only: a follow ends with the
job, or once a pod is past --start-timeout (the job will not start by itself)."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterator
from typing import NoReturn

from launcher.backends.base import TERMINAL
from launcher.backends.kubernetes import start_guard
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import POD
from launcher.backends.kubernetes.connection import _api_errors_gen
from launcher.backends.kubernetes.logs import follow_pod, merge_streams, pod_log_lines, started
from launcher.backends.kubernetes.observe import Observing
from launcher.errors import NotFound, UsageError, UserError
from launcher.formats.causes import replica_cause
from launcher.output import note
from mpijob.jobspec import names


class JobLogs(Observing):
    @_api_errors_gen
    def logs(self, name: str, namespace: str | None = None, *, follow: bool = False,
             rank: int | None = None, worker: int | None = None, all_replicas: bool = False,
             tail: int | None = None, previous: bool = False) -> Iterator[str]:
        if rank is not None:
            raise UsageError("--rank: ranks are a local-backend notion; on Kubernetes use "
                             "--worker INDEX or --all")
        ns = self._job_ns(name, namespace)
        pods = self._pods(name, ns)
        if not pods:  # none here: the job is gone, or MultiKueue ran it elsewhere
            root = self._root(name, ns)[0]
            if root is None:
                raise NotFound(f"job {name} not found in namespace {ns}")
            if (there := self._dispatched(root, name, ns)) is not None:
                yield from there.logs(name, ns, follow=follow, worker=worker,
                                      all_replicas=all_replicas, tail=tail, previous=previous)
                return
        workers = sorted((p for p in pods if st.pod_role(p) != names.ROLE_LAUNCHER),
                         key=st.pod_index)
        if worker is not None:
            chosen = [p for p in workers if st.pod_index(p) == worker]
            if not chosen:
                self._no_such_worker(name, ns, worker, workers)
            targets: builtins.list[tuple[str, dict | None]] = [("worker", chosen[0])]
        else:
            targets = [("launcher", None)] + ([("worker", p) for p in workers]
                                              if all_replicas else [])
        # --all prefixes even when only the launcher is left (finished: workers cleaned up).
        prefix = all_replicas or len(targets) > 1
        if not follow:
            yield from self._logs_now(name, ns, pods, targets, tail, previous, prefix)
            return
        stop = threading.Event()
        streams = [self._follow_target(name, ns, role, pod, tail, stop) for role, pod in targets]
        try:
            yield from merge_streams(streams, prefix=prefix)
        finally:
            stop.set()

    def _no_such_worker(self, name: str, ns: str, worker: int, pods: builtins.list[dict]) -> NoReturn:
        """An index outside the job is a bad option value (exit 2, as the local backend's
        --rank); one inside it whose pod is gone (cleaned up, evicted) is not."""
        root, _ = self._root(name, ns)
        count = max(st.expected_worker_pods(root), len(pods))
        if not 0 <= worker < count:
            has = f"worker pods 0..{count - 1}" if count else "no worker pods"
            raise UsageError(f"--worker: job {name} has {has}, not {worker}")
        raise UserError(f"--worker {worker}: pod {names.worker(name, worker)} of job {name} "
                        "does not exist (not created yet, or removed after the job finished)")

    def _logs_now(self, name, ns, pods, targets, tail, previous, prefix) -> Iterator[str]:
        for role, pod in targets:
            if role == "launcher":
                pod = st.current_launcher(pods)
                if pod is None:
                    if prefix:
                        continue
                    status = self._status(name, ns)
                    raise UserError(f"job {name} has no launcher pod yet ({status.phase}"
                                    f"{': ' + status.message if status.message else ''})")
            pod_name = pod["metadata"]["name"]
            if not prefix and not previous and not started(pod):
                r = st.replica(pod)
                detail = ": ".join(x for x in (r.reason, r.message) if x)
                raise UserError(f"{pod_name} has not started yet ({r.phase}"
                                f"{': ' + detail if detail else ''}); no log to show")
            for line in pod_log_lines(self.client, pod, tail=tail, previous=previous):
                yield f"[{pod_name}] {line}" if prefix else line

    def _follow_target(self, name, ns, role, pod, tail, stop):
        def job_done() -> bool:
            # A pod past --start-timeout (an image that never pulls) ends the stream too,
            # instead of waiting on silently: the CLI's `get` then says what fails it.
            root, mode = self._root(name, ns)
            pods = self._pods(name, ns)
            try:
                status = self._status_of(name, ns, root, mode, pods)
            except NotFound:
                return True
            return status.done or start_guard.overdue(root, pods) is not None

        if role == "launcher":
            selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_LAUNCHER}"

            def find():  # every launcher pod: the Job replaces a failed one
                return st.launcher_pods(self.client.items(POD, ns, label_selector=selector))

            def finished(_pods):
                return job_done()
        else:
            pod_name = pod["metadata"]["name"]

            def find():
                current = self.client.get(POD, pod_name, ns)
                return [current] if current is not None else []

            def finished(pods):
                return (not pods or (pods[0].get("status") or {}).get("phase") in TERMINAL
                        or job_done())

        return follow_pod(self.client, find, finished, tail=tail, poll=self.poll, stop=stop,
                          waiting=self._saying_what_logs_wait_for(name, ns, role))

    def _saying_what_logs_wait_for(self, name: str, ns: str, role: str):
        """`logs -f` before a pod has started: say what it waits for (an image that cannot
        be pulled, unscheduled workers), once each time that changes, instead of silence."""
        said = [""]

        def waiting(pods: builtins.list[dict]) -> None:
            pod = pods[-1] if pods else None
            if pod is None:
                status = self._status(name, ns)
                what = (f"waiting for job {name}'s {role} pod ({status.phase}"
                        + (f": {status.message}" if status.message else "") + ")")
            else:
                r = st.replica(pod)
                detail = ": ".join(x for x in (r.reason, r.message) if x)
                cause = replica_cause(r)  # the cause get's why line gives, with its fix
                what = (f"waiting for {pod['metadata']['name']} to start: {cause}" if cause else
                        f"waiting for {pod['metadata']['name']} to start ({r.phase}"
                        + (f": {detail}" if detail else "") + ")")
            # The kubelet alternates ErrImagePull and ImagePullBackOff: one cause, said once.
            key = "image pull" if "ImagePull" in what else what
            if key != said[0]:
                said[0] = key
                note(what)

        return waiting
