"""Resource verbs over HTTP semantics: query parameters in, (status, body) or streams out."""

from __future__ import annotations

import base64
import bisect
import json
import threading
import time
from dataclasses import dataclass, field

from . import errors, patch
from .logs import format_lines
from .podutil import set_condition
from .selectors import FieldSelector, LabelSelector
from .store import TooOld
from .util import deepcopy, now_rfc3339
from .watch import WatchStream

_RETURNS_OBJECT = ("/pods", "/services", "/namespaces")


@dataclass
class Response:
    code: int
    body: object  # dict (JSON), str (text/plain) or bytes
    headers: dict = field(default_factory=dict)


@dataclass
class Stream:
    """A chunked response; `run(writer)` produces the chunks."""

    content_type: str
    run: object
    headers: dict = field(default_factory=dict)


def _truthy(v: str | None) -> bool:
    return (v or "").lower() in ("true", "1")


def _quote(text: str) -> str:
    """apimachinery's NewWarningHeader: the text as an RFC 7230 quoted-string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dry_run(query: dict, body: dict | None = None) -> bool:
    if query.get("dryRun") == "All":
        return True
    return isinstance(body, dict) and "All" in (body.get("dryRun") or [])


def _decode(body: bytes):
    try:
        return json.loads(body or b"null")
    except json.JSONDecodeError as e:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {e}") from None


class Rest:
    def __init__(self, store, registry, objects, logbook):
        self.store, self.registry, self.objects, self.logbook = store, registry, objects, logbook
        self.cached = SerializationCache()
        self._ordered: dict[str, tuple[int, list[str], list[dict]]] = {}

    # -- reads ------------------------------------------------------------------------------------
    def select(self, rt, ns, query, at: int | None = None) -> tuple[list[dict], int]:
        """Matching objects in etcd key order (/registry/<resource>/<ns>/<name>), now or as
        they were at resourceVersion `at`."""
        ls = LabelSelector.parse(query.get("labelSelector"))
        fs = FieldSelector.parse(query.get("fieldSelector"), rt.fields)
        node = _node_term(rt, fs)
        with self.store.lock:
            if at is None and node is not None:
                items, rv = self.store.pods_on(node), self.store.rv
                if ns is not None:
                    items = [o for o in items if o["metadata"].get("namespace") == ns]
            elif at is None:
                items, rv = self.store.items(rt.key, ns), self.store.rv
            else:
                try:
                    items, rv = self.store.items_at(rt.key, ns, at), at
                except TooOld:
                    raise errors.continue_expired() from None
        if not ls.empty:
            items = [o for o in items if ls.matches(o["metadata"].get("labels"))]
        if not fs.empty:
            fields = rt.fields
            items = [o for o in items if fs.matches(o, fields)]
        items.sort(key=_etcd_key)
        return items, rv

    def list(self, rt, ns, query) -> Response | Stream:
        """As the real apiserver lists (k8s.io/apiserver/pkg/storage):
        - resourceVersion=0 is served from the watch cache, whole: the cacher ignores
          `limit` then (cacher.go shouldDelegateList: hasLimit requires RV != "0", before
          1.33's ListFromCacheSnapshot), and it sends each object's cached serialization
          (cacher/caching_object.go);
        - otherwise etcd is read (etcd3/store.go GetList): `limit` pages in key order, and
          `continue` (base64 JSON {"v","rv","start"}, storage/continue.go) reads the next page
          at the first page's revision, so the pages make one consistent list; once that
          revision is compacted the answer is 410 Expired."""
        if _truthy(query.get("watch")):
            return self.watch(rt, ns, query)
        cont = query.get("continue")
        from_cache = query.get("resourceVersion") == "0" and not cont
        start, at = None, None
        if cont:
            start, at = _decode_continue(cont)
        limit = 0 if from_cache else int(query.get("limit") or 0)
        meta: dict = {}
        page = self._key_range(rt, ns, query, start, at, limit)
        if page is not None:
            items, rv, more, remaining = page
        else:
            items, rv = self.select(rt, ns, query, at)
            if start is not None:
                items = [o for o in items if _etcd_key(o) >= start]
            more, remaining = bool(limit) and len(items) > limit, len(items) - limit
            if more:
                items = items[:limit]
        meta["resourceVersion"] = str(rv)
        if more:
            meta["continue"] = _encode_continue(_etcd_key(items[-1]) + "\x00", rv)
            if not query.get("labelSelector") and not query.get("fieldSelector"):
                meta["remainingItemCount"] = remaining
        head = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta}
        # Whether from the watch cache or "etcd", each object version's JSON is made once:
        # the bytes are the same, and re-encoding every page of a paged list cost the test
        # server as much CPU as the client it serves.
        return Response(200, self.cached.list_body(rt, head, items))

    def _key_range(self, rt, ns, query, start, at, limit):
        """A page read as etcd reads one: from `start` in key order, stopping once `limit`
        objects have matched, instead of selecting and sorting the whole resource for each
        page. Only for a read of the current state (no `at`, or nothing written since it);
        None otherwise, and for spec.nodeName reads, which the pod index answers."""
        fs = FieldSelector.parse(query.get("fieldSelector"), rt.fields)
        if _node_term(rt, fs) is not None:
            return None
        with self.store.lock:
            rv = self.store.rv
            if at is not None and self.store.last_rv(rt.key) > at:
                return None  # written since the first page: the old revision is needed
            keys, objs = self.ordered(rt.key)
        lo, hi = 0, len(keys)
        if ns is not None:  # a namespace is a key prefix: "<ns>/"
            lo, hi = bisect.bisect_left(keys, f"{ns}/"), bisect.bisect_left(keys, f"{ns}0")
        if start is not None:
            lo = max(lo, bisect.bisect_left(keys, start))
        ls = LabelSelector.parse(query.get("labelSelector"))
        fields = rt.fields
        items: list[dict] = []
        i = lo
        while i < hi:
            o = objs[i]
            i += 1
            if (ls.empty or ls.matches(o["metadata"].get("labels"))) and \
                    (fs.empty or fs.matches(o, fields)):
                if limit and len(items) == limit:
                    return items, (at if at is not None else rv), True, hi - i + 1
                items.append(o)
        return items, (at if at is not None else rv), False, 0

    def ordered(self, key: str) -> tuple[list[str], list[dict]]:
        """The resource's objects in etcd key order, re-sorted only after a write to it.
        Call under the store's lock."""
        last = self.store.last_rv(key)
        hit = self._ordered.get(key)
        if hit is None or hit[0] != last:
            objs = sorted(self.store.items(key), key=_etcd_key)
            hit = self._ordered[key] = (last, [_etcd_key(o) for o in objs], objs)
        return hit[1], hit[2]

    def watch(self, rt, ns, query) -> Stream:
        ls = LabelSelector.parse(query.get("labelSelector"))
        fs = FieldSelector.parse(query.get("fieldSelector"), rt.fields)
        timeout = int(query.get("timeoutSeconds") or 1800)
        ws = WatchStream(self.store, rt, ns, ls, fs, query.get("resourceVersion"), timeout,
                         bookmarks=_truthy(query.get("allowWatchBookmarks")))
        # Validate the resourceVersion before committing to a 200.
        rv = query.get("resourceVersion")
        if rv not in (None, "", "0") and not rv.isdigit():
            raise errors.bad_request(f"invalid resource version: {rv!r}")
        return Stream("application/json", ws.run)

    def get(self, rt, ns, name) -> Response:
        obj = self.store.get(rt.key, ns or "", name)
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return Response(200, obj)

    # -- writes -----------------------------------------------------------------------------------
    def create(self, rt, ns, body: bytes, query) -> Response:
        data = _decode(body)
        obj = self.objects.create(rt, data, ns, dry_run=_dry_run(query),
                                  field_validation=query.get("fieldValidation"))
        return Response(201, obj, self._warnings())

    def _warnings(self) -> dict:
        """One `Warning: 299 - "text"` header per warning admission gave (apiserver's
        warning.AddWarning)."""
        warnings = self.objects.admission.take_warnings()
        return {"Warning": ", ".join(f'299 - "{_quote(w)}"' for w in warnings)} \
            if warnings else {}

    def update(self, rt, ns, name, sub, body: bytes, query) -> Response:
        self.objects.admission.take_warnings()  # only this request's
        obj = self.objects.update(rt, ns or "", name, _decode(body), sub, _dry_run(query))
        return Response(200, obj, self._warnings())

    def patch(self, rt, ns, name, sub, body: bytes, content_type: str, query) -> Response:
        ctype = (content_type or "").split(";")[0].strip()
        accepted = [patch.JSON_PATCH, patch.MERGE_PATCH, patch.APPLY]
        if not rt.custom:
            accepted.insert(2, patch.STRATEGIC)
        if ctype not in accepted:
            raise errors.unsupported_media_type(ctype, accepted)
        data = patch.decode(body, ctype)
        dry = _dry_run(query)
        if ctype == patch.JSON_PATCH:
            fn = lambda cur: patch.json_patch(cur, data)  # noqa: E731
        elif ctype == patch.MERGE_PATCH or (ctype == patch.APPLY and rt.custom):
            fn = lambda cur: patch.merge_patch(cur, data)  # noqa: E731
        else:
            fn = lambda cur: patch.strategic_merge(cur, data)  # noqa: E731
        if ctype == patch.APPLY:
            if not query.get("fieldManager"):
                raise errors.bad_request("PATCH /apply requires a fieldManager query parameter")
            with self.store.lock:
                if self.store.get(rt.key, ns or "", name) is None:
                    # Server-side apply creates missing objects.
                    data = dict(data or {})
                    data.setdefault("metadata", {})["name"] = name
                    return Response(201, self.objects.create(rt, data, ns, dry_run=dry))
        if not isinstance(data, (dict, list)):
            raise errors.bad_request("the body of the request was not a JSON object")
        self.objects.admission.take_warnings()  # only this request's
        obj = self.objects.patch(rt, ns or "", name, fn, sub, dry)
        return Response(200, obj, self._warnings())

    def _delete_options(self, body: bytes, query) -> dict:
        opts = _decode(body) if body else {}
        opts = opts if isinstance(opts, dict) else {}
        policy = query.get("propagationPolicy") or opts.get("propagationPolicy")
        orphan = query.get("orphanDependents", opts.get("orphanDependents"))
        if policy is None and orphan is not None:
            policy = "Orphan" if _truthy(str(orphan)) else "Background"
        if policy not in (None, "Foreground", "Background", "Orphan"):
            raise errors.invalid("", "DeleteOptions", "", [(
                "propagationPolicy", f'Unsupported value: "{policy}": supported values: '
                                     '"Foreground", "Background", "Orphan", "nil"')])
        grace = query.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
        return {"policy": policy, "preconditions": opts.get("preconditions"),
                "dry_run": _dry_run(query, opts),
                "grace": int(grace) if grace is not None else None}

    def delete(self, rt, ns, name, body: bytes, query) -> Response:
        o = self._delete_options(body, query)
        obj, deleted = self.objects.delete(rt, ns or "", name, o["policy"], o["preconditions"],
                                           o["dry_run"], o["grace"])
        headers = {}
        if rt.key == "batch/jobs" and o["policy"] is None:
            headers["Warning"] = ('299 - "child pods are preserved by default when jobs are '
                                  'deleted; set propagationPolicy=Background to remove them or '
                                  'set propagationPolicy=Orphan to suppress this warning"')
        if not deleted or rt.key in _RETURNS_OBJECT or rt.custom:
            out = deepcopy(obj)
            if rt.key == "/pods":
                grace = o["grace"] if o["grace"] is not None else \
                    obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
                out["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                out["metadata"].setdefault("deletionGracePeriodSeconds", grace)
            return Response(200, out, headers)
        details = {"name": name, "kind": rt.plural, "uid": obj["metadata"]["uid"]}
        if rt.group:
            details["group"] = rt.group
        return Response(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "details": details}, headers)

    def delete_collection(self, rt, ns, body: bytes, query) -> Response:
        o = self._delete_options(body, query)
        items, _ = self.select(rt, ns, query)
        gone = self.objects.delete_collection(rt, ns, items, o["policy"], o["dry_run"])
        return Response(200, {"kind": rt.list_kind, "apiVersion": rt.api_version,
                              "metadata": {}, "items": gone})

    def bind(self, ns, name, body: bytes, query) -> Response:
        b = _decode(body) or {}
        name = name or (b.get("metadata") or {}).get("name")
        node = (b.get("target") or {}).get("name")
        if not node:
            raise errors.invalid("", "Binding", name, [("target.name", "Required value")])
        with self.store.lock:
            pod = self.store.get("/pods", ns, name)
            if pod is None:
                raise errors.not_found("", "pods", name)
            bound = pod["spec"].get("nodeName")
            if bound:
                raise errors.conflict("", "pods/binding", name,
                                      f'pod {name} is already assigned to node "{bound}"')
            if not _dry_run(query):
                self.store.mutate("/pods", ns, name, lambda p: bind_pod(p, node))
        return Response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "code": 201})

    # -- logs -------------------------------------------------------------------------------------
    def log(self, ns, name, query) -> Response | Stream:
        pod = self.store.get("/pods", ns, name)
        if pod is None:
            raise errors.not_found("", "pods", name)
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        container = query.get("container")
        if not container:
            if len(names) != 1:
                msg = f"a container name must be specified for pod {name}, choose one of: " \
                      f"[{' '.join(names)}]"
                if inits:
                    msg += f" or one of the init containers: [{' '.join(inits)}]"
                raise errors.bad_request(msg)
            container = names[0]
        elif container not in names and container not in inits:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        if not pod["spec"].get("nodeName"):
            return Response(200, "")  # no kubelet to ask yet: the apiserver returns nothing
        previous = _truthy(query.get("previous"))
        uid = pod["metadata"]["uid"]
        attempt = self.logbook.attempt(uid, container, previous)
        if attempt is None:
            if previous:
                raise errors.bad_request(f'previous terminated container "{container}" in pod '
                                         f'"{name}" not found')
            reason = _waiting_reason(pod, container)
            raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to '
                                     f"start: {reason}")
        lines, _ = self.logbook.snapshot(attempt)
        total = len(lines)
        if query.get("sinceSeconds"):
            cutoff = time.time() - int(query["sinceSeconds"])
            lines = [ln for ln in lines if ln[0] >= cutoff]
        if query.get("tailLines") is not None:
            n = int(query["tailLines"])
            lines = lines[-n:] if n > 0 else []
        stamps = _truthy(query.get("timestamps"))
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        if not _truthy(query.get("follow")) or previous:
            data = format_lines(lines, stamps)
            return Response(200, data[:limit] if limit else data)
        return Stream("text/plain",
                      lambda w: self._follow(w, attempt, lines, total, stamps, limit))

    def _follow(self, writer, attempt, first, seen, stamps, limit) -> None:
        sent = 0

        def emit(chunk) -> bool:
            nonlocal sent
            data = format_lines(chunk, stamps)
            if limit is not None:
                data = data[:max(0, limit - sent)]
            sent += len(data)
            return not data or writer.write(data)

        if first and not emit(first):
            return
        while limit is None or sent < limit:
            lines, finished = self.logbook.snapshot(attempt)
            if len(lines) > seen:
                if not emit(lines[seen:]):
                    return
                seen = len(lines)
                continue
            if finished or self.logbook.closed or not writer.alive():
                return
            self.logbook.wait(attempt, seen, 0.25)


def _node_term(rt, fs) -> str | None:
    """X of a pod field selector with spec.nodeName=X, which the pod index answers."""
    if rt.key != "/pods":
        return None
    return next((val for key, positive, val in fs.terms
                 if key == "spec.nodeName" and positive and val), None)


def _etcd_key(obj: dict) -> str:
    m = obj["metadata"]
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]


def _encode_continue(start: str, rv: int) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": start}
    return base64.b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def _decode_continue(token: str) -> tuple[str, int]:
    # storage.DecodeContinue's checks and words
    try:
        data = json.loads(base64.b64decode(token))
        start, rv = data["start"], int(data["rv"])
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request("continue key is not valid: incorrect encoded start "
                                 "resourceVersion (version meta.k8s.io/v1)") from None
    if data.get("v") != "meta.k8s.io/v1":
        raise errors.bad_request("continue key is not valid: server does not recognize this "
                                 "encoded version")
    if rv == 0:
        raise errors.bad_request("continue key is not valid: incorrect encoded start "
                                 "resourceVersion (version meta.k8s.io/v1)")
    return start, rv


class SerializationCache:
    """Each object's JSON, kept while the object is unchanged: the watch cache sends the
    serialization it made once per object version (cacher/caching_object.go), which is
    what makes a cache-served list cheap for the API server."""

    def __init__(self):
        self._lock = threading.Lock()
        self._json: dict[tuple[str, str], tuple[str, bytes]] = {}

    def _item(self, rt, obj: dict) -> bytes:
        m = obj["metadata"]
        ref, rv = (rt.key, _etcd_key(obj)), m.get("resourceVersion")
        hit = self._json.get(ref)
        if hit is not None and hit[0] == rv:
            return hit[1]
        if not rt.custom:  # typed lists from the real apiserver omit kind/apiVersion on items
            obj = {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}
        data = json.dumps(obj, separators=(",", ":")).encode()
        with self._lock:
            self._json[ref] = (rv, data)
        return data

    def list_body(self, rt, head: dict, items: list[dict]) -> RawJSON:
        start = json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"items":['
        return RawJSON(start, [self._item(rt, o) for o in items], b"]}")


@dataclass(frozen=True)
class RawJSON:
    """A list answer serialised already: its head, each item's cached JSON, its tail. Sent
    in pieces as it is joined (`pieces`), so a 120 MB list is never copied whole and its
    first bytes leave before its last are gathered, as the apiserver's streaming list
    encoder does (1.33, StreamingCollectionEncodingToJSON)."""

    head: bytes
    items: list[bytes]
    tail: bytes

    def __len__(self) -> int:
        return len(self.head) + sum(map(len, self.items)) + max(len(self.items) - 1, 0) + \
            len(self.tail)

    def pieces(self, per_piece: int = 256):
        if not self.items:
            yield self.head + self.tail
            return
        for i in range(0, len(self.items), per_piece):
            piece = b",".join(self.items[i:i + per_piece])
            first, last = i == 0, i + per_piece >= len(self.items)
            yield b"".join((self.head if first else b",", piece, self.tail if last else b""))

    @property
    def data(self) -> bytes:
        return b"".join(self.pieces())


def _waiting_reason(pod: dict, container: str) -> str:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return ((cs.get("state") or {}).get("waiting") or {}).get("reason") or \
                "ContainerCreating"
    return "ContainerCreating"


def bind_pod(pod: dict, node: str) -> None:
    pod["spec"]["nodeName"] = node
    set_condition(pod.setdefault("status", {}), "PodScheduled", "True", now=now_rfc3339())
    pod["status"].pop("nominatedNodeName", None)


