"""The JobSet controller (jobset.x-k8s.io/v1alpha2), as far as Kubeflow Trainer uses it.

A model of github.com/kubernetes-sigs/jobset at v0.12.0 (the version Trainer v2.3.0's
go.mod requires). Abbreviations:
  ctl = pkg/controllers/jobset_controller.go  (reconcile, constructJob, createHeadlessSvc...,
                                               calculateReplicatedJobStatuses, jobSetFinished)
  dep = pkg/controllers/depends_on.go         (dependencyReachedStatus)
  sp  = pkg/controllers/success_policy.go     (All of targetReplicatedJobs succeeded)
  fp  = pkg/controllers/failure_policy.go     (no failurePolicy: any failed Job fails it)
  wh  = pkg/webhooks/jobset_webhook.go        (Default: Indexed completion, DNS hostnames,
                                               subdomain = the JobSet's name)
  api = api/jobset/v1alpha2/jobset_types.go   (labels, conditions)

For JobSet S: the headless Service S (subdomain; publishNotReadyAddresses from
spec.network), and per replicated job R and replica i the Indexed Job S-R-i with the
template's pods on subdomain S (the Job controller names them S-R-i-<index>), created once
R's dependsOn is reached. Completed when every Job of the success policy's targets
succeeded, Failed when any Job fails (after failurePolicy.maxRestarts restarts, each deleting
the attempt's Jobs to make them again); once finished, its active Jobs are deleted (ctl).
suspend suspends every Job (their pods go) and resumes them.
"""

from __future__ import annotations

from . import errors, events
from .controller import Loop
from .jobs import finished
from .util import deepcopy, now_rfc3339

KEY = "jobset.x-k8s.io/jobsets"
COMPONENT = "jobset-controller"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
RJOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
# pkg/constants/constants.go
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")


def _true(obj: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def construct_job(js: dict, rjob: dict, index: int) -> dict:
    """ctl constructJob + labelAndAnnotateObject + wh defaults."""
    m = js["metadata"]
    tmpl = deepcopy(rjob["template"])
    name = f"{m['name']}-{rjob['name']}-{index}"
    labels = {**((tmpl.get("metadata") or {}).get("labels") or {}),
              JOBSET_NAME: m["name"], RJOB_NAME: rjob["name"],
              RJOB_REPLICAS: str(int(rjob.get("replicas") or 1)), JOB_INDEX: str(index),
              JOBSET_UID: m["uid"], JOB_KEY: name}
    spec = tmpl.get("spec") or {}
    spec.setdefault("completionMode", "Indexed")  # wh
    pod_tmpl = spec.setdefault("template", {})
    pod_meta = pod_tmpl.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), JOBSET_NAME: m["name"],
                          RJOB_NAME: rjob["name"], JOB_INDEX: str(index), JOB_KEY: name}
    pod_tmpl.setdefault("spec", {})["subdomain"] = (
        (js["spec"].get("network") or {}).get("subdomain") or m["name"])
    if js["spec"].get("suspend"):
        spec["suspend"] = True
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": m["namespace"], "labels": labels,
                         "ownerReferences": [{"apiVersion": js["apiVersion"], "kind": "JobSet",
                                              "name": m["name"], "uid": m["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec}


class JobSetController(Loop):
    name = "jobset"

    def __init__(self, store, registry, objects, tick: float = 0.02):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects
        self._reported: set[tuple[str, str]] = set()

    def _rt(self, key: str):
        return self.registry.by_key(key)

    def _step(self) -> None:
        for js in self.store.items(KEY):
            try:
                self._reconcile(js)
            except errors.ApiError:
                pass

    def _jobs(self, js: dict) -> list[dict]:
        uid = js["metadata"]["uid"]
        return [j for j in self.store.items("batch/jobs", js["metadata"]["namespace"])
                if any(r.get("uid") == uid and r.get("controller")
                       for r in j["metadata"].get("ownerReferences") or [])]

    def _reconcile(self, js: dict) -> None:
        m = js["metadata"]
        ns, name = m["namespace"], m["name"]
        if m.get("deletionTimestamp"):
            return
        jobs = self._jobs(js)
        if _true(js, "Completed") or _true(js, "Failed"):  # ctl jobSetFinished
            for j in jobs:
                if not finished(j) and not j["metadata"].get("deletionTimestamp"):
                    self.objects.delete(self._rt("batch/jobs"), ns, j["metadata"]["name"],
                                        "Background")
            return
        self._service(js)
        statuses = self._statuses(js, jobs)
        status = deepcopy(js.get("status") or {})
        old = deepcopy(status)
        status["replicatedJobsStatus"] = statuses
        by_name = {s["name"]: s for s in statuses}
        replicas = {r["name"]: int(r.get("replicas") or 1) for r in js["spec"]["replicatedJobs"]}
        live = [j for j in jobs if not j["metadata"].get("deletionTimestamp")]
        failed = [j for j in live if finished(j) == "Failed"]
        max_restarts = int((js["spec"].get("failurePolicy") or {}).get("maxRestarts") or 0)
        if failed and int(status.get("restarts") or 0) < max_restarts:
            # fp RestartJobSet: this attempt's Jobs go, the next reconcile makes them again
            for j in live:
                self.objects.delete(self._rt("batch/jobs"), ns, j["metadata"]["name"],
                                    "Background")
            status["restarts"] = int(status.get("restarts") or 0) + 1
        elif failed:  # fp: no failure policy, or its restarts spent
            self._condition(status, "Failed", *(REACHED_MAX if max_restarts else FAILED))
            status["terminalState"] = "Failed"
        elif self._succeeded(js, by_name, replicas):
            self._condition(status, "Completed", *COMPLETED)
            status["terminalState"] = "Completed"
        else:
            suspend = bool(js["spec"].get("suspend"))
            existing = {j["metadata"]["name"] for j in jobs}
            for rjob in js["spec"]["replicatedJobs"]:
                if not suspend and not self._dependency_reached(rjob, replicas, by_name):
                    break  # dep: later replicated jobs wait for this one
                for i in range(replicas[rjob["name"]]):
                    if f"{name}-{rjob['name']}-{i}" not in existing:
                        try:
                            self.objects.create(self._rt("batch/jobs"),
                                                construct_job(js, rjob, i), ns)
                        except errors.ApiError as e:  # ctl createJobs: an event, requeued
                            if (m["uid"], e.message) not in self._reported:  # aggregated
                                self._reported.add((m["uid"], e.message))
                                events.record(self.store, js, "Warning", "JobCreationFailed",
                                              e.message, COMPONENT)
                            raise
            for j in jobs:  # ctl suspendJobs / resumeJobsIfNecessary
                if bool(j["spec"].get("suspend")) != suspend and not finished(j):
                    self.store.mutate("batch/jobs", ns, j["metadata"]["name"],
                                      lambda o, s=suspend: o["spec"].__setitem__("suspend", s))
            if suspend:
                self._condition(status, "Suspended", "SuspendedJobs", "jobset is suspended")
            elif any(c.get("type") == "Suspended" and c.get("status") == "True"
                     for c in status.get("conditions") or []):
                self._condition(status, "Suspended", "ResumeJobs", "jobset is resumed", "False")
        if status != old:
            self.store.mutate(KEY, ns, name, lambda o: o.__setitem__("status", status))

    @staticmethod
    def _dependency_reached(rjob: dict, replicas: dict, statuses: dict) -> bool:
        for dep in rjob.get("dependsOn") or []:
            s = statuses.get(dep["name"]) or {}
            if dep.get("status") == "Complete" and s.get("succeeded", 0) != replicas[dep["name"]]:
                return False
            if dep.get("status") == "Ready" and replicas[dep["name"]] != (
                    s.get("failed", 0) + s.get("ready", 0) + s.get("succeeded", 0)):
                return False
        return True

    @staticmethod
    def _succeeded(js: dict, statuses: dict, replicas: dict) -> bool:
        """sp: operator All over the target replicated jobs (all of them when unnamed)."""
        policy = js["spec"].get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or list(replicas)
        done = [statuses.get(t, {}).get("succeeded", 0) == replicas[t] for t in targets]
        return any(done) if policy.get("operator") == "Any" else all(done)

    @staticmethod
    def _statuses(js: dict, jobs: list[dict]) -> list[dict]:
        """ctl calculateReplicatedJobStatuses."""
        out = {r["name"]: {"name": r["name"], "ready": 0, "succeeded": 0, "failed": 0,
                           "active": 0, "suspended": 0} for r in js["spec"]["replicatedJobs"]}
        for j in jobs:
            s = out.get((j["metadata"].get("labels") or {}).get(RJOB_NAME))
            if s is None:
                continue
            st, spec = j.get("status") or {}, j["spec"]
            done = finished(j)
            if done == "Complete":
                s["succeeded"] += 1
            elif done == "Failed":
                s["failed"] += 1
            else:
                pods = min(int(spec.get("parallelism") or 1),
                           int(spec.get("completions") or spec.get("parallelism") or 1))
                if st.get("succeeded", 0) + st.get("ready", 0) >= pods:
                    s["ready"] += 1
                if st.get("active", 0) > 0:
                    s["active"] += 1
                if spec.get("suspend"):
                    s["suspended"] += 1
        return list(out.values())

    @staticmethod
    def _condition(status: dict, ctype: str, reason: str, message: str,
                   value: str = "True") -> None:
        conds = status.setdefault("conditions", [])
        for c in conds:
            if c["type"] == ctype:
                if (c["status"], c.get("reason")) != (value, reason):
                    c.update(status=value, reason=reason, message=message,
                             lastTransitionTime=now_rfc3339())
                return
        conds.append({"type": ctype, "status": value, "reason": reason, "message": message,
                      "lastTransitionTime": now_rfc3339()})

    def _service(self, js: dict) -> None:
        """ctl createHeadlessSvcIfNecessary: named after the subdomain."""
        m = js["metadata"]
        net = js["spec"].get("network") or {}
        sub = net.get("subdomain") or m["name"]
        if self.store.get("/services", m["namespace"], sub) is not None:
            return
        self.objects.create(self._rt("/services"), {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": sub, "namespace": m["namespace"],
                         "ownerReferences": [{"apiVersion": js["apiVersion"], "kind": "JobSet",
                                              "name": m["name"], "uid": m["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: m["name"]},
                     "publishNotReadyAddresses": bool(net.get("publishNotReadyAddresses", True))}},
            m["namespace"])
