"""Logs of a job's pods: one pod, or all of them with a `[pod] ` prefix, now or followed.

Following survives what happens to pods during a job: a container that restarts (the
stream is re-opened for the new container), a launcher pod that the Job replaces after a
failure (the new pod is followed), pods that have not started yet (waited for). It ends
when the job is terminal and every followed stream has been read to its end.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from launcher.backends.kubernetes.client import ApiError, KubeClient
from launcher.backends.kubernetes.status import meta

_DONE = object()


def main_container(pod: dict) -> str | None:
    containers = (pod.get("spec") or {}).get("containers") or []
    return containers[0].get("name") if containers else None


def _container_status(pod: dict) -> dict:
    name = main_container(pod)
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == name:
            return c
    return {}


def started(pod: dict) -> bool:
    """A container has run (or runs), so the kubelet has a log to serve."""
    state = _container_status(pod).get("state") or {}
    return "running" in state or "terminated" in state or bool(
        _container_status(pod).get("restartCount"))


def pod_log_lines(client: KubeClient, pod: dict, *, tail: int | None = None,
                  previous: bool = False, limit_bytes: int | None = None) -> list[str]:
    """The log of a pod's main container; the previous container's when the current one is
    waiting after a crash (CrashLoopBackOff shows nothing otherwise)."""
    m = meta(pod)
    status = _container_status(pod)
    waiting = "waiting" in (status.get("state") or {})
    use_previous = previous or (waiting and bool(status.get("restartCount")))
    if not started(pod) and not use_previous:
        return []
    try:
        text = client.pod_log(m["name"], m.get("namespace"), container=main_container(pod),
                              tail=tail, previous=use_previous, limit_bytes=limit_bytes)
    except ApiError as exc:
        if exc.status in (400, 404):  # not started yet, or gone meanwhile
            return []
        raise
    return text.splitlines()


def follow_pod(client: KubeClient, find_pods: Callable[[], list[dict]],
               finished: Callable[[list[dict]], bool], *, tail: int | None = None,
               poll: float = 1.0, stop: threading.Event | None = None,
               sleep: Callable[[float], None] = time.sleep,
               waiting: Callable[[list[dict]], None] | None = None) -> Iterator[tuple[str, str]]:
    """(pod name, line) from the pods `find_pods` returns (oldest first), each container
    instance read once to its end: a restarted container is a new instance, a replacement
    pod another. Ends when every instance is read and `finished(pods)` says so."""
    read: set[tuple[str, int]] = set()  # container instances read to their end
    first = True
    while not (stop and stop.is_set()):
        pods = find_pods()
        todo = [(p, _instance(p)) for p in pods if started(p)]
        todo = [(p, i) for p, i in todo if i not in read]
        if not todo:
            if finished(pods):
                return
            if waiting is not None:
                waiting(pods)
            sleep(poll)
            continue
        pod, instance = todo[0]
        m = meta(pod)
        try:
            for line in client.follow_log(m["name"], m.get("namespace"),
                                          container=main_container(pod),
                                          tail=tail if first else None):
                yield m["name"], line
                if stop and stop.is_set():
                    return
        except ApiError as exc:
            if exc.status not in (400, 404):
                raise
            sleep(poll)
            continue
        first = False
        read.add(instance)


def _instance(pod: dict) -> tuple[str, int]:
    m = meta(pod)
    return m.get("uid") or m["name"], int(_container_status(pod).get("restartCount") or 0)


def merge_streams(streams: list[Iterator[tuple[str, str]]], *, prefix: bool) -> Iterator[str]:
    """Interleave several followed streams line by line, as they arrive."""
    if len(streams) == 1 and not prefix:
        for _, line in streams[0]:
            yield line
        return
    q: queue.Queue = queue.Queue(maxsize=10_000)
    stop = threading.Event()

    def pump(stream):
        try:
            for pod, line in stream:
                if stop.is_set():
                    return
                q.put((pod, line))
        except BaseException as exc:  # surfaced in the consumer
            q.put(exc)
        finally:
            q.put(_DONE)

    threads = [threading.Thread(target=pump, args=(s,), daemon=True) for s in streams]
    for t in threads:
        t.start()
    remaining = len(threads)
    try:
        while remaining:
            item = q.get()
            if item is _DONE:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                pod, line = item
                yield f"[{pod}] {line}" if prefix else line
    finally:
        stop.set()
