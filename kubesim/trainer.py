"""Kubeflow Trainer's TrainJob controller with its MPI runtime, as a control loop.

A model of github.com/kubeflow/trainer at v2.3.0 (commit 658725bd), as docs/trainer.md
pins it. Abbreviations below:
  ctl  = pkg/controller/trainjob_controller.go            (Reconcile, conditions)
  core = pkg/runtime/core/trainingruntime.go              (runtime lookup, newRuntimeInfo,
                                                           mergeRuntimePatches, ValidateObjects)
  js   = pkg/runtime/framework/plugins/jobset/jobset.go   (Build, Validate, Status,
                                                           IdentifyPodNetwork, SyncParallelCount)
  jsb  = pkg/runtime/framework/plugins/jobset/builder.go  (Trainer: image, command, env)
  mpi  = pkg/runtime/framework/plugins/mpi/mpi.go         (EnforceMLPolicy, Build: SSH Secret,
                                                           hostfile ConfigMap, Validate)
  cst  = pkg/constants/constants.go                       (names, mounts, env)

What it makes for TrainJob T (not managed by another controller, its runtime found):
the Secret T-mpi-ssh-auth (kubernetes.io/ssh-auth, ECDSA P-521, immutable), the ConfigMap
T-mpi-hostfile (one `T-<job>-0-<i>.T slots=N` line per node endpoint, the launcher first
with runLauncherAsNode), and the JobSet T from the runtime's template with the TrainJob's
runtime patches merged and its trainer applied; the JobSet follows T's suspend. T's
conditions: Suspended (ctl setSuspendedCondition), Complete / Failed copied from the
JobSet's Completed / Failed (js Status), Failed with DeadlineExceeded (ctl).

With the TrainJobStatus feature gate on (trainer_status.py): the trainer pods' endpoint,
CA and token, the ConfigMap T-tls-config, and the status server writing
status.trainerStatus.

Not modelled: the runtime snapshot (core createRuntimeSnapshot), initializers, the Torch,
JAX, XGBoost and Flux plugins, podGroupPolicy.
"""

from __future__ import annotations

import base64

from . import errors, events, trainer_status
from .controller import Loop
from .mpi_operator import ssh_key_pair
from .util import deepcopy, set_condition

GROUP = "trainer.kubeflow.org"
TRAINJOB_KEY = f"{GROUP}/trainjobs"
CLUSTER_RUNTIME_KEY = f"{GROUP}/clustertrainingruntimes"
RUNTIME_KEY = f"{GROUP}/trainingruntimes"
JOBSET_KEY = "jobset.x-k8s.io/jobsets"
COMPONENT = "trainjob-controller"
# cst
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE, LAUNCHER = "node", "launcher"
SSH_SUFFIX, HOSTFILE_SUFFIX = "-mpi-ssh-auth", "-mpi-hostfile"
SSH_VOLUME, HOSTFILE_VOLUME = "mpi-ssh-auth", "mpi-hostfile"
HOSTFILE_DIR, HOSTFILE = "/etc/mpi", "hostfile"
OMPI_ENV = (("OMPI_MCA_orte_default_hostfile", f"{HOSTFILE_DIR}/{HOSTFILE}"),
            ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"))
RSH_ARGS = ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10")
RESERVED_ENV = {"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args",
                "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"}
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"


# --- pure: what the controller builds ----------------------------------------------------------
def strategic_merge(base, patch, key: str = ""):
    """Kubernetes strategic merge as far as a runtime patch reaches (core
    mergeRuntimePatches): maps merge, lists of named items (replicatedJobs, containers,
    volumes, env, volumeMounts) merge by name, other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = strategic_merge(base.get(k), v, k) if k in base else deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list)
            and all(isinstance(x, dict) and "name" in x for x in base + patch)
            and key not in ("tolerations",)):
        out = [deepcopy(x) for x in base]
        index = {x["name"]: i for i, x in enumerate(out)}
        for item in patch:
            if item["name"] in index:
                out[index[item["name"]]] = strategic_merge(out[index[item["name"]]], item)
            else:
                out.append(deepcopy(item))
        return out
    return deepcopy(patch)


def _upsert(items: list[dict], new: list[dict]) -> list[dict]:
    """apply.Upsert*: replace the item of the same name, else append."""
    out = list(items)
    for item in new:
        names = [x.get("name") for x in out]
        if item["name"] in names:
            out[names.index(item["name"])] = item
        else:
            out.append(item)
    return out


def _env(pairs) -> list[dict]:
    return [{"name": k, "value": v} for k, v in pairs]


def runtime_info(trainjob: dict, runtime: dict) -> dict:
    """core newRuntimeInfo + mpi EnforceMLPolicy + js SyncParallelCount: the JobSet spec,
    each replicated job's pod count, and the MPI policy in force."""
    spec = trainjob["spec"]
    trainer = spec.get("trainer") or {}
    rspec = runtime.get("spec") or {}
    ml = deepcopy(rspec.get("mlPolicy") or {})
    mpi = ml.get("mpi")
    template = deepcopy(((rspec.get("template") or {}).get("spec")) or {})
    for patch in spec.get("runtimePatches") or []:
        patch_spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if patch_spec:
            order = [r["name"] for r in template.get("replicatedJobs") or []]
            template = strategic_merge(template, patch_spec)
            template["replicatedJobs"].sort(key=lambda r: order.index(r["name"])
                                            if r["name"] in order else len(order))
    counts: dict[str, int] = {}
    as_node = bool(mpi and mpi.get("runLauncherAsNode"))
    for rjob in template.get("replicatedJobs") or []:
        job_spec = rjob["template"].setdefault("spec", {})
        count = int(job_spec.get("parallelism") or 1)
        ancestor = ((rjob["template"].get("metadata") or {}).get("labels") or {}).get(
            ANCESTOR_LABEL)
        if ancestor == "trainer" and ml:
            count = int(ml.get("numNodes") or 1)
        # core: resourcesPerNode goes to the trainer's `node` container, and to the node
        # job's with runLauncherAsNode (the TODO there: not to MPI's node job otherwise)
        if trainer.get("resourcesPerNode") and (
                (ancestor == "trainer" and ml) or (as_node and rjob["name"] == NODE)):
            for c in job_spec["template"]["spec"].get("containers") or []:
                if c.get("name") == NODE:
                    # pkg/util/trainingruntime MergeResourceRequirements: a strategic
                    # merge, so the runtime's other requests and limits stay
                    c["resources"] = strategic_merge(c.get("resources") or {},
                                                     trainer["resourcesPerNode"])
                    break
        counts[rjob["name"]] = count
    if mpi is not None:
        # mpi EnforceMLPolicy: the node count from the TrainJob; processes per node
        if trainer.get("numNodes") is not None and NODE in counts:
            n = int(trainer["numNodes"])
            counts[NODE] = max(n - 1, 1) if as_node else n
        if trainer.get("numProcPerNode") is not None:
            mpi["numProcPerNode"] = int(trainer["numProcPerNode"])
    for rjob in template.get("replicatedJobs") or []:  # js SyncParallelCount
        rjob["template"]["spec"]["parallelism"] = counts[rjob["name"]]
        rjob["template"]["spec"]["completions"] = counts[rjob["name"]]
    return {"template": template, "counts": counts, "mpi": mpi, "as_node": as_node}


def endpoints(trainjob: dict, info: dict, rjob: dict) -> list[str]:
    """js IdentifyPodNetwork: `<trainjob>-<rjob>-<replica>-<pod>.<subdomain>`."""
    name = trainjob["metadata"]["name"]
    sub = (info["template"].get("network") or {}).get("subdomain") or name
    return [f"{name}-{rjob['name']}-{r}-{p}.{sub}"
            for r in range(int(rjob.get("replicas") or 1))
            for p in range(info["counts"][rjob["name"]])]


def hostfile(trainjob: dict, info: dict) -> str:
    """mpi buildHostFileConfigMap (OpenMPI): node endpoints, the launcher's first when it
    is a node (runtime order)."""
    slots = int((info["mpi"] or {}).get("numProcPerNode") or 1)
    lines = []
    for rjob in info["template"].get("replicatedJobs") or []:
        if rjob["name"] == NODE or (info["as_node"] and rjob["name"] == LAUNCHER):
            lines += [f"{e} slots={slots}\n" for e in endpoints(trainjob, info, rjob)]
    return "".join(lines)


def _owner(trainjob: dict) -> list[dict]:
    m = trainjob["metadata"]
    return [{"apiVersion": trainjob["apiVersion"], "kind": "TrainJob", "name": m["name"],
             "uid": m["uid"], "controller": True, "blockOwnerDeletion": True}]


def ssh_secret(trainjob: dict) -> dict:
    """mpi buildSSHAuthSecret: an ECDSA P-521 key (as the MPI Operator's), immutable."""
    private, public = ssh_key_pair()
    m = trainjob["metadata"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
            "immutable": True,
            "metadata": {"name": m["name"] + SSH_SUFFIX, "namespace": m["namespace"],
                         "ownerReferences": _owner(trainjob)},
            "data": {"ssh-privatekey": base64.b64encode(private.encode()).decode(),
                     "ssh-publickey": base64.b64encode(public.encode()).decode()}}


def hostfile_config_map(trainjob: dict, info: dict) -> dict:
    m = trainjob["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": m["name"] + HOSTFILE_SUFFIX, "namespace": m["namespace"],
                         "ownerReferences": _owner(trainjob)},
            "data": {HOSTFILE: hostfile(trainjob, info)}}


def jobset(trainjob: dict, runtime: dict, info: dict | None = None,
           status_url: str | None = None) -> dict:
    """js Build + jsb Trainer + mpi EnforceMLPolicy's volumes, mounts and env; with
    `status_url` (the TrainJobStatus gate on: its server's address) that plugin's too."""
    info = info or runtime_info(trainjob, runtime)
    m, spec = trainjob["metadata"], trainjob["spec"]
    trainer = spec.get("trainer") or {}
    template = deepcopy(info["template"])
    mpi = info["mpi"]
    for rjob in template.get("replicatedJobs") or []:
        meta = rjob["template"].get("metadata") or {}
        ancestor = (meta.get("labels") or {}).get(ANCESTOR_LABEL)
        pod = rjob["template"]["spec"]["template"].setdefault("spec", {})
        if ancestor == "trainer":
            rjob["replicas"] = 1
        if mpi is not None and rjob["name"] in (NODE, LAUNCHER):
            vols = [{"name": SSH_VOLUME, "secret": {
                "secretName": m["name"] + SSH_SUFFIX, "defaultMode": 0o400, "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                    {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                    {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]}}]
            if rjob["name"] == LAUNCHER:
                vols.append({"name": HOSTFILE_VOLUME, "configMap": {
                    "name": m["name"] + HOSTFILE_SUFFIX,
                    "items": [{"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444}]}})
            pod["volumes"] = _upsert(pod.get("volumes") or [], vols)
        for c in pod.get("containers") or []:
            if c.get("name") != NODE:
                continue
            if mpi is not None and rjob["name"] in (NODE, LAUNCHER):
                c["volumeMounts"] = _upsert(c.get("volumeMounts") or [], [
                    {"name": SSH_VOLUME, "mountPath": mpi.get("sshAuthMountPath") or "/root/.ssh"}])
                if rjob["name"] == LAUNCHER:
                    c["volumeMounts"] = _upsert(c["volumeMounts"], [
                        {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR}])
                    slots = str(int(mpi.get("numProcPerNode") or 1))
                    c["env"] = _upsert(c.get("env") or [], _env(
                        [*OMPI_ENV, ("OMPI_MCA_orte_set_default_slots", slots), RSH_ARGS]))
            if ancestor == "trainer":
                for k in ("image", "command", "args"):
                    if trainer.get(k) is not None:
                        c[k] = deepcopy(trainer[k])
            if ancestor == "trainer" or (info["as_node"] and rjob["name"] == NODE):
                c["env"] = _upsert(c.get("env") or [], deepcopy(trainer.get("env") or []))
    labels, annotations = {}, {}
    for patch in spec.get("runtimePatches") or []:
        pm = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("metadata") or {}
        labels.update(pm.get("labels") or {})
        annotations.update(pm.get("annotations") or {})
    if status_url is not None:
        trainer_status.enforce(template, trainjob, status_url)
    if spec.get("suspend") is not None:
        template["suspend"] = bool(spec["suspend"])
    meta: dict = {"name": m["name"], "namespace": m["namespace"],
                  "ownerReferences": _owner(trainjob)}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": template}


def validate(trainjob: dict, runtime: dict | None) -> list[tuple[str, str]]:
    """The TrainJob webhook: core ValidateObjects (runtime exists), mpi Validate (reserved
    env, numNodes), js Validate (runtime patches: manager, replicated jobs, containers)."""
    spec = trainjob.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    if runtime is None:
        return [("spec.runtimeRef", f"Invalid value: {ref!r}: {kind}.{GROUP} "
                 f"\"{ref.get('name')}\" not found: specified clusterTrainingRuntime must be "
                 "created before the TrainJob is created")]
    out = []
    trainer = spec.get("trainer") or {}
    reserved = sorted({e.get("name") for e in trainer.get("env") or []} & RESERVED_ENV)
    if reserved:
        out.append(("spec.trainer.env", f"Invalid value: must not have reserved envs, invalid "
                    f"envs configured: {reserved}"))
    rjobs = {r["name"]: {c.get("name") for c in (r["template"]["spec"]["template"].get("spec")
                                                  or {}).get("containers") or []}
             for r in ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get(
                 "replicatedJobs") or []}
    for patch in spec.get("runtimePatches") or []:
        if "/" not in (patch.get("manager") or ""):
            out.append(("spec.runtimePatches[].manager", "Invalid value: must be a domain "
                        "prefixed path"))
        tspec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for r in tspec.get("replicatedJobs") or []:
            if r["name"] not in rjobs:
                out.append(("spec.runtimePatches", "Invalid value: must not have replicated "
                            "job that doesn't exist in the runtime job template"))
                continue
            pod = (((r.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                "spec") or {}
            for c in pod.get("containers") or []:
                if c.get("name") not in rjobs[r["name"]]:
                    out.append(("spec.runtimePatches", "Invalid value: must not have container "
                                f"that doesn't exist in the runtime job {r['name']}"))
                elif c.get("env") and c.get("name") == NODE:
                    out.append(("spec.runtimePatches", "Invalid value: must not have envs for "
                                "the dataset-initializer, model-initializer, node containers"))
    return out


# --- the control loop ---------------------------------------------------------------------------
def _cond(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == ctype), None)


def _true(obj: dict, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return bool(c) and c.get("status") == "True"


class Trainer(Loop):
    """The kubeflow-trainer controller manager (TrainJob reconciler, MPI and JobSet plugins)."""

    name = "trainer"

    def __init__(self, store, registry, objects, tick: float = 0.02):
        super().__init__(tick)
        self.store, self.registry, self.objects = store, registry, objects
        # The TrainJobStatus feature gate on: its status server (trainer_status.py).
        self.status_server: trainer_status.StatusServer | None = None

    # -- webhook ---------------------------------------------------------------------------
    def webhook(self, rt, obj: dict, store) -> None:
        if rt.key != TRAINJOB_KEY:
            return
        problems = validate(obj, self.runtime_of(obj))
        if problems:
            raise errors.invalid(GROUP, "TrainJob", obj["metadata"].get("name", ""), problems)

    def runtime_of(self, trainjob: dict) -> dict | None:
        """core NewObjects: the ClusterTrainingRuntime (or the TrainJob's namespace's
        TrainingRuntime) named by runtimeRef."""
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        if (ref.get("kind") or "ClusterTrainingRuntime") == "TrainingRuntime":
            return self.store.get(RUNTIME_KEY, trainjob["metadata"].get("namespace") or "default",
                                  ref.get("name") or "")
        return self.store.get(CLUSTER_RUNTIME_KEY, "", ref.get("name") or "")

    def _step(self) -> None:
        for tj in self.store.items(TRAINJOB_KEY):
            try:
                self._reconcile(tj)
            except errors.ApiError:
                pass  # requeued: the next tick tries again

    def _create(self, key: str, obj: dict) -> dict:
        return self.objects.create(self.registry.by_key(key), obj, obj["metadata"].get("namespace"))

    def _reconcile(self, tj: dict) -> None:
        m = tj["metadata"]
        ns, name = m["namespace"], m["name"]
        manager = (tj.get("spec") or {}).get("managedBy")
        if manager and manager != TRAINER_CONTROLLER:
            return  # ctl IsManagedByExternalController: MultiKueue drives it
        if m.get("deletionTimestamp"):
            return
        runtime = self.runtime_of(tj)
        status = deepcopy(tj.get("status") or {})
        old = deepcopy(status)
        if runtime is None:
            events.record(self.store, tj, "Warning", "TrainJobResourcesCreationFailed",
                          "specified trainingRuntime must be created before the TrainJob is "
                          "created", COMPONENT)
            return
        finished = _true(tj, "Complete") or _true(tj, "Failed")
        js = self.store.get(JOBSET_KEY, ns, name)
        if not finished:
            info = runtime_info(tj, runtime)
            if self.store.get("/secrets", ns, name + SSH_SUFFIX) is None:
                self._create("/secrets", ssh_secret(tj))
            want_cm = hostfile_config_map(tj, info)
            if self.store.get("/configmaps", ns, want_cm["metadata"]["name"]) is None:
                self._create("/configmaps", want_cm)
            server = self.status_server
            if server is not None and self.store.get(
                    "/configmaps", ns, name + trainer_status.TLS_SUFFIX) is None:
                self._create("/configmaps", trainer_status.tls_config_map(tj, server.ca_pem))
            suspend = bool((tj.get("spec") or {}).get("suspend"))
            if js is None:
                js = self._create(JOBSET_KEY, jobset(
                    tj, runtime, info, trainer_status.SERVICE_URL if server is not None else None))
            elif suspend or (js.get("spec") or {}).get("suspend"):
                # js Build: rebuilt only while the TrainJob or the JobSet is suspended
                self.store.mutate(JOBSET_KEY, ns, name,
                                  lambda j: j["spec"].__setitem__("suspend", suspend))
        # ctl setSuspendedCondition
        if (tj.get("spec") or {}).get("suspend"):
            set_condition(status, "Suspended", "True", "Suspended", "TrainJob is suspended")
        elif _true(tj, "Suspended"):
            set_condition(status, "Suspended", "False", "Resumed", "TrainJob is resumed")
        if js is not None:  # js Status
            for src, dst in (("Completed", "Complete"), ("Failed", "Failed")):
                c = _cond(js, src)
                if c and c.get("status") == "True" and not _true(tj, dst):
                    set_condition(status, dst, "True", c.get("reason") or src, c.get("message") or "")
            status["jobsStatus"] = [
                {k: s.get(k, 0) if k != "name" else s["name"]
                 for k in ("name", "ready", "succeeded", "failed", "active", "suspended")}
                for s in (js.get("status") or {}).get("replicatedJobsStatus") or []]
        if status != old:
            def write(obj):
                # the fields this loop sets: trainerStatus is the status server's
                obj.setdefault("status", {}).update(status)
            self.store.mutate(TRAINJOB_KEY, ns, name, write)


def trainjob_schema() -> dict:
    """The TrainJob CRD's v1alpha1 schema at v2.3.0 (manifests/base/crds/
    trainer.kubeflow.org_trainjobs.yaml) down to the fields hvdk8s sets; below them (pod
    templates, env, resources) unknown fields are preserved, as mpijob_crd.py does: the
    whole schema is vendored in tests/data/trainer for the renderer's own tests."""
    keep = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    strings = {"type": "array", "items": {"type": "string"}}
    return {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["runtimeRef"], "properties": {
            "activeDeadlineSeconds": {"type": "integer", "format": "int64"},
            "initializer": keep,
            "managedBy": {"type": "string"},
            "runtimePatches": {"type": "array", "maxItems": 16, "items": {
                "type": "object", "required": ["manager"], "properties": {
                    "manager": {"type": "string"}, "time": {"type": "string"},
                    "trainingRuntimeSpec": keep}}},
            "runtimeRef": {"type": "object", "required": ["name"], "properties": {
                "apiGroup": {"type": "string"}, "kind": {"type": "string"},
                "name": {"type": "string"}}},
            "suspend": {"type": "boolean"},
            "trainer": {"type": "object", "properties": {
                "args": strings, "command": strings,
                "env": {"type": "array", "items": keep}, "image": {"type": "string"},
                "numNodes": {"type": "integer", "format": "int32"},
                "numProcPerNode": {"type": "integer", "format": "int32"},
                "resourcesPerNode": keep}}}},
        "status": keep}}


def completed_objects(trainjob: dict, runtime: dict) -> dict[str, list[dict]]:
    """Pure: what Trainer, JobSet and the Job controller make of a TrainJob, with no API
    server, so that a test can run its pods for real: the Secret and ConfigMap (mpi), the
    headless Service (jobset.py) and, per replicated job in runtime order, its pods as the
    Job controller stamps an Indexed Job's (`<job>-<i>-<5 chars>`, hostname `<job>-<i>` on
    the JobSet's subdomain; pkg/controller/job/indexed_job_utils.go)."""
    import secrets

    from .jobset import construct_job

    tj = deepcopy(trainjob)
    tj["metadata"].setdefault("namespace", "default")
    tj["metadata"].setdefault("uid", "trainjob-uid")
    info = runtime_info(tj, runtime)
    js = jobset(tj, runtime, info)
    js["metadata"]["uid"] = "jobset-uid"
    sub = (js["spec"].get("network") or {}).get("subdomain") or js["metadata"]["name"]
    out: dict[str, list[dict]] = {
        "Secret": [ssh_secret(tj)], "ConfigMap": [hostfile_config_map(tj, info)],
        "Service": [{"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": sub, "namespace": js["metadata"]["namespace"]},
                     "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                              "selector": {"jobset.sigs.k8s.io/jobset-name":
                                           js["metadata"]["name"]}}}]}
    for rjob in js["spec"]["replicatedJobs"]:
        pods = out.setdefault(rjob["name"], [])
        for r in range(int(rjob.get("replicas") or 1)):
            job = construct_job(js, rjob, r)
            for i in range(int(job["spec"].get("completions") or 1)):
                tmpl = deepcopy(job["spec"]["template"])
                meta = tmpl.get("metadata") or {}
                meta["labels"] = {**(meta.get("labels") or {}),
                                  "batch.kubernetes.io/job-completion-index": str(i)}
                meta["name"] = f"{job['metadata']['name']}-{i}-{secrets.token_hex(3)[:5]}"
                meta["namespace"] = js["metadata"]["namespace"]
                tmpl["spec"]["hostname"] = f"{job['metadata']['name']}-{i}"
                pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                             "spec": tmpl["spec"]})
    return out
