"""Kueue as hvdk8s meets it: its configuration, its MPIJob integration, quota admission.

A model of github.com/kubernetes-sigs/kueue v0.14.0 (abbreviations below):
  cfg  = config/components/manager/controller_manager_config.yaml (default integrations)
  dflt = pkg/controller/jobframework/defaults.go (ApplyDefaultForSuspend: the job webhook
         suspends a job that names a queue)
  name = pkg/controller/jobframework/workload_names.go (GetWorkloadNameForOwnerWithGVK)
  fa   = pkg/scheduler/flavorassigner/flavorassigner.go (messages of a Workload that does
         not fit: "couldn't assign flavors to pod set ...", "insufficient quota for ...")
  wl   = apis/kueue/v1beta1/workload_types.go (podSets: at most 8)
  pod  = pkg/util/pod/pod.go (GenerateRoleHash/SpecShape: pods whose specs differ in
         containers' resources, nodeSelector, affinity, tolerations... are different roles)

Only what hvdk8s relies on is modelled: one flavor per resource, no cohorts, borrowing or
preemption. The `pod` integration is a switch (off in v0.14's default configuration, on
from v0.16, kueue commit 42eb7ddf): `pod_sets()` shows how a plain-pod group would split.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

import yaml

from . import errors
from .controller import Loop
from .podutil import pod_requests
from .quantity import fmt, parse_quantity
from .util import deepcopy, set_condition

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MPIJOB_KEY, WORKLOAD_KEY = "kubeflow.org/mpijobs", "kueue.x-k8s.io/workloads"
# The TrainJob integration (pkg/controller/jobs/trainjob): suspend is spec.suspend, the
# pod sets are Trainer's runtime info's (the runtime's jobs, their counts and resources).
TRAINJOB_KEY, TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjobs", "trainer.kubeflow.org/trainjob"
_INTEGRATIONS = {MPIJOB_KEY: "kubeflow.org/mpijob", TRAINJOB_KEY: TRAINJOB_FRAMEWORK}
LQ_KEY, CQ_KEY = "kueue.x-k8s.io/localqueues", "kueue.x-k8s.io/clusterqueues"
MAX_POD_SETS = 8  # wl: +kubebuilder:validation:MaxItems=8
# cfg at v0.14.0: "pod" (and deployment/statefulset/LWS, which need it) commented out.
DEFAULT_FRAMEWORKS_V0_14 = ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob",
                            "ray.io/raycluster", "jobset.x-k8s.io/jobset",
                            "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
                            "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
                            "kubeflow.org/jaxjob", "workload.codeflare.dev/appwrapper",
                            "trainer.kubeflow.org/trainjob")
NAMESPACE, CONFIG_MAP, CONFIG_KEY = ("kueue-system", "kueue-manager-config",
                                     "controller_manager_config.yaml")


def manager_config(frameworks) -> dict:
    """The kueue-manager-config ConfigMap the release manifests install."""
    text = yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta1",
                           "kind": "Configuration",
                           "integrations": {"frameworks": list(frameworks)}}, sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
            "data": {CONFIG_KEY: text}}


def workload_name(owner: dict, kind: str = "MPIJob", group: str = "kubeflow.org") -> str:
    """name: lower(kind)-name-<first 5 hex of sha1(kind, group, name, uid)>."""
    m = owner["metadata"]
    digest = hashlib.sha1("\n".join((kind, group, m["name"], m["uid"])).encode()).hexdigest()
    return f"{kind.lower()}-{m['name']}"[:247] + "-" + digest[:5]


def role_hash(pod: dict) -> str:
    """pod GenerateRoleHash: the admission-relevant shape of a pod spec."""
    spec = pod.get("spec") or {}
    shape = {k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations",
                                       "runtimeClassName", "priority",
                                       "topologySpreadConstraints", "overhead",
                                       "resourceClaims")}
    shape["containers"] = [{"resources": c.get("resources"), "ports": c.get("ports")}
                           for c in spec.get("containers") or []]
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def pod_sets(pods: list[dict]) -> list[dict]:
    """How the pod integration turns a pod group into PodSets: one per distinct role."""
    out: dict[str, dict] = {}
    for p in pods:
        ps = out.setdefault(role_hash(p), {"name": role_hash(p), "count": 0,
                                           "template": {"spec": p.get("spec")}})
        ps["count"] += 1
    return list(out.values())


def _template_requests(template: dict) -> dict[str, Decimal]:
    return pod_requests({"spec": (template or {}).get("spec") or {}})


class Kueue(Loop):
    """Kueue's controller manager for MPIJobs: webhook, Workloads, quota admission."""

    name = "kueue"

    def __init__(self, store, registry, objects, tick: float = 0.02,
                 frameworks=DEFAULT_FRAMEWORKS_V0_14):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects
        self.frameworks = set(frameworks)

    # -- webhook (dflt) ----------------------------------------------------------------------------
    def webhook(self, rt, obj: dict, store) -> None:
        """A new MPIJob (TrainJob) naming a queue is created suspended (when the integration
        is on)."""
        if _INTEGRATIONS.get(rt.key) not in self.frameworks:
            return
        if (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            if rt.key == TRAINJOB_KEY:
                obj.setdefault("spec", {})["suspend"] = True
            else:
                obj.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = True

    # -- controller ------------------------------------------------------------------------------
    def _step(self) -> None:
        for key, framework in _INTEGRATIONS.items():
            if framework not in self.frameworks:
                continue
            for job in self.store.items(key):
                queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
                if not queue or job["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    self._reconcile(job, queue)
                except errors.ApiError:
                    pass  # retried next tick

    def _reconcile(self, job: dict, queue: str) -> None:
        ns = job["metadata"]["namespace"]
        trainjob = job.get("kind") == "TrainJob"
        name = (workload_name(job, "TrainJob", "trainer.kubeflow.org") if trainjob
                else workload_name(job))
        wl = self.store.get(WORKLOAD_KEY, ns, name)
        if wl is None:
            wl = self.objects.create(self.registry.by_key(WORKLOAD_KEY),
                                     self._new_workload(job, name, queue), ns)
        if _finished(job):
            self._set(wl, "Finished", "True", "Succeeded" if _cond(job, "Succeeded")
                      or _cond(job, "Complete") else "Failed", "Job finished")
            return
        if trainjob and (wl.get("status") or {}).get("admission"):
            if job["spec"].get("suspend"):
                self.store.mutate(TRAINJOB_KEY, ns, job["metadata"]["name"],
                                  lambda j: j["spec"].__setitem__("suspend", False))
            return
        if (wl.get("status") or {}).get("admission"):
            if job["spec"].get("runPolicy", {}).get("suspend"):
                # Admitted: the job integration starts the job (unsuspend).
                self.store.mutate(MPIJOB_KEY, ns, job["metadata"]["name"],
                                  lambda j: j["spec"]["runPolicy"].__setitem__("suspend", False))
            return
        self._admit(wl)

    def _trainjob_pod_sets(self, job: dict) -> list[dict]:
        from .trainer import CLUSTER_RUNTIME_KEY, runtime_info

        ref = (job["spec"].get("runtimeRef") or {}).get("name") or ""
        runtime = self.store.get(CLUSTER_RUNTIME_KEY, "", ref)
        if runtime is None:
            raise errors.ApiError(404, "NotFound", f"runtime {ref} not found")
        info = runtime_info(job, runtime)
        return [{"name": r["name"], "count": info["counts"][r["name"]],
                 "template": deepcopy(r["template"]["spec"]["template"])}
                for r in info["template"].get("replicatedJobs") or []]

    def _new_workload(self, job: dict, name: str, queue: str) -> dict:
        replicas = job["spec"].get("mpiReplicaSpecs") or {}
        sets = self._trainjob_pod_sets(job) if job.get("kind") == "TrainJob" else []
        for rtype in ("Launcher", "Worker"):  # MPIJob integration: one PodSet per replica type
            rs = replicas.get(rtype)
            if rs is not None:
                sets.append({"name": rtype.lower(), "count": int(rs.get("replicas") or 1),
                             "template": deepcopy(rs.get("template") or {})})
        m = job["metadata"]
        return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": name, "namespace": m["namespace"],
                             "labels": {"kueue.x-k8s.io/job-uid": m["uid"]},
                             "ownerReferences": [{"apiVersion": job["apiVersion"],
                                                  "kind": job.get("kind") or "MPIJob",
                                                  "name": m["name"],
                                                  "uid": m["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": {"queueName": queue, "podSets": sets}}

    def _admit(self, wl: dict) -> None:
        ns = wl["metadata"]["namespace"]
        queue = wl["spec"]["queueName"]
        lq = self.store.get(LQ_KEY, ns, queue)
        if lq is None:
            self._set(wl, "QuotaReserved", "False", "Inadmissible",
                      f"LocalQueue {queue} doesn't exist")
            return
        cq_name = (lq.get("spec") or {}).get("clusterQueue")
        cq = self.store.get(CQ_KEY, "", cq_name)
        if cq is None:
            self._set(wl, "QuotaReserved", "False", "Inadmissible",
                      f"ClusterQueue {cq_name} doesn't exist")
            return
        quota = _quota(cq)  # resource -> (flavor, nominal)
        used = self._usage(cq_name)
        problems, assignments = [], []
        for ps in wl["spec"]["podSets"]:
            per_pod = _template_requests(ps.get("template"))
            need = {r: v * ps["count"] for r, v in per_pod.items() if v > 0}
            msgs, flavors = [], {}
            for res, amount in sorted(need.items()):
                if res not in quota:
                    msgs.append(f"resource {res} unavailable in ClusterQueue")
                    continue
                flavor, nominal = quota[res]
                flavors[res] = flavor
                if amount > nominal:
                    msgs.append(f"insufficient quota for {res} in flavor {flavor}, request > "
                                f"maximum capacity ({fmt(amount)} > {fmt(nominal)})")
                elif amount > nominal - used.get(res, Decimal(0)):
                    msgs.append(f"insufficient unused quota for {res} in flavor {flavor}, "
                                f"{fmt(amount - (nominal - used.get(res, Decimal(0))))} more "
                                "needed")
                used[res] = used.get(res, Decimal(0)) + amount
            if msgs:
                problems.append(f"couldn't assign flavors to pod set {ps['name']}: "
                                + ", ".join(msgs))
            assignments.append({"name": ps["name"], "count": ps["count"], "flavors": flavors,
                                "resourceUsage": {r: fmt(v) for r, v in need.items()}})
        if problems:
            self._set(wl, "QuotaReserved", "False", "Pending", "; ".join(problems))
            return

        def admit(w):
            status = w.setdefault("status", {})
            status["admission"] = {"clusterQueue": cq_name, "podSetAssignments": assignments}
            set_condition(status, "QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq_name}")
            set_condition(status, "Admitted", "True", "Admitted", "The workload is admitted")
        self.store.mutate(WORKLOAD_KEY, ns, wl["metadata"]["name"], admit)

    def _usage(self, cq_name: str) -> dict[str, Decimal]:
        used: dict[str, Decimal] = {}
        for wl in self.store.items(WORKLOAD_KEY):
            adm = (wl.get("status") or {}).get("admission")
            if not adm or adm.get("clusterQueue") != cq_name or _cond(wl, "Finished"):
                continue
            for psa in adm.get("podSetAssignments") or []:
                for r, v in (psa.get("resourceUsage") or {}).items():
                    used[r] = used.get(r, Decimal(0)) + parse_quantity(v)
        return used

    def _set(self, wl: dict, ctype: str, value: str, reason: str, message: str) -> None:
        self.store.mutate(WORKLOAD_KEY, wl["metadata"]["namespace"], wl["metadata"]["name"],
                          lambda w: set_condition(w.setdefault("status", {}), ctype, value, reason,
                                              message))


def _quota(cq: dict) -> dict[str, tuple[str, Decimal]]:
    out = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                out.setdefault(r["name"], (flavor["name"], parse_quantity(r["nominalQuota"])))
    return out


def _cond(obj: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _finished(job: dict) -> bool:
    return _cond(job, "Succeeded") or _cond(job, "Failed") or _cond(job, "Complete")


def cluster_queue(name: str, quota: dict, flavor: str = "default-flavor") -> list[dict]:
    """A ResourceFlavor and a ClusterQueue with one flavor covering `quota`'s resources."""
    return [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
             "metadata": {"name": flavor}},
            {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
             "metadata": {"name": name},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": sorted(quota),
                 "flavors": [{"name": flavor, "resources": [
                     {"name": r, "nominalQuota": str(q)} for r, q in sorted(quota.items())]}]}]}}]


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}
