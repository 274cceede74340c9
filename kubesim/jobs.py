"""batch/v1 Job controller: pods from the template, backoffLimit, conditions, TTL."""

from __future__ import annotations

from . import errors, events
from .clock import Clock
from .controller import Loop
from .podutil import get_condition, is_terminal, set_condition
from .util import deepcopy, now_rfc3339

COMPONENT = "job-controller"
# batch.kubernetes.io/job-completion-index: an Indexed Job pod's index (annotation and label).
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def finished(job: dict) -> str | None:
    for t in ("Complete", "Failed"):
        c = get_condition(job, t)
        if c and c.get("status") == "True":
            return t
    return None


def _ranges(indexes: list[int]) -> str:
    """completedIndexes format: '0-2,5'."""
    out, run = [], []
    for i in sorted(set(indexes)):
        if run and i == run[-1] + 1:
            run.append(i)
        else:
            if run:
                out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


class JobController(Loop):
    name = "job-controller"

    def __init__(self, store, registry, objects, tick: float = 0.02, clock: Clock | None = None):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects
        self.clock = clock or Clock()  # deadlines and TTLs count by it
        self._counted: dict[str, dict[str, str]] = {}  # job uid -> {pod uid: final phase}
        self._started: dict[str, float] = {}
        self._finished_at: dict[str, float] = {}
        self._create_errors: dict[str, str] = {}

    def _step(self) -> None:
        jobs = self.store.items("batch/jobs")
        live = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            try:
                self._sync(job)
            except errors.ApiError as e:
                if e.code != 404:  # the job or a pod vanished mid-sync: next tick fixes it
                    raise
        for d in (self._counted, self._started, self._finished_at):
            for uid in [u for u in d if u not in live]:
                del d[uid]

    def _owned_pods(self, job: dict) -> list[dict]:
        uid, ns = job["metadata"]["uid"], job["metadata"]["namespace"]
        out = []
        for key, pns, name in self.store.dependents(uid):
            if key == "/pods":
                p = self.store.get(key, pns, name)
                if p is not None and any(r.get("uid") == uid and r.get("controller")
                                         for r in p["metadata"].get("ownerReferences") or []):
                    out.append(p)
        return [p for p in out if p["metadata"]["namespace"] == ns]

    def _sync(self, job: dict) -> None:
        m, spec = job["metadata"], job["spec"]
        uid, ns, name = m["uid"], m["namespace"], m["name"]
        done = finished(job)
        if done:
            self._maybe_ttl(job)
            return
        pods = self._owned_pods(job)
        counted = self._counted.setdefault(uid, {})
        for p in pods:
            phase = (p.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                counted.setdefault(p["metadata"]["uid"], phase)
        active = [p for p in pods if not is_terminal(p) and not p["metadata"].get(
            "deletionTimestamp")]
        succeeded = sum(1 for v in counted.values() if v == "Succeeded")
        failed = sum(1 for v in counted.values() if v == "Failed")
        status = deepcopy(job.get("status") or {})
        now = now_rfc3339()

        if spec.get("suspend"):
            for p in active:
                self._delete_pod(job, p)
            set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
            status.pop("startTime", None)
            self._started.pop(uid, None)
            active = []
        else:
            if get_condition(job, "Suspended"):
                set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now)
            if "startTime" not in status:
                status["startTime"] = now
            self._started.setdefault(uid, self.clock.time())
            restarts = sum(cs.get("restartCount", 0) for p in pods
                           for cs in (p.get("status") or {}).get("containerStatuses") or []) \
                if spec["template"]["spec"].get("restartPolicy") == "OnFailure" else 0
            indexed = spec.get("completionMode") == "Indexed"
            completions = spec.get("completions")
            if indexed and completions is not None:
                # pkg/controller/job/indexed_job_utils.go: a pod whose completion index is
                # out of range (completions lowered: an elastic Indexed Job scaled down) is
                # deleted.
                for p in [p for p in active if int(_index(p) or 0) >= completions]:
                    self._delete_pod(job, p)
                    active.remove(p)
            done_idx = sorted({int(_index(p)) for p in pods if _index(p) is not None and
                               counted.get(p["metadata"]["uid"]) == "Succeeded"})
            deadline = spec.get("activeDeadlineSeconds")
            fail_reason = None
            if failed + restarts > spec.get("backoffLimit", 6):
                fail_reason = ("BackoffLimitExceeded", "Job has reached the specified backoff "
                                                       "limit")
            # pkg/controller/job/job_controller.go syncJob: pastActiveDeadline counts from
            # status.startTime with the spec's current value (updateJob re-queues a Job whose
            # activeDeadlineSeconds changed), then deleteActivePods; finished pods stay.
            elif deadline is not None and self.clock.time() - self._started[uid] > deadline:
                fail_reason = ("DeadlineExceeded", "Job was active longer than specified "
                                                   "deadline")
            if fail_reason:
                for p in active:
                    self._delete_pod(job, p)
                    counted[p["metadata"]["uid"]] = "Failed"
                failed = sum(1 for v in counted.values() if v == "Failed")
                active = []
                set_condition(status, "FailureTarget", "True", *fail_reason, now)
                set_condition(status, "Failed", "True", *fail_reason, now)
                self._finished_at[uid] = self.clock.time()
                events.record(self.store, job, "Warning", fail_reason[0], fail_reason[1],
                              COMPONENT)
            elif completions is not None and (
                    (indexed and len([i for i in done_idx if i < completions]) >= completions) or
                    (not indexed and succeeded >= completions)):
                for p in active:
                    self._delete_pod(job, p)
                active = []
                msg = "Reached expected number of succeeded pods"
                set_condition(status, "SuccessCriteriaMet", "True", "CompletionsReached", msg, now)
                set_condition(status, "Complete", "True", "CompletionsReached", msg, now)
                status["completionTime"] = now
                self._finished_at[uid] = self.clock.time()
                events.record(self.store, job, "Normal", "Completed", "Job completed", COMPONENT)
            else:
                active += self._create_pods(job, active, succeeded, done_idx)
            if indexed:
                status["completedIndexes"] = _ranges(done_idx)
        status.update(active=len(active), succeeded=succeeded, failed=failed, terminating=0,
                      uncountedTerminatedPods={},
                      ready=sum(1 for p in active if (get_condition(p, "Ready") or {}).get(
                          "status") == "True"))
        for k in ("active", "succeeded", "failed"):
            if status[k] == 0:
                status.pop(k)  # omitempty, as the real status serialises
        if status != job.get("status"):
            self.store.mutate("batch/jobs", ns, name, lambda j: j.__setitem__("status", status)
                              if j["metadata"]["uid"] == uid else False)

    def _create_pods(self, job, active, succeeded, done_idx) -> list[dict]:
        spec = job["spec"]
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            busy = {_index(p) for p in active}
            todo = [i for i in range(completions) if i not in done_idx and str(i) not in busy]
            want = [str(i) for i in todo[:max(0, parallelism - len(active))]]
        else:
            remaining = parallelism if completions is None else min(
                parallelism, completions - succeeded)
            want = [None] * max(0, remaining - len(active))
        created = []
        m = job["metadata"]
        for idx in want:
            current = self.store.get("batch/jobs", m["namespace"], m["name"])
            if current is None or current["metadata"]["uid"] != m["uid"]:
                # Deleted since this pass listed it (a garbage-collected worker Job): the
                # real controller's pod would be collected as an orphan; make none.
                break
            pod = pod_from_template(job, idx)
            try:
                created.append(self.objects.create(self.registry.by_key("/pods"), pod,
                                                   job["metadata"]["namespace"]))
            except errors.ApiError as e:
                msg = f"Error creating: {e.message}"
                if self._create_errors.get(job["metadata"]["uid"]) != msg:
                    self._create_errors[job["metadata"]["uid"]] = msg
                    events.record(self.store, job, "Warning", "FailedCreate", msg, COMPONENT)
                break
            events.record(self.store, job, "Normal", "SuccessfulCreate",
                          f"Created pod: {created[-1]['metadata']['name']}", COMPONENT)
        return created

    def _delete_pod(self, job: dict, pod: dict) -> None:
        pm = pod["metadata"]
        try:
            self.objects.delete(self.registry.by_key("/pods"), pm["namespace"], pm["name"],
                                "Background")
        except errors.ApiError:
            return
        events.record(self.store, job, "Normal", "SuccessfulDelete",
                      f"Deleted pod: {pm['name']}", COMPONENT)

    def _maybe_ttl(self, job: dict) -> None:
        # pkg/controller/ttlafterfinished/ttlafterfinished_controller.go: a finished Job
        # (Complete or Failed alike) is deleted ttlSecondsAfterFinished after it finished.
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        uid = job["metadata"]["uid"]
        at = self._finished_at.setdefault(uid, self.clock.time())
        if self.clock.time() - at >= ttl:
            try:
                # The TTL-after-finished controller deletes with foreground propagation.
                self.objects.delete(self.registry.by_key("batch/jobs"),
                                    job["metadata"]["namespace"], job["metadata"]["name"],
                                    "Foreground")
            except errors.ApiError:
                pass


def pod_from_template(job: dict, index: str | None) -> dict:
    """The pod the Job controller asks for (its name still a generateName), pure: also the
    pod rehearsal's (tests/rehearsal/jobcontroller.py). pkg/controller/job/job_controller.go
    manageJob, indexed_job_utils.go: an Indexed Job's pod carries its completion index as
    annotation and label (PodIndexLabel, GA), the JOB_COMPLETION_INDEX env var, the hostname
    `<job>-<index>` whatever the template says, and the generateName `<job>-<index>-`."""
    m, tmpl = job["metadata"], deepcopy(job["spec"]["template"])
    tmeta = tmpl.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    spec = tmpl.get("spec") or {}
    prefix = f"{m['name']}-"
    if index is not None:
        prefix = f"{m['name']}-{index}-"
        labels[INDEX_KEY] = index
        annotations[INDEX_KEY] = index
        for c in spec.get("containers") or []:
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in c.get("env") or []):
                c.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {
                    "fieldRef": {"apiVersion": "v1",
                                 "fieldPath": f"metadata.labels['{INDEX_KEY}']"}}})
        spec["hostname"] = f"{m['name']}-{index}"
    meta = {"generateName": prefix, "labels": labels,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": m["name"],
                                 "uid": m.get("uid", ""), "controller": True,
                                 "blockOwnerDeletion": True}]}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _index(pod: dict) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
