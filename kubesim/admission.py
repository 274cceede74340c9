"""Defaulting, validation and admission, per kind, mirroring kube-apiserver behaviour.

Only rules a launcher can plausibly trip over are modelled: name/label syntax,
pod resource rules (GPU limits), job restartPolicy and template immutability,
pod spec immutability, service names, service-account existence.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading

from . import errors
from .admission_policy import ValidatingAdmissionPolicies
from .podsecurity import PodSecurity
from .podutil import overcommit_allowed, qos_class
from .quantity import canonical, is_quantity, parse_quantity
from .quota import admit_quota, apply_limit_ranges, default_limit_range
from .selectors import LabelSelector
from .util import deepcopy, now_rfc3339
from .validation import check_annotations, check_labels, check_name, q

_NAME_RULE = {"/namespaces": "label", "/services": "dns1035"}
_PATH_SEGMENT_NAMES = ("rbac.authorization.k8s.io",)  # RBAC names only forbid '/', '%'

_POD_MUTABLE_MSG = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)")


class Admission:
    def __init__(self, store, registry):
        self.store = store
        self.registry = registry
        self._cluster_ips = itertools.count(10)
        # Admission webhooks of installed components: fn(rt, obj, store) mutates obj or
        # raises an ApiError, on create only (each component's module cites its webhook).
        self.webhooks: list = []
        # Pod Security Admission (podsecurity.py): its defaults are the cluster's
        # PodSecurityConfiguration; KubeAPIServer(pod_security=...) sets them.
        self.pod_security = PodSecurity()
        self._local = threading.local()  # warnings of the request this thread serves
        # ValidatingAdmissionPolicy (admission_policy.py), run by lifecycle.py on each write
        self.policies = ValidatingAdmissionPolicies(store, registry)
        self.policies.warn = self.add_warnings

    def take_warnings(self) -> list[str]:
        """Warnings admission gave the current request (the `Warning: 299` headers)."""
        out = getattr(self._local, "warnings", [])
        self._local.warnings = []
        return out

    def add_warnings(self, texts: list[str]) -> None:
        self._local.warnings = [*getattr(self._local, "warnings", []), *texts]

    # -- create ---------------------------------------------------------------------------------
    def default(self, rt, obj: dict) -> None:
        """Defaulting + mutating admission for a new object (uid is already set)."""
        key = rt.key
        if key == "/pods":
            spec = obj.setdefault("spec", {})
            default_pod_spec(spec)
            sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
            spec["serviceAccountName"] = spec["serviceAccount"] = sa
            spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            _default_tolerations(spec)
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
        elif key == "batch/jobs":
            _default_job(obj)
        elif key == "/services":
            self._default_service(obj)
        elif key == "/namespaces":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = \
                obj["metadata"]["name"]
        elif key == "/secrets":
            _default_secret(obj)
        elif key == "apiextensions.k8s.io/customresourcedefinitions":
            _default_crd(obj)
        elif key == "/limitranges":
            default_limit_range(obj)
        if rt.custom or key in ("batch/jobs", "/pods"):
            obj["metadata"]["generation"] = 1

    def admit(self, rt, obj: dict) -> None:
        """Admission checks that need cluster state (caller holds the store lock)."""
        self._local.warnings = []
        for hook in list(self.webhooks):
            hook(rt, obj, self.store)
        # kube-apiserver's plugin order: mutating LimitRanger, then validating
        # PodSecurity, then ResourceQuota last (pkg/kubeapiserver/options/plugins.go).
        apply_limit_ranges(rt, obj, self.store)
        if rt.key == "/pods":  # PrepareForCreate runs after mutating admission
            obj["status"]["qosClass"] = qos_class(obj)
        self._local.warnings = self.pod_security.admit(rt, obj, self.store)
        admit_quota(rt, obj, self.store)
        if rt.key == "/pods":
            ns, sa = obj["metadata"]["namespace"], obj["spec"]["serviceAccountName"]
            if self.store.get("/serviceaccounts", ns, sa) is None:
                raise errors.forbidden("", "pods", obj["metadata"].get("name"),
                                       f"error looking up service account {ns}/{sa}: "
                                       f'serviceaccount "{sa}" not found')

    def _default_service(self, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec.get("clusterIP") != "None":
            n = next(self._cluster_ips)
            spec.setdefault("clusterIP", f"10.96.{n // 250}.{n % 250 + 1}")
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        obj["status"] = {"loadBalancer": {}}

    # -- update ---------------------------------------------------------------------------------
    def prepare_update(self, rt, old: dict, new: dict, subresource: str | None) -> dict:
        """Carry system fields over, apply status-subresource rules and immutability checks."""
        om, nm = old["metadata"], new.setdefault("metadata", {})
        for k in ("uid", "creationTimestamp", "namespace", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
            if k in om:
                nm[k] = om[k]
            else:
                nm.pop(k, None)
        new["kind"], new["apiVersion"] = old["kind"], old["apiVersion"]
        if subresource == "status":
            result = deepcopy(old)
            result["status"] = new.get("status")
            result["metadata"]["resourceVersion"] = nm.get("resourceVersion")
            return result
        if rt.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        key = rt.key
        if key == "/pods":
            default_pod_spec(new.setdefault("spec", {}))
            _check_pod_update(old, new)
        elif key == "batch/jobs":
            _check_job_update(old, new)
        elif key == "/services":
            spec, ospec = new.setdefault("spec", {}), old.get("spec", {})
            for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "type",
                      "sessionAffinity", "internalTrafficPolicy"):
                if k in ospec:
                    spec.setdefault(k, ospec[k])
            if spec.get("clusterIP") != ospec.get("clusterIP"):
                raise errors.invalid("", "Service", nm.get("name"), [(
                    "spec.clusterIPs[0]",
                    f"Invalid value: {q(spec.get('clusterIP'))}: may not change once set")])
        elif key == "/secrets":
            _default_secret(new)
        elif key == "/namespaces":
            new.setdefault("spec", old.get("spec", {}))
        if om.get("deletionTimestamp"):
            added = [f for f in nm.get("finalizers") or [] if f not in (om.get("finalizers") or [])]
            if added:
                raise errors.invalid(rt.group, rt.kind, nm.get("name"), [(
                    "metadata.finalizers", "Forbidden: no new finalizers can be added if the "
                    f"object is being deleted, found new finalizers []string{{{json.dumps(added)[1:-1]}}}")])
        if "generation" in om and _spec_changed(rt, old, new):
            nm["generation"] = om["generation"] + 1
        return new

    # -- validation -------------------------------------------------------------------------------
    def validate(self, rt, obj: dict) -> None:
        m = obj["metadata"]
        name = m.get("name") or ""
        causes: list[tuple[str, str]] = []
        rule = _NAME_RULE.get(rt.key, "subdomain")
        if rt.group in _PATH_SEGMENT_NAMES:
            bad = [c for c in ("/", "%") if c in name] or name in (".", "..")
            if bad:
                causes.append(("metadata.name", f"Invalid value: {q(name)}: may not contain '/'"))
        else:
            causes += [("metadata.name", f"Invalid value: {q(name)}: {e}")
                       for e in check_name(name, rule)]
        causes += check_labels(m.get("labels"), "metadata.labels")
        causes += check_annotations(m.get("annotations"), "metadata.annotations")
        refs = m.get("ownerReferences") or []
        for i, r in enumerate(refs):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not r.get(f):
                    causes.append((f"metadata.ownerReferences[{i}].{f}", "Required value"))
        if sum(1 for r in refs if r.get("controller")) > 1:
            causes.append(("metadata.ownerReferences", "Invalid value: []v1.OwnerReference: "
                           "Only one reference can have Controller set to true"))
        key = rt.key
        if key == "/pods":
            causes += _validate_pod_spec(obj.get("spec") or {}, "spec")
        elif key == "batch/jobs":
            causes += _validate_job(obj)
        elif key == "/events":
            if not obj.get("involvedObject"):
                causes.append(("involvedObject", "Required value"))
        elif key == "rbac.authorization.k8s.io/rolebindings" or \
                key == "rbac.authorization.k8s.io/clusterrolebindings":
            if not (obj.get("roleRef") or {}).get("name"):
                causes.append(("roleRef.name", "Required value"))
        elif key == "/configmaps":
            size = sum(len(k) + len(v or "") for k, v in (obj.get("data") or {}).items())
            if size > 1024 * 1024:
                causes.append(("", "Too long: must have at most 1048576 bytes"))
        if causes:
            raise errors.invalid(rt.group, rt.kind, name, causes)


def default_pod_spec(spec: dict) -> None:
    """SetDefaults_PodSpec: applied to pods and to pod templates inside jobs."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if not isinstance(c, dict):
            continue
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        image = c.get("image") or ""
        tagless = ":" not in image.rsplit("/", 1)[-1]
        latest = "@" not in image and (tagless or image.endswith(":latest"))
        c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        res = c.setdefault("resources", {})
        for part in ("limits", "requests"):
            if part in res and res[part] is not None:
                res[part] = {k: canonical(v) for k, v in res[part].items()}
        # Requests default to limits for every resource that only has a limit.
        if res.get("limits"):
            res["requests"] = {**res["limits"], **(res.get("requests") or {})}
        for p in c.get("ports") or []:
            p.setdefault("protocol", "TCP")


def _default_tolerations(spec: dict) -> None:
    """DefaultTolerationSeconds admission: 300s for not-ready/unreachable NoExecute taints."""
    tols = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute")
                   or (not t.get("key") and t.get("operator") == "Exists") for t in tols):
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300})


def _default_job(obj: dict) -> None:
    m, spec = obj["metadata"], obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    tmpl = spec.setdefault("template", {})
    tmeta = tmpl.setdefault("metadata", {})
    default_pod_spec(tmpl.setdefault("spec", {}))
    # SetDefaults_Job copies template labels to an unlabelled Job before the selector is added.
    if not m.get("labels") and tmeta.get("labels"):
        m["labels"] = dict(tmeta["labels"])
    if not spec.get("manualSelector"):
        uid, name = m["uid"], m["name"]
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta["labels"] = {**(tmeta.get("labels") or {}),
                           "batch.kubernetes.io/controller-uid": uid,
                           "batch.kubernetes.io/job-name": name,
                           "controller-uid": uid, "job-name": name}
    obj["status"] = {}


def _default_secret(obj: dict) -> None:
    obj.setdefault("type", "Opaque")
    sd = obj.pop("stringData", None)
    if sd:
        data = obj.setdefault("data", {}) or {}
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


def _default_crd(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    names = spec.setdefault("names", {})
    names.setdefault("singular", (names.get("kind") or "").lower())
    names.setdefault("listKind", (names.get("kind") or "") + "List")
    obj["status"] = {
        "acceptedNames": dict(names),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now_rfc3339()},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted",
             "lastTransitionTime": now_rfc3339()}],
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
    }


def _validate_pod_spec(spec: dict, path: str) -> list[tuple[str, str]]:
    causes = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append((f"{path}.containers", "Required value"))
    seen = set()
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            cp = f"{path}.{kind}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if not name:
                causes.append((f"{cp}.name", "Required value"))
            else:
                causes += [(f"{cp}.name", f"Invalid value: {q(name)}: {e}")
                           for e in check_name(name, "label")]
                if name in seen:
                    causes.append((f"{cp}.name", f"Duplicate value: {q(name)}"))
                seen.add(name)
            if not c.get("image"):
                causes.append((f"{cp}.image", "Required value"))
            causes += _validate_resources(c.get("resources") or {}, f"{cp}.resources")
    rp = spec.get("restartPolicy")
    if rp not in ("Always", "OnFailure", "Never"):
        causes.append((f"{path}.restartPolicy", f'Unsupported value: {q(rp)}: supported values: '
                                                '"Always", "OnFailure", "Never"'))
    for i, t in enumerate(spec.get("tolerations") or []):
        if t.get("operator") == "Exists" and t.get("value"):
            causes.append((f"{path}.tolerations[{i}].operator",
                           f"Invalid value: {q(t.get('value'))}: value must be empty when "
                           "`operator` is 'Exists'"))
    return causes


def _validate_resources(res: dict, path: str) -> list[tuple[str, str]]:
    causes = []
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for part, vals in (("limits", limits), ("requests", requests)):
        for k, v in vals.items():
            if not is_quantity(v):
                causes.append((f"{path}.{part}[{k}]", f"Invalid value: {q(v)}: must be a "
                                                      "valid quantity"))
    if causes:
        return causes
    for k, v in requests.items():
        if k in limits:
            req, lim = parse_quantity(v), parse_quantity(limits[k])
            if req != lim and not overcommit_allowed(k):
                causes.append((f"{path}.requests", f"Invalid value: {q(v)}: must be equal to "
                                                   f"{k} limit of {limits[k]}"))
            elif req > lim:
                causes.append((f"{path}.requests", f"Invalid value: {q(v)}: must be less than "
                                                   f"or equal to {k} limit of {limits[k]}"))
        elif not overcommit_allowed(k):
            causes.append((f"{path}.limits",
                           "Required value: Limit must be set for non overcommitable resources"))
    return causes


def _validate_job(obj: dict) -> list[tuple[str, str]]:
    spec = obj.get("spec") or {}
    tmpl = spec.get("template") or {}
    tspec = tmpl.get("spec") or {}
    causes = _validate_pod_spec(tspec, "spec.template.spec")
    causes = [c for c in causes if not c[0].endswith("restartPolicy")]
    rp = tspec.get("restartPolicy")
    if rp not in ("OnFailure", "Never"):
        causes.append(("spec.template.spec.restartPolicy",
                       f'Unsupported value: {q(rp)}: supported values: "OnFailure", "Never"'))
    causes += check_labels((tmpl.get("metadata") or {}).get("labels"),
                           "spec.template.metadata.labels")
    for f in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds",
              "ttlSecondsAfterFinished"):
        v = spec.get(f)
        if v is not None and (not isinstance(v, int) or v < 0):
            causes.append((f"spec.{f}", f"Invalid value: {v}: must be greater than or equal to 0"))
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    if spec.get("manualSelector"):
        if not LabelSelector.from_api(spec.get("selector")).matches(
                (tmpl.get("metadata") or {}).get("labels")):
            causes.append(("spec.template.metadata.labels", "Invalid value: "
                           "map[string]string{...}: `selector` does not match template `labels`"))
    return causes


def _check_pod_update(old: dict, new: dict) -> None:
    def strip(spec: dict) -> dict:
        s = deepcopy(spec)
        for kind in ("containers", "initContainers"):
            for c in s.get(kind) or []:
                c.pop("image", None)
        for k in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations",
                  "schedulingGates"):
            s.pop(k, None)
        return s

    ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
    added_ok = all(t in (nspec.get("tolerations") or []) for t in ospec.get("tolerations") or [])
    if strip(ospec) != strip(nspec) or not added_ok:
        raise errors.invalid("", "Pod", old["metadata"]["name"],
                             [("spec", f"Forbidden: {_POD_MUTABLE_MSG}")])


def _check_job_update(old: dict, new: dict) -> None:
    ospec, nspec = old.get("spec") or {}, new.setdefault("spec", {})
    for k in ("selector", "completionMode", "podReplacementPolicy", "manualSelector"):
        if k in ospec:
            nspec.setdefault(k, ospec[k])
    tmpl = nspec.get("template") or {}
    default_pod_spec(tmpl.setdefault("spec", {}))
    causes = []
    for k in ("template", "selector", "completionMode"):
        if nspec.get(k) != ospec.get(k):
            causes.append((f"spec.{k}", f"Invalid value: {q(str(nspec.get(k)))[:80]}: "
                                        "field is immutable"))
    # pkg/apis/batch/validation/validation.go validateCompletions (ElasticIndexedJob,
    # KEP-3715, beta and on by default since 1.27): completions may change only on an
    # Indexed Job, together with parallelism, to the same value.
    if nspec.get("completions") != ospec.get("completions"):
        if ospec.get("completionMode") != "Indexed":
            causes.append(("spec.completions", f"Invalid value: {nspec.get('completions')}: "
                                               "field is immutable"))
        elif nspec.get("completions") != nspec.get("parallelism"):
            causes.append(("spec.completions", f"Invalid value: {nspec.get('completions')}: "
                                               "can only be modified in tandem with "
                                               "spec.parallelism"))
    if causes:
        raise errors.invalid("batch", "Job", old["metadata"]["name"], causes)


def _spec_changed(rt, old: dict, new: dict) -> bool:
    if rt.custom:
        skip = ("metadata", "status")
        return {k: v for k, v in old.items() if k not in skip} != \
            {k: v for k, v in new.items() if k not in skip}
    return old.get("spec") != new.get("spec")
