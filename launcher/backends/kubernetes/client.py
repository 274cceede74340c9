"""The connection to the Kubernetes API: raw JSON requests, paged lists, watches, retries,
errors.

Which cluster and which credentials come from `kubeconfig` (kubectl's rules); the bytes go
through `transport` (TLS, auth, proxies over urllib3). Everything is a plain JSON dict:
deserialising thousands of pods into model objects costs seconds, and every object hvdk8s
handles (PodGroups, MPIJobs) is a dict anyway.

Transient failures (connection errors, 429, 5xx) are retried by urllib3's `Retry` a bounded
number of times with exponential backoff and full jitter, honouring Retry-After. Every verb
is retried, POST included: a create that landed before its answer was lost meets 409 on the
retry, and k8s_apply.create recognises its own object by the submission annotation. 401/403
become one-line errors naming the refused verb and resource.
"""

from __future__ import annotations

import builtins
import json
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import quote

from launcher.backends.kubernetes.kubeconfig import resolve
from launcher.backends.kubernetes.liststream import parse_list
from launcher.backends.kubernetes.ratelimit import RateLimiter
from launcher.backends.kubernetes.transport import Transport
from launcher.errors import UserError
from mpijob import gang as gangs
from mpijob.wellknown import POD_MONITOR_API_VERSION, POD_MONITOR_KIND

# (connect, read) seconds for ordinary requests; streams use their own read timeout.
REQUEST_TIMEOUT = (10.0, 60.0)
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Objects per list page: kubectl's --chunk-size default.
PAGE_SIZE = 500
LIST_RESTARTS = 3  # lists started over after a 410 in the middle
# Bytes read at a time from a list answer: far more than one object (4-8 KB), so that few
# objects straddle two reads and are decoded twice, and little against the whole answer.
LIST_READ = 2 ** 20


# --- resource kinds ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind(gangs.ApiKind):
    """A kind as the client reads and writes it: the core's ApiKind, with its URL."""

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def resource(self) -> str:
        """How RBAC and error messages name it: 'pods', 'jobs.batch'."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        # `.` and `..` name no object (apimachinery path.IsValidPathSegmentName), and the URL
        # would be folded into another path before it is sent.
        for segment in (namespace, name):
            if segment in (".", ".."):
                raise UserError(f"{segment!r} is not a valid {self.kind} name or namespace")
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if sub:
            base += f"/{sub}"
        return base


def api_kind(api) -> Kind:
    """The client's Kind of a kind the pure core declares (mpijob.gang.ApiKind)."""
    return Kind(api.api_version, api.kind, api.plural, api.namespaced)


POD = Kind("v1", "Pod", "pods")
SERVICE = Kind("v1", "Service", "services")
CONFIGMAP = Kind("v1", "ConfigMap", "configmaps")
SECRET = Kind("v1", "Secret", "secrets")
EVENT = Kind("v1", "Event", "events")
NODE = Kind("v1", "Node", "nodes", namespaced=False)
PVC = Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims")
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False)
RESOURCE_QUOTA = Kind("v1", "ResourceQuota", "resourcequotas")
JOB = Kind("batch/v1", "Job", "jobs")
MPIJOB = Kind("kubeflow.org/v2beta1", "MPIJob", "mpijobs")
# Kubeflow Trainer (mpijob.k8s.render_trainjob): the versions hvdk8s speaks, newest first.
TRAINJOBS = tuple(Kind(f"trainer.kubeflow.org/{v}", "TrainJob", "trainjobs")
                  for v in ("v1beta1", "v1alpha1"))
CLUSTER_TRAINING_RUNTIMES = tuple(
    Kind(f"trainer.kubeflow.org/{v}", "ClusterTrainingRuntime", "clustertrainingruntimes",
         namespaced=False) for v in ("v1beta1", "v1alpha1"))
# What hvdk8s creates for a gang scheduler in built-in mode (a PodGroup): mpijob.gang.
GANG_KINDS = tuple(api_kind(k) for s in gangs.SCHEDULERS.values() for k in s.created_kinds)
KUEUE_LOCALQUEUE = Kind("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues")
KUEUE_WORKLOAD = Kind("kueue.x-k8s.io/v1beta1", "Workload", "workloads")
HYPERNODE = Kind("topology.volcano.sh/v1alpha1", "HyperNode", "hypernodes", namespaced=False)
RESOURCE_SLICE = Kind("resource.k8s.io/v1", "ResourceSlice", "resourceslices", namespaced=False)
RESOURCE_CLAIM = Kind("resource.k8s.io/v1", "ResourceClaim", "resourceclaims")
RESOURCE_CLAIM_TEMPLATE = Kind("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates")
# NVIDIA's DRA driver (mpijob.k8s.computedomain).
COMPUTE_DOMAIN = Kind("resource.nvidia.com/v1beta1", "ComputeDomain", "computedomains")
POD_MONITOR = Kind(POD_MONITOR_API_VERSION, POD_MONITOR_KIND, "podmonitors")
KUEUE_TOPOLOGIES = (Kind("kueue.x-k8s.io/v1beta1", "Topology", "topologies", namespaced=False),
                    Kind("kueue.x-k8s.io/v1alpha1", "Topology", "topologies", namespaced=False))

_KNOWN = {(k.api_version, k.kind): k for k in (
    POD, SERVICE, CONFIGMAP, SECRET, EVENT, NODE, JOB, MPIJOB, *GANG_KINDS, KUEUE_WORKLOAD,
    RESOURCE_SLICE, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, COMPUTE_DOMAIN, POD_MONITOR,
    *TRAINJOBS, *CLUSTER_TRAINING_RUNTIMES,
    Kind("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues"),
    Kind("scheduling.volcano.sh/v1beta1", "Queue", "queues", namespaced=False),
    NAMESPACE,
    Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings",
         namespaced=False),
    Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
         "validatingadmissionpolicies", namespaced=False),
    Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
         "validatingadmissionpolicybindings", namespaced=False),
)}


def kind_of(obj: dict) -> Kind:
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key in _KNOWN:
        return _KNOWN[key]
    # The API's own convention for regular kinds (discovery would be exact, at a cost).
    return Kind(key[0], key[1], key[1].lower() + "s")


# --- errors -----------------------------------------------------------------------------------
@dataclass(eq=False)  # an exception compares and hashes by identity
class ApiError(Exception):
    """A non-2xx answer (or, with status 0, no answer) from the API server."""

    status: int
    reason: str
    message: str
    _: KW_ONLY
    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)  # str(error) is the server's message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    def where(self) -> str:
        return f" in namespace {self.namespace}" if self.namespace else " (cluster scope)"

    def admission_plugin(self) -> str | None:
        """Which admission plugin gave this 403, from its message: Pod Security
        ("violates PodSecurity"), ResourceQuota ("exceeded quota", "failed quota") or
        LimitRange ("usage per Container"); None for anything else (RBAC)."""
        for marker, who in (("violates PodSecurity", "Pod Security admission"),
                            ("exceeded quota", "ResourceQuota"),
                            ("failed quota", "ResourceQuota"),
                            ("usage per Container", "LimitRange")):
            if self.status == 403 and marker in self.message:
                return who
        return None

    def admission_refusal(self) -> str | None:
        """A 403 from an admission plugin (not RBAC), in the server's own words."""
        who = self.admission_plugin()
        if who is None:
            return None
        said = self.message.split("is forbidden: ", 1)[-1]
        return f"{self.resource} refused by {who}{self.where()}: {said}"

    def user_error(self) -> UserError:
        what = f"{self.resource}/{self.name}" if self.name else self.resource
        if self.status == 403 and (admission := self.admission_refusal()):
            return UserError(admission)
        if self.status == 403 and not _RBAC_DENIAL.search(self.message):
            # Not the authorizer: an admission plugin (a ServiceAccount, PriorityClass or
            # webhook refusing): its own words name the cause.
            return UserError(f"cannot {self.verb} {what}{self.where()}: refused by the API "
                             f"server's admission: {self.message}")
        if self.status == 403:
            return UserError(
                f"forbidden: cannot {self.verb} {self.resource}{self.where()} (RBAC); ask your "
                f"admin for a Role granting '{self.verb}' on '{self.resource}' "
                f"(server said: {self.message})")
        if self.status == 401:
            return UserError(
                "unauthorized: the API server rejected the credentials of this kubeconfig "
                f"context while trying to {self.verb} {self.resource} (expired token? run "
                "`kubectl get ns` to check the login)")
        if self.status == 0:
            return UserError(f"cannot reach the Kubernetes API server: {self.message}")
        return UserError(f"cannot {self.verb} {what}{self.where()}: {self.message} "
                         f"(HTTP {self.status} {self.reason})")


# The authorizer's denial (k8s.io/apiserver endpoints/handlers/responsewriters/errors.go
# forbiddenMessage): `User "u" cannot VERB resource "R" ...`, or, for an anonymous
# request, `cannot VERB path "/..."`.
_RBAC_DENIAL = re.compile(r'cannot [a-z]+ (resource|path) "')


def _warnings(header: str) -> list[str]:
    """The texts of a `Warning: 299 - "a", 299 - "b"` header (RFC 7234 warn-text)."""
    return [m.replace('\\"', '"') for m in re.findall(r'299 - "((?:[^"\\]|\\.)*)"', header)]


def _verb(method: str, name: str | None, query: dict) -> str:
    if method == "GET":
        if query.get("watch"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE" and not name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower())


# --- retries ----------------------------------------------------------------------------------
@dataclass
class RetryPolicy:
    """How many tries, and how long between them: bounded exponential backoff with full
    jitter (AWS architecture blog's 'Full Jitter'), or the server's Retry-After up to a cap.
    urllib3's own backoff adds its jitter on top of a fixed delay instead."""

    tries: int = 5
    base: float = 0.2
    cap: float = 5.0
    max_retry_after: float = 10.0
    sleep: Callable[[float], None] = time.sleep
    rand: Callable[[], float] = random.random

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = self.rand() * min(self.cap, self.base * 2 ** attempt)
        if retry_after is not None:
            return max(backoff, min(retry_after, self.max_retry_after))
        return backoff

    def urllib3_retry(self, limiter: RateLimiter | None = None):
        """The urllib3 `Retry` that applies this policy (for the client configuration);
        a retry waits for the rate limiter too, and a 429's Retry-After holds it."""
        # lazy: urllib3 (~30 ms) loads at the first connection, not at every command's start
        from urllib3.util.retry import Retry

        policy = self

        class PolicyRetry(Retry):
            # urllib3 decides what to retry and counts the tries; the policy says how long
            # to wait (`history` holds one entry per try that failed so far).
            def __init__(self, *args, **kw) -> None:
                super().__init__(*args, **kw)
                # A redirect to another host loses the credentials (urllib3's default) and
                # who they act for: the Impersonate-* headers (Extra's names vary).
                self.remove_headers_on_redirect = _DroppedOnRedirect(
                    self.remove_headers_on_redirect)

            def sleep(self, response=None) -> None:
                after = self.get_retry_after(response) if response is not None else None
                delay = policy.delay(len(self.history), after)
                if limiter is not None and response is not None and response.status == 429:
                    limiter.hold(delay)  # flow control said wait: every thread waits
                policy.sleep(delay)
                if limiter is not None:
                    limiter.acquire()

        return PolicyRetry(total=self.tries - 1, allowed_methods=None,
                            status_forcelist=RETRYABLE_STATUS, raise_on_status=False)


class _DroppedOnRedirect(frozenset):
    """Header names (lower case) urllib3 drops on a redirect to another host."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (
            isinstance(name, str) and name.lower().startswith("impersonate-"))


# --- connecting -------------------------------------------------------------------------------
def connect(context: str | None = None, namespace: str | None = None,
            kubeconfig: str | None = None, retry: RetryPolicy | None = None) -> KubeClient:
    """A client for the chosen context; UserError when no configuration can be loaded.
    Nothing is sent yet (an exec plugin runs at the first request)."""
    conn = resolve(context, namespace, kubeconfig)
    retry = retry or RetryPolicy()
    limiter = RateLimiter()
    transport = Transport(conn, retry.urllib3_retry(limiter), kubeconfig=kubeconfig)
    return KubeClient(transport, namespace=conn.namespace, context=conn.context, retry=retry,
                      limiter=limiter)


# --- the client -------------------------------------------------------------------------------
@dataclass
class KubeClient:
    transport: Transport
    namespace: str = "default"
    context: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # the one in api's configuration
    limiter: RateLimiter = field(default_factory=RateLimiter)  # the one its retries wait for
    _discovery: dict = field(default_factory=dict)
    # The newest resourceVersion a list of each resource answered: a later cached read asks
    # for a state not older than it (resourceVersionMatch=NotOlderThan), so that reads of
    # one command never go back in time, even behind several API servers.
    _seen: dict = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.transport.conn.server

    # -- raw requests --------------------------------------------------------------------------
    def _send(self, method: str, path: str, query: dict, body, content_type: str | None,
              timeout, what: dict):
        """One HTTP exchange, retried by the configuration's urllib3 `Retry`; returns the
        urllib3 response (body unread)."""
        import urllib3

        self.limiter.acquire()
        try:
            resp = self.transport.request(method, path, query, body=body,
                                          content_type=content_type, timeout=timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _unreachable(self.host, exc, what) from None
        if 200 <= resp.status < 300:
            return resp
        raise self._error(resp, what)

    @staticmethod
    def _error(resp, what: dict) -> ApiError:
        raw = resp.read() or b""
        try:
            status = json.loads(raw)
        except ValueError:
            status = {}
        if not isinstance(status, dict):
            status = {}
        message = status.get("message") or raw.decode("utf-8", "replace").strip() or resp.reason
        if 300 <= resp.status < 400:  # not followed: a request with a body (transport.py)
            message = (f"the server redirected to {resp.headers.get('Location')}, which a "
                       "request with a body does not follow (its body may hold a Secret); "
                       "point the kubeconfig's server there")
        return ApiError(resp.status, status.get("reason") or resp.reason or "", message, **what)

    def request(self, method: str, path: str, *, query: dict | None = None, body=None,
                content_type: str | None = None, resource: str = "", namespace: str | None = None,
                name: str | None = None, timeout=REQUEST_TIMEOUT):
        query = query or {}
        what = {"verb": _verb(method, name, query), "resource": resource,
                "namespace": namespace, "name": name}
        resp = self._send(method, path, query, body, content_type, timeout, what)
        data = resp.data
        resp.release_conn()
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace")

    # -- typed helpers (dicts in, dicts out) ---------------------------------------------------
    def _ns(self, kind: Kind, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if kind.namespaced else None

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict | None:
        ns = self._ns(kind, namespace)
        try:
            return self.request("GET", kind.path(ns, name), resource=kind.resource,
                                namespace=ns, name=name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def list(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
             label_selector: str | None = None, field_selector: str | None = None,
             limit: int | None = None, keep: Callable[[dict], object | None] | None = None,
             cached: bool = False, page_size: int | None = None,
             item_type: type | None = None,
             select: Callable[[bytes, int, int], bool] | None = None) -> dict:
        """{"metadata": {"resourceVersion"}, "items": [...]}: the whole list (or the first
        `limit` objects), read in pages of `page_size` (kubectl's --chunk-size, 500) with
        `continue`, each parsed as it arrives and reduced by `keep` (the object, what of it
        to hold, or None to drop it). With an `item_type` (projections.py), keep sees only
        the fields that type declares, and `select` may pass over items by their bytes
        before any decoding (liststream.parse_projected).

        `cached` reads the API server's watch cache in one answer, unpaged (a paged read
        with a resourceVersion goes to etcd before 1.33): resourceVersion=0 the first time,
        then not older than the newest this client has seen of the resource
        (resourceVersionMatch=NotOlderThan): a fraction of an etcd read for the server, a
        moment stale at most. A 410 Expired in the middle of a paged list (the first page's
        revision was compacted) starts the list over; client-go's pager falls back to one
        unpaginated list instead (tools/pager/pager.go), which at 150,000 pods is the
        gigabyte answer paging avoids."""
        ns = None if all_namespaces else self._ns(kind, namespace)
        what = {"verb": "list", "resource": kind.resource, "namespace": ns, "name": None}
        for attempt in range(LIST_RESTARTS + 1):
            kept: builtins.list[Any] = []
            cont = None
            try:
                while True:
                    query = {"labelSelector": label_selector, "fieldSelector": field_selector,
                             "limit": limit or (None if cached else page_size or PAGE_SIZE),
                             "continue": cont}
                    if cached:
                        seen = self._seen.get(kind.resource)
                        query["resourceVersion"] = seen or "0"
                        query["resourceVersionMatch"] = "NotOlderThan" if seen else None
                    resp = self._send("GET", kind.path(ns), query, None, None, REQUEST_TIMEOUT,
                                      what)
                    try:
                        head, items = parse_list(_chunks(resp, LIST_READ), keep or _same,
                                                 item_type, select)
                    finally:
                        resp.release_conn()
                    kept.extend(items)
                    meta = head.get("metadata") or {}
                    cont = meta.get("continue")
                    if not cont or limit:
                        version = meta.get("resourceVersion")
                        self._saw(kind.resource, version)
                        return {"metadata": {"resourceVersion": version}, "items": kept}
            except ApiError as exc:
                if exc.status != 410 or cont is None or attempt == LIST_RESTARTS:
                    raise
        raise AssertionError("unreachable")

    def _saw(self, resource: str, version: str | None) -> None:
        if version and version.isdigit() and int(version) > int(self._seen.get(resource, 0)):
            self._seen[resource] = version

    def items(self, kind: Kind, namespace: str | None = None, **kw) -> builtins.list[Any]:
        return self.list(kind, namespace, **kw)["items"]

    def create(self, obj: dict, *, dry_run: bool = False,
               field_validation: str | None = None) -> dict:
        """POST; `field_validation` "Strict" makes an unknown or duplicate field an error
        instead of a silent drop (kube-apiserver >= 1.25; older servers ignore it)."""
        kind = kind_of(obj)
        ns = self._ns(kind, (obj.get("metadata") or {}).get("namespace"))
        return self.request("POST", kind.path(ns), query={"dryRun": "All" if dry_run else None,
                                                          "fieldValidation": field_validation},
                            body=obj, resource=kind.resource, namespace=ns,
                            name=obj["metadata"].get("name"))

    def create_with_warnings(self, obj: dict, *, dry_run: bool = False
                             ) -> tuple[dict, builtins.list[str]]:
        """create() and the `Warning` headers of the answer (Pod Security warn mode, ...)."""
        kind = kind_of(obj)
        ns = self._ns(kind, (obj.get("metadata") or {}).get("namespace"))
        what = {"verb": "create", "resource": kind.resource, "namespace": ns,
                "name": obj["metadata"].get("name")}
        resp = self._send("POST", kind.path(ns), {"dryRun": "All" if dry_run else None}, obj,
                          None, REQUEST_TIMEOUT, what)
        headers = getattr(resp, "headers", None) or {}
        raw = headers.get("Warning") or ""
        return json.loads(resp.data), _warnings(raw)

    def apply(self, obj: dict, *, field_manager: str = "hvdk8s") -> bool:
        """Server-side apply (create or update, taking over fields others set, as
        `kubectl apply --server-side --force-conflicts`); True when it created the object."""
        kind = kind_of(obj)
        ns = self._ns(kind, (obj.get("metadata") or {}).get("namespace"))
        name = obj["metadata"]["name"]
        what = {"verb": "patch", "resource": kind.resource, "namespace": ns, "name": name}
        # JSON is YAML, so the apply-patch+yaml body can be the object as JSON.
        resp = self._send("PATCH", kind.path(ns, name),
                          {"fieldManager": field_manager, "force": "true"}, obj,
                          "application/apply-patch+yaml", REQUEST_TIMEOUT, what)
        return resp.status == 201

    def patch(self, kind: Kind, name: str, patch: dict, namespace: str | None = None, *,
              field_manager: str | None = None) -> dict:
        ns = self._ns(kind, namespace)
        return self.request("PATCH", kind.path(ns, name), body=patch,
                            query={"fieldManager": field_manager},
                            content_type="application/merge-patch+json",
                            resource=kind.resource, namespace=ns, name=name)

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *,
               propagation: str | None = None, grace_seconds: int | None = None) -> bool:
        """False when it did not exist."""
        ns = self._ns(kind, namespace)
        body: dict[str, str | int] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation:
            body["propagationPolicy"] = propagation
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.request("DELETE", kind.path(ns, name), body=body, resource=kind.resource,
                         namespace=ns, name=name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    def delete_collection(self, kind: Kind, namespace: str | None, label_selector: str, *,
                          grace_seconds: int | None = None) -> None:
        ns = self._ns(kind, namespace)
        body: dict[str, str | int] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                      "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.request("DELETE", kind.path(ns), query={"labelSelector": label_selector},
                         body=body, resource=kind.resource, namespace=ns)
        except ApiError as exc:
            if exc.not_found:
                return
            if exc.status != 405:  # services had no deletecollection before Kubernetes 1.31
                raise
            for obj in self.items(kind, ns, label_selector=label_selector):
                self.delete(kind, obj["metadata"]["name"], ns, grace_seconds=grace_seconds)

    # -- logs and watches ----------------------------------------------------------------------
    def pod_log(self, pod: str, namespace: str | None = None, *, container: str | None = None,
                tail: int | None = None, previous: bool = False,
                limit_bytes: int | None = None) -> str:
        ns = self._ns(POD, namespace)
        query = {"container": container, "tailLines": tail, "previous": "true" if previous else None,
                 "limitBytes": limit_bytes}
        what = {"verb": "get", "resource": "pods/log", "namespace": ns, "name": pod}
        resp = self._send("GET", POD.path(ns, pod, "log"), query, None, None, REQUEST_TIMEOUT, what)
        return resp.data.decode("utf-8", "replace")

    def follow_log(self, pod: str, namespace: str | None = None, *, container: str | None = None,
                   tail: int | None = None) -> Iterator[str]:
        """Lines of a container's log as they are written; ends when the container exits."""
        ns = self._ns(POD, namespace)
        query = {"container": container, "tailLines": tail, "follow": "true"}
        what = {"verb": "get", "resource": "pods/log", "namespace": ns, "name": pod}
        resp = self._send("GET", POD.path(ns, pod, "log"), query, None, None, (10.0, None), what)
        return _lines(resp)

    def watch(self, kind: Kind, namespace: str | None = None, *, all_namespaces: bool = False,
              label_selector: str | None = None, resource_version: str | None = None,
              timeout_seconds: int = 30) -> Iterator[tuple[str, dict]]:
        """(type, object) events until the server closes the stream after timeout_seconds."""
        ns = None if all_namespaces else self._ns(kind, namespace)
        query = {"watch": "true", "labelSelector": label_selector,
                 "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
                 "allowWatchBookmarks": "true"}
        what = {"verb": "watch", "resource": kind.resource, "namespace": ns, "name": None}
        resp = self._send("GET", kind.path(ns), query, None, None,
                          (10.0, timeout_seconds + 30.0), what)
        return _events(resp)

    # -- discovery -----------------------------------------------------------------------------
    def api_groups(self) -> set[str]:
        """Names of the served API groups (one call, cached)."""
        if "/apis" not in self._discovery:
            doc = self.request("GET", "/apis", resource="apigroups") or {}
            self._discovery["/apis"] = {g.get("name") for g in doc.get("groups") or []}
        return self._discovery["/apis"]

    def served_resources(self, api_version: str) -> set[str]:
        """Plural names served under a group/version; empty when it is not installed."""
        if api_version not in self._discovery:
            path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            try:
                doc = self.request("GET", path, resource=api_version) or {}
            except ApiError as exc:
                if not exc.not_found:
                    raise
                doc = {}
            self._discovery[api_version] = {r.get("name") for r in doc.get("resources") or []}
        return self._discovery[api_version]

    def serves(self, kind: Kind) -> bool:
        return kind.plural in self.served_resources(kind.api_version)


def _same(obj: dict) -> dict:
    return obj


def _unreachable(host: str, exc: Exception, what: dict) -> ApiError:
    # After the last retry urllib3 raises MaxRetryError; its reason is what went wrong.
    return ApiError(0, "ConnectionError", f"{host}: {getattr(exc, 'reason', None) or exc}", **what)


def _chunks(resp, size: int = 2 ** 14) -> Iterator[bytes]:
    """Bytes as they arrive: `stream()` would wait to fill its buffer on unchunked bodies."""
    if resp.chunked and resp.supports_chunked_reads():
        yield from resp.read_chunked(size, decode_content=True)
        return
    while True:
        data = resp.read1(size)
        if not data:
            return
        yield data


def _lines(resp) -> Iterator[str]:
    try:
        pending = b""
        for chunk in _chunks(resp):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.decode("utf-8", "replace").rstrip("\r")
        if pending:
            yield pending.decode("utf-8", "replace")
    finally:
        resp.release_conn()


def _events(resp) -> Iterator[tuple[str, dict]]:
    for line in _lines(resp):
        if not line.strip():
            continue
        event = json.loads(line)
        yield event.get("type", ""), event.get("object") or {}
