"""The Job controller's part for an Indexed batch/v1 Job, as small as the rehearsal needs:
it keeps one pod per completion index running and runs them on the rehearsal cluster.

Modelled on kubernetes pkg/controller/job (job_controller.go syncJob/manageJob,
indexed_job_utils.go, backoff_utils.go):
- wanted pods = min(parallelism, completions - succeeded indexes); an index with no active
  pod and no success gets one, lowest first (firstPendingIndexes);
- each pod is the template stamped for its index (kubesim/jobs.py
  `pod_from_template`: the index in the `batch.kubernetes.io/job-completion-index`
  annotation and label, hostname `<job>-<index>` in the template's subdomain) and named
  `<job>-<index>-<5 random>`, as the API server completes a generateName;
- a failed pod counts against `backoffLimit` (the Job fails past it and its active pods
  are deleted) or, with `backoffLimitPerIndex`, against its index's (that index is not
  retried past it); its replacement waits the pod-failure back-off, 10 s doubling per
  failure since the last success, at most 10 min (DefaultJobPodFailureBackOff,
  MaxJobPodFailureBackOff, getRemainingTimeForFailuresCount), counted from when the model
  sees the pod ended (upstream: the pod's finish time; the cluster's loop syncs every 0.5 s);
- active pods whose index is at or past `completions` (an elastic Indexed Job scaled
  down) are deleted and count neither as failed nor succeeded (getValidPodsWithFilter,
  appendDuplicatedIndexPodsForRemoval).

Not modelled: suspend, podFailurePolicy, successPolicy, activeDeadlineSeconds, status and
conditions beyond `failed` (the launcher Job's outcome is read from the launcher pod).
The Job is read anew at each sync from `read_job`, so a change to its spec (hvdk8s scale
through an API server) is what the next sync acts on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubesim.jobs import INDEX_KEY, pod_from_template
from kubesim.util import random_suffix
from tests.rehearsal.kubelet import Pod

BACKOFF_SECONDS = 10.0  # DefaultJobPodFailureBackOff
MAX_BACKOFF_SECONDS = 600.0  # MaxJobPodFailureBackOff
DEFAULT_BACKOFF_LIMIT = 6  # pkg/apis/batch/v1/defaults.go


def backoff_remaining(failures: int, last_failure: float | None, now: float) -> float:
    """Seconds before a replacement may be created after `failures` failures in a row."""
    if failures == 0 or last_failure is None:
        return 0.0
    delay = min(BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS)
    return max(0.0, delay - (now - last_failure))


def index_of(pod: Pod) -> int:
    return int((pod.obj["metadata"].get("annotations") or {})[INDEX_KEY])


@dataclass
class IndexedJobController:
    """Runs one Indexed Job's pods with `start_pod` (the cluster's kubelet)."""

    read_job: Callable[[], dict | None]
    start_pod: Callable[[dict], Pod]
    clock: Callable[[], float] = time.monotonic
    pods: list[Pod] = field(default_factory=list)
    failed_job: str | None = None  # the reason, once the Job has failed
    _counted: dict[str, str] = field(default_factory=dict)  # pod name -> Succeeded/Failed
    _deleted: set[str] = field(default_factory=set)
    _failures_in_a_row: int = 0
    _last_failure: float | None = None
    _index_failures: dict[int, int] = field(default_factory=dict)
    _index_last_failure: dict[int, float] = field(default_factory=dict)
    _stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def stop(self) -> None:
        """The Job is deleted (hvdk8s deletes the worker Job once the launcher is done):
        nothing is created any more; the pods left end by themselves or at teardown."""
        with self._lock:
            self._stopped = True

    def active(self) -> list[Pod]:
        return [p for p in self.pods if p.exit_code() is None and p.name not in self._deleted]

    def sync(self) -> None:
        with self._lock:
            if self._stopped or self.failed_job:
                return
            job = self.read_job()
            if job is None:  # deleted: the garbage collector takes its pods
                self._stopped = True
                return
            self._sync(job, self.clock())

    def _sync(self, job: dict, now: float) -> None:
        spec = job["spec"]
        completions, parallelism = int(spec["completions"]), int(spec.get("parallelism", 1))
        per_index = spec.get("backoffLimitPerIndex")
        # Pods past the completions are removed, not counted (scaled down).
        for pod in self.active():
            if index_of(pod) >= completions:
                self._delete(pod, job)
        succeeded: set[int] = set()
        for pod in self.pods:
            code, ix = pod.exit_code(), index_of(pod)
            if code is None or ix >= completions or pod.name in self._deleted:
                continue
            if code == 0:
                succeeded.add(ix)
            if pod.name in self._counted:
                continue
            self._counted[pod.name] = "Succeeded" if code == 0 else "Failed"
            if code == 0:  # newBackoffRecord: a success resets the failures in a row
                self._failures_in_a_row, self._last_failure = 0, None
            else:
                self._failures_in_a_row += 1
                self._last_failure = now
                self._index_failures[ix] = self._index_failures.get(ix, 0) + 1
                self._index_last_failure[ix] = now
        failed = sum(1 for v in self._counted.values() if v == "Failed")
        if per_index is None and failed > int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
            self.failed_job = "BackoffLimitExceeded"
            for pod in self.active():
                self._delete(pod, job)
            return
        active = self.active()
        want = max(0, min(parallelism, completions - len(succeeded)))
        if want <= len(active):
            return
        if per_index is None and backoff_remaining(self._failures_in_a_row,
                                                   self._last_failure, now) > 0:
            return
        busy = {index_of(p) for p in active}
        pending = [i for i in range(completions) if i not in busy and i not in succeeded
                   and (per_index is None or self._index_failures.get(i, 0) <= per_index)]
        if per_index is not None:
            pending = [i for i in pending if backoff_remaining(
                self._index_failures.get(i, 0), self._index_last_failure.get(i), now) == 0]
        for index in pending[:want - len(active)]:
            self._create(job, index)

    def _create(self, job: dict, index: int) -> None:
        pod = pod_from_template(job, str(index))
        meta = pod["metadata"]
        meta["name"] = meta.pop("generateName") + random_suffix()
        meta["namespace"] = job["metadata"].get("namespace", "default")
        self.pods.append(self.start_pod(pod))

    def _delete(self, pod: Pod, job: dict) -> None:
        """The kubelet stops a deleted pod: SIGTERM, then SIGKILL after its grace period
        (in the background, as the API server returns at once)."""
        self._deleted.add(pod.name)
        grace = float(job["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30))
        threading.Thread(target=pod.kill, kwargs={"grace": grace, "reason": "Deleted"},
                         daemon=True).start()
