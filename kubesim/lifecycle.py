"""Create/update/delete pipelines shared by the REST layer, controllers and test helpers.

Garbage collection is done synchronously inside the delete call: the real GC is
eventual, but tests gain nothing from the delay and ordering stays realistic
(owner MODIFIED with deletionTimestamp for Foreground, dependents DELETED, owner DELETED).
"""

from __future__ import annotations

from . import errors, fieldvalidation
from .resources import ResourceType
from .util import deepcopy, new_uid, now_rfc3339, random_suffix

ROOT_CA = ("-----BEGIN CERTIFICATE-----\nMIIBfakeKubeapiTestServerRootCA\n"
           "-----END CERTIFICATE-----\n")


class Objects:
    def __init__(self, store, registry, admission):
        self.store = store
        self.registry = registry
        self.admission = admission
        # uid -> propagation policy for deletions waiting on other controllers' finalizers
        self._pending_policy: dict[str, str] = {}

    # -- create -----------------------------------------------------------------------------------
    def create(self, rt: ResourceType, body: dict, namespace: str | None = None,
               dry_run: bool = False, field_validation: str | None = None) -> dict:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        obj = deepcopy(body)
        self._check_type(rt, obj)
        # Decoding prunes what the CRD's schema does not declare (fieldvalidation.py).
        dropped = (fieldvalidation.validate(
            rt, obj, self.store.get("apiextensions.k8s.io/customresourcedefinitions", "",
                                    f"{rt.plural}.{rt.group}"), field_validation)
            if rt.custom else [])
        m = obj.get("metadata")
        if not isinstance(m, dict):
            m = obj["metadata"] = {}
        if rt.namespaced:
            ns = m.get("namespace") or namespace or "default"
            if namespace and m.get("namespace") and m["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match "
                                         "the namespace sent on the request")
            m["namespace"] = ns
        else:
            m.pop("namespace", None)
            ns = ""
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "selfLink", "managedFields"):
            m.pop(k, None)
        if rt.custom and rt.has_status:
            obj.pop("status", None)  # the status subresource owns it; create drops it
        if not m.get("name") and not m.get("generateName"):
            raise errors.invalid(rt.group, rt.kind, "", [
                ("metadata.name", "Required value: name or generateName is required")])
        with self.store.lock:
            if rt.namespaced:
                nsobj = self.store.get("/namespaces", "", ns)
                if nsobj is None:
                    raise errors.not_found("", "namespaces", ns)
                if nsobj["metadata"].get("deletionTimestamp"):
                    raise errors.forbidden(rt.group, rt.plural, m.get("name"),
                                           f"unable to create new content in namespace {ns} "
                                           "because it is being terminated")
            if not m.get("name"):
                # Retry collisions like the apiserver's RetryGenerateName does.
                for _ in range(8):
                    m["name"] = m["generateName"] + random_suffix()
                    if self.store.get(rt.key, ns, m["name"]) is None:
                        break
            if self.store.get(rt.key, ns, m["name"]) is not None:
                raise errors.already_exists(rt.group, rt.plural, m["name"])
            m["uid"] = new_uid()
            m["creationTimestamp"] = now_rfc3339()
            self.admission.default(rt, obj)
            self.admission.validate(rt, obj)
            self.admission.admit(rt, obj)
            self.admission.policies.validate(rt, "CREATE", obj, None, None, dry_run)
            self.admission.add_warnings(dropped)
            if dry_run:
                return obj
            stored = self.store.create(rt.key, obj)
            self._after_create(rt, stored)
            return stored

    def _check_type(self, rt: ResourceType, obj: dict) -> None:
        kind, av = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected "
                                     f"kind ({rt.kind})")
        if av and av != rt.api_version:
            raise errors.bad_request(f"the API version in the data ({av}) does not match the "
                                     f"expected API version ({rt.api_version})")
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version

    def _after_create(self, rt: ResourceType, obj: dict) -> None:
        if rt.key == "/namespaces":
            # What the serviceaccount and root-ca-cert-publisher controllers do for every namespace.
            ns = obj["metadata"]["name"]
            sa = self.registry.by_key("/serviceaccounts")
            cm = self.registry.by_key("/configmaps")
            self.create(sa, {"metadata": {"name": "default"}}, ns)
            self.create(cm, {"metadata": {"name": "kube-root-ca.crt", "annotations": {
                "kubernetes.io/description": "Contains a CA bundle that can be used to verify "
                                             "the kube-apiserver when using internal endpoints "
                                             "such as the internal service IP or "
                                             "kubernetes.default.svc. No other usage is "
                                             "guaranteed across distributions of Kubernetes "
                                             "clusters."}},
                             "data": {"ca.crt": ROOT_CA}}, ns)
        elif rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            for crt in crd_resource_types(obj):
                self.registry.add(crt)

    # -- update -----------------------------------------------------------------------------------
    def update(self, rt: ResourceType, ns: str, name: str, body: dict,
               subresource: str | None = None, dry_run: bool = False) -> dict:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        new = deepcopy(body)
        m = new.get("metadata") or {}
        if m.get("name") and m["name"] != name:
            raise errors.bad_request(f"the name of the object ({m['name']}) does not match the "
                                     f"name on the URL ({name})")
        if rt.namespaced and m.get("namespace") and m["namespace"] != ns:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        self._check_type(rt, new)
        with self.store.lock:
            old = self.store.get(rt.key, ns, name)
            if old is None:
                raise errors.not_found(rt.group, rt.plural, name)
            want_rv = m.get("resourceVersion")
            if not want_rv and rt.custom:
                raise errors.invalid(rt.group, rt.kind, name, [(
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update")])
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name, errors.MODIFIED_CONFLICT)
            new.setdefault("metadata", {})["name"] = name
            return self._commit(rt, old, new, subresource, dry_run)

    def patch(self, rt: ResourceType, ns: str, name: str, apply_patch,
              subresource: str | None = None, dry_run: bool = False) -> dict:
        """apply_patch(current_copy) -> patched object."""
        with self.store.lock:
            old = self.store.get(rt.key, ns, name)
            if old is None:
                raise errors.not_found(rt.group, rt.plural, name)
            new = apply_patch(deepcopy(old))
            if not isinstance(new, dict):
                raise errors.bad_request("the patch did not produce an object")
            m = new.setdefault("metadata", {})
            if m.get("resourceVersion") and m["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name, errors.MODIFIED_CONFLICT)
            if m.get("name") != name:
                raise errors.bad_request(f"metadata.name: Invalid value: {m.get('name')!r}: "
                                         "field is immutable")
            return self._commit(rt, old, new, subresource, dry_run)

    def _commit(self, rt, old, new, subresource, dry_run) -> dict:
        new = self.admission.prepare_update(rt, old, new, subresource)
        self.admission.validate(rt, new)
        # validating admission runs before storage sees that nothing changed
        self.admission.policies.validate(rt, "UPDATE", new, old, subresource, dry_run)
        if new == old:
            return old  # no-op writes do not bump resourceVersion on a real server either
        if dry_run:
            return new
        m = new["metadata"]
        if m.get("deletionTimestamp") and not m.get("finalizers"):
            # The last finalizer was removed: the pending deletion completes now.
            self.store.put(rt.key, new)
            return self._finish_delete(rt, m.get("namespace") or "", m["name"],
                                       self._pending_policy.pop(m["uid"], "Background"))
        return self.store.put(rt.key, new)

    # -- delete -------------------------------------------------------------------------------------
    def delete(self, rt: ResourceType, ns: str, name: str, policy: str | None = None,
               preconditions: dict | None = None, dry_run: bool = False,
               grace_seconds: int | None = None) -> tuple[dict, bool]:
        """Returns (object as last seen, deleted_now)."""
        with self.store.lock:
            obj = self.store.get(rt.key, ns, name)
            if obj is None:
                raise errors.not_found(rt.group, rt.plural, name)
            m = obj["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != m["uid"]:
                raise errors.conflict(rt.group, rt.plural, name,
                                      f"Precondition failed: UID in precondition: {pre['uid']}, "
                                      f"UID in object meta: {m['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name,
                                      "Precondition failed: ResourceVersion in precondition: "
                                      f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                      f"{m['resourceVersion']}")
            policy = policy or default_policy(rt)
            self.admission.policies.validate(rt, "DELETE", None, obj, None, dry_run)
            if dry_run:
                out = deepcopy(obj)
                out["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                return out, True  # answer as the real deletion would
            if m.get("deletionTimestamp"):
                return obj, False  # already terminating; deleting again is a no-op
            if rt.key == "/namespaces":
                return self._delete_namespace(obj), True
            if policy == "Foreground":
                marked = self.store.mutate(rt.key, ns, name, lambda o: _mark_deleting(
                    o, "foregroundDeletion", grace_seconds))
                for dkey, dns, dname in self.store.dependents(m["uid"]):
                    self._delete_dependent(dkey, dns, dname, "Foreground")
                marked = self.store.mutate(rt.key, ns, name, lambda o: _drop_finalizer(
                    o, "foregroundDeletion"))
                if marked["metadata"].get("finalizers"):
                    return marked, False
                return self._remove(rt, ns, name), True
            if m.get("finalizers"):
                # Other controllers' finalizers hold the object until they are removed.
                self._pending_policy[m["uid"]] = policy
                marked = self.store.mutate(rt.key, ns, name,
                                           lambda o: _mark_deleting(o, None, grace_seconds))
                return marked, False
            return self._finish_delete(rt, ns, name, policy), True

    def _finish_delete(self, rt, ns, name, policy) -> dict:
        obj = self.store.get(rt.key, ns, name)
        uid = obj["metadata"]["uid"]
        if policy == "Orphan":
            for dkey, dns, dname in self.store.dependents(uid):
                self.store.mutate(dkey, dns, dname, lambda o: _drop_owner(o, uid))
            return self._remove(rt, ns, name)
        gone = self._remove(rt, ns, name)
        for dkey, dns, dname in self.store.dependents(uid):
            self._delete_dependent(dkey, dns, dname, "Background")
        return gone

    def _delete_dependent(self, key, ns, name, policy) -> None:
        """GC: a dependent goes once none of its owners is left alive, whatever their kind
        (a Pod owning Pods included): pkg/controller/garbagecollector/garbagecollector.go
        attemptToDeleteItem deletes an object with no "solid" owner left."""
        drt = self.registry.by_key(key)
        obj = self.store.get(key, ns, name)
        if drt is None or obj is None:
            return
        alive = [r for r in obj["metadata"].get("ownerReferences") or []
                 if self._owner_alive(r, ns)]
        if alive:
            return
        try:
            self.delete(drt, ns, name, policy)
        except errors.ApiError:
            pass

    def _owner_alive(self, ref: dict, ns: str) -> bool:
        for rt in self.registry.all():
            if rt.kind == ref.get("kind") and rt.api_version == ref.get("apiVersion"):
                o = self.store.get(rt.key, ns if rt.namespaced else "", ref.get("name"))
                return o is not None and o["metadata"]["uid"] == ref.get("uid") and \
                    "foregroundDeletion" not in (o["metadata"].get("finalizers") or []) and \
                    not o["metadata"].get("deletionTimestamp")
        return False

    def _remove(self, rt, ns, name) -> dict:
        gone = self.store.remove(rt.key, ns, name)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            for crt in crd_resource_types(gone):
                self.registry.remove(crt.group, crt.plural)
                self.store.drop_resource(crt.key)
        return gone

    def _delete_namespace(self, nsobj: dict) -> dict:
        """Namespace controller, synchronously: Terminating, then contents, then the namespace."""
        name = nsobj["metadata"]["name"]

        def terminating(o):
            o["metadata"]["deletionTimestamp"] = now_rfc3339()
            o["metadata"]["deletionGracePeriodSeconds"] = 0
            o["status"] = {"phase": "Terminating"}
        marked = self.store.mutate("/namespaces", "", name, terminating)
        for key in self.store.namespaced_keys(name):
            for obj in self.store.items(key, name):
                self.store.remove(key, name, obj["metadata"]["name"])
        self.store.remove("/namespaces", "", name)
        return marked

    def delete_collection(self, rt, ns, selected, policy=None, dry_run=False) -> list[dict]:
        out = []
        with self.store.lock:
            for obj in selected:
                try:
                    gone, _ = self.delete(rt, ns if ns is not None else obj["metadata"].get(
                        "namespace", ""), obj["metadata"]["name"], policy, dry_run=dry_run)
                    out.append(gone)
                except errors.ApiError as e:
                    if e.code != 404:
                        raise
        return out


def default_policy(rt: ResourceType) -> str:
    # batch/v1 Jobs keep the legacy default of orphaning their pods.
    return "Orphan" if rt.key == "batch/jobs" else "Background"


def _mark_deleting(o: dict, finalizer: str | None, grace: int | None) -> None:
    m = o["metadata"]
    m["deletionTimestamp"] = now_rfc3339()
    m["deletionGracePeriodSeconds"] = grace if grace is not None else 0
    if finalizer and finalizer not in (m.get("finalizers") or []):
        m["finalizers"] = (m.get("finalizers") or []) + [finalizer]


def _drop_finalizer(o: dict, finalizer: str) -> None:
    fins = [f for f in o["metadata"].get("finalizers") or [] if f != finalizer]
    if fins:
        o["metadata"]["finalizers"] = fins
    else:
        o["metadata"].pop("finalizers", None)


def _drop_owner(o: dict, uid: str) -> None:
    refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        o["metadata"]["ownerReferences"] = refs
    else:
        o["metadata"].pop("ownerReferences", None)


def crd_resource_types(crd: dict) -> list[ResourceType]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        subs = tuple(k for k in (v.get("subresources") or spec.get("subresources") or {})
                     if k in ("status", "scale"))
        out.append(ResourceType(spec.get("group", ""), v["name"], names.get("plural", ""),
                                names.get("kind", ""), spec.get("scope") != "Cluster",
                                singular=names.get("singular", ""),
                                short_names=tuple(names.get("shortNames") or ()),
                                subresources=subs, custom=True,
                                categories=tuple(names.get("categories") or ())))
    return out
