"""The start gate's calls (mpijob.k8s.start_gate): the worker pods are created owned by the
gate's pod, and its deadline is set once they are all scheduled (submit); once they have
started, their owner becomes the launcher Job (`hvdk8s tidy`, the start guard's sweep)."""

from __future__ import annotations

import json
import time

from launcher.backends.kubernetes.client import EVENT, JOB, POD, ApiError, KubeClient
from launcher.backends.kubernetes.watching import JobWatch
from launcher.errors import UserError
from mpijob.jobspec import names

__all__ = ["GatedCreation", "delete_gate", "hand_over", "handover_due"]

# The Job controller makes a Job's pod within a second or two of seeing the Job.
POD_WAIT_SECONDS = 60.0


class GatedCreation:
    """What a built-in submit does for the gate: once the gate Job exists, wait for its pod
    and hand the workers its ownerReference; when they are scheduled, set the deadline."""

    def __init__(self, client: KubeClient, namespace: str, start_timeout: int, *,
                 pod_wait: float = POD_WAIT_SECONDS):
        self.client, self.ns, self.start_timeout = client, namespace, start_timeout
        self.pod_wait = pod_wait
        self.gate: dict | None = None
        self.since: float | None = None  # monotonic time of the gate's creation
        self._owner: dict | None = None

    def created(self, obj: dict) -> None:
        # lazy: the renderer's module loads pydantic, which get/list/delete never need
        from mpijob.k8s.start_gate import is_gate

        if is_gate(obj):
            self.gate, self.since = obj, time.monotonic()

    def owned(self, obj: dict) -> dict:
        """A worker pod owned by the gate's pod instead of the launcher Job (the garbage
        collector deletes a dependent once all its owners are gone, so it has only the one)."""
        from mpijob.k8s.start_gate import is_worker

        if self.gate is None or not is_worker(obj):
            return obj
        if self._owner is None:
            self._owner = self._pod_reference()
        return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [self._owner]}}

    def _pod_reference(self) -> dict:
        assert self.gate is not None
        gm = self.gate["metadata"]
        uid = gm["uid"]
        selector = f"{names.LABEL_START_GATE}={gm['labels'][names.LABEL_START_GATE]}"
        deadline = time.monotonic() + self.pod_wait
        with JobWatch(self.client, self.ns, selector, (POD,)) as seen:
            while True:
                for pod in seen.of(POD).items():
                    pm = pod["metadata"]
                    if any(r.get("uid") == uid for r in pm.get("ownerReferences") or []):
                        # blockOwnerDeletion would need update on pods/finalizers
                        # (OwnerReferencesPermissionEnforcement); foreground order is not needed.
                        return {"apiVersion": "v1", "kind": "Pod", "name": pm["name"],
                                "uid": pm["uid"], "controller": False,
                                "blockOwnerDeletion": False}
                left = deadline - time.monotonic()
                if left <= 0:
                    raise UserError(f"the Job controller made no pod for Job {gm['name']} "
                                    f"within {self.pod_wait:g}s{self._why_not(gm['name'])}; "
                                    "nothing of the job was left behind")
                seen.wait(left)

    def _why_not(self, name: str) -> str:
        """The Job controller's FailedCreate event (a quota, an admission refusal)."""
        try:
            events = self.client.items(EVENT, self.ns, field_selector=(
                f"involvedObject.kind=Job,involvedObject.name={name},reason=FailedCreate"))
        except ApiError:
            return ""
        return f": {events[-1].get('message')}" if events else ""

    def arm(self) -> None:
        """Every worker is scheduled: the gate's deadline is the time that took plus the
        start timeout, counted from the gate's start as activeDeadlineSeconds is (the
        field may be changed on a running Job: job_controller.go updateJob re-queues it)."""
        from mpijob.k8s.start_gate import deadline_seconds

        if self.gate is None or self.since is None:
            return
        seconds = deadline_seconds(self.start_timeout, time.monotonic() - self.since)
        self.client.patch(JOB, self.gate["metadata"]["name"],
                          {"spec": {"activeDeadlineSeconds": seconds}}, self.ns)


def delete_gate(client: KubeClient, job: str, namespace: str, grace_seconds: int | None) -> bool:
    """`delete` and rollbacks: the gate Job (its own label, not the job's), so that a new
    submit of the name does not meet it while the garbage collector is still on its way."""
    gate = client.get(JOB, names.start_gate(job), namespace)
    labels = ((gate or {}).get("metadata") or {}).get("labels") or {}
    if gate is None or labels.get(names.LABEL_START_GATE) != job:
        return False
    return client.delete(JOB, names.start_gate(job), namespace, propagation="Background",
                         grace_seconds=grace_seconds)


def handover_due(root: dict | None, pods: list[dict],
                 worker_job: dict | None = None) -> list[dict]:
    """What still has the gate's pod as owner though the job has started (no request): the
    worker pods, or an elastic job's worker Job (`worker_job`, read by the caller). A
    succeeded gate pod may be deleted by the pod garbage collector on a cluster past its
    terminated-pod threshold (pkg/controller/podgc/gc_controller.go, gcTerminated: the
    oldest terminated pods first) and must not take running workers with it. Started is
    what the gate waits for: the workers Ready (their readiness probe is their sshd), all
    of them, or an elastic job's minimum."""
    if root is None or root.get("kind", "Job") != "Job":
        return []
    workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(
        names.LABEL_ROLE) == names.ROLE_WORKER and not p["metadata"].get("deletionTimestamp")]
    ready = [p for p in workers if _ready(p)]
    minimum = _elastic_minimum(root)
    if minimum is not None:  # its worker Job is what the gate's pod owns
        if len(ready) < minimum or worker_job is None:
            return []
        return [worker_job] if _gated(worker_job) else []
    gated = [p for p in workers if _gated(p)]
    return gated if gated and len(ready) == len(workers) else []


def is_elastic(root: dict | None) -> bool:
    return root is not None and _elastic_minimum(root) is not None


def hand_over(client: KubeClient, root: dict, gated: list[dict]) -> list[str]:
    """`hvdk8s tidy` and the start guard's sweep: the owner of `gated` (handover_due)
    becomes the launcher Job. Returns the names handed over, each confirmed by the API
    server; one gone meanwhile is skipped."""
    rm = root["metadata"]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": rm["name"], "uid": rm["uid"],
           "controller": False, "blockOwnerDeletion": True}
    done = []
    for obj in gated:
        try:
            # A merge patch replaces the list: the gate pod's reference goes with it.
            client.patch(JOB if obj.get("kind") == "Job" else POD, obj["metadata"]["name"],
                         {"metadata": {"ownerReferences": [ref]}}, rm["namespace"])
        except ApiError as exc:
            if not exc.not_found:
                raise
            continue
        done.append(obj["metadata"]["name"])
    return done


def _gated(obj: dict) -> bool:
    return any(r.get("kind") == "Pod" for r in obj["metadata"].get("ownerReferences") or [])


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _elastic_minimum(root: dict) -> int | None:
    try:
        spec = json.loads(((root.get("metadata") or {}).get("annotations") or {}).get(
            names.ANNOTATION_SPEC) or "{}")
    except ValueError:
        return None
    if not isinstance(spec, dict) or not (spec.get("min_workers") or spec.get("max_workers")):
        return None
    return int(spec.get("min_workers") or spec.get("workers") or 1)
