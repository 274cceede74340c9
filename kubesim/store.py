"""Object storage: per-resource, per-namespace dicts, a global resourceVersion and watch history.

Stored objects are never mutated in place: every write stores a fresh dict.  That
lets readers take references under the lock and serialise them outside it, which
is what keeps a 4,000-pod list cheap.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

from .util import deepcopy


class TooOld(Exception):
    def __init__(self, oldest: int):
        super().__init__(oldest)
        self.oldest = oldest


def _owner_uids(obj: dict) -> set[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {r.get("uid") for r in refs if r.get("uid")}


def _nsname(obj: dict) -> tuple[str, str]:
    m = obj["metadata"]
    return m.get("namespace") or "", m["name"]


class Store:
    """Keys are ResourceType.key strings ('/pods', 'batch/jobs')."""

    def __init__(self, history: int = 200_000):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.closed = False
        self._rv = 100  # real clusters never start at 0; catches clients treating RV as a count
        self._objs: dict[str, dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
        self._owners: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        self._history = history
        # key -> (rvs, events); events are (rv, type, obj, old_obj)
        self._log: dict[str, tuple[list[int], list[tuple]]] = defaultdict(lambda: ([], []))
        self._trimmed: dict[str, int] = defaultdict(int)  # highest rv dropped from the log
        self._last: dict[str, int] = defaultdict(int)
        # Pods by spec.nodeName: the index the API server's watch cache keeps for pods
        # (pkg/registry/core/pod/storage: Indexers, pod.NodeNameIndexFunc), which serves
        # the kubelets' and submit's `fieldSelector=spec.nodeName=X` without a scan.
        self._by_node: dict[str, set[tuple[str, str]]] = defaultdict(set)

    # -- reads -------------------------------------------------------------------------------
    @property
    def rv(self) -> int:
        return self._rv

    def last_rv(self, key: str) -> int:
        """Latest write to any object of this resource: cheap change detection for loops."""
        return self._last[key]

    def get(self, key: str, ns: str, name: str) -> dict | None:
        # .get() chains: readers must not insert into the defaultdicts without the lock.
        by_ns = self._objs.get(key)
        objs = by_ns.get(ns or "") if by_ns is not None else None
        return objs.get(name) if objs is not None else None

    def items(self, key: str, ns: str | None = None) -> list[dict]:
        with self.lock:
            by_ns = self._objs.get(key) or {}
            if ns is not None:
                return list(by_ns[ns].values()) if ns in by_ns else []
            out = []
            for objs in by_ns.values():
                out.extend(objs.values())
            return out

    def items_at(self, key: str, ns: str | None, rv: int) -> list[dict]:
        """The objects as they were at resourceVersion `rv` (etcd's MVCC read at a revision):
        today's, with the logged events after `rv` undone; TooOld once the log no longer
        reaches back that far (etcd compacted the revision)."""
        with self.lock:
            if rv < self._trimmed[key]:
                raise TooOld(self._trimmed[key])
            by_name = {_nsname(o): o for o in self.items(key, ns)}
            for _, etype, obj, old in reversed(self.events_after(key, rv)):
                ref = _nsname(obj)
                if ns is not None and ref[0] != ns:
                    continue
                if etype == "ADDED":
                    by_name.pop(ref, None)
                else:  # MODIFIED, DELETED: what it was before
                    by_name[ref] = old
            return list(by_name.values())

    def compact(self) -> None:
        """Forget the history up to now, as etcd's periodic compaction does (the API server
        asks for one every --etcd-compaction-interval, 5 minutes by default)."""
        with self.lock:
            for key, (rvs, evs) in self._log.items():
                if rvs:
                    self._trimmed[key] = rvs[-1]
                    del rvs[:]
                    del evs[:]
            for key in list(self._last):
                self._trimmed[key] = max(self._trimmed[key], self._last[key])

    def namespaced_keys(self, ns: str) -> list[str]:
        with self.lock:
            return [k for k, by_ns in self._objs.items() if by_ns.get(ns)]

    def dependents(self, uid: str) -> list[tuple[str, str, str]]:
        with self.lock:
            return sorted(self._owners.get(uid, ()))

    # -- writes (caller holds no invariants beyond a well-formed object) -------------------------
    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    def pods_on(self, node: str) -> list[dict]:
        with self.lock:
            by_ns = self._objs.get("/pods") or {}
            return [by_ns[ns][name] for ns, name in self._by_node.get(node, ())]

    def _index(self, key: str, obj: dict | None, old: dict | None) -> None:
        if key == "/pods":
            for o, op in ((old, "discard"), (obj, "add")):
                node = (o or {}).get("spec", {}).get("nodeName") if o else None
                if node:
                    getattr(self._by_node[node], op)(_nsname(o))
        ref = None
        if obj is not None or old is not None:
            ns, name = _nsname(obj if obj is not None else old)
            ref = (key, ns, name)
        for uid in _owner_uids(old) if old else ():
            s = self._owners.get(uid)
            if s:
                s.discard(ref)
                if not s:
                    del self._owners[uid]
        for uid in _owner_uids(obj) if obj else ():
            self._owners[uid].add(ref)

    def _record(self, key: str, etype: str, obj: dict, old: dict | None, rv: int) -> None:
        rvs, evs = self._log[key]
        rvs.append(rv)
        evs.append((rv, etype, obj, old))
        if len(rvs) > self._history:
            drop = len(rvs) // 2
            self._trimmed[key] = rvs[drop - 1]
            del rvs[:drop]
            del evs[:drop]
        self._last[key] = rv
        self.cond.notify_all()

    def create(self, key: str, obj: dict) -> dict:
        return self._write(key, obj, "ADDED")

    def put(self, key: str, obj: dict) -> dict:
        """Replace a stored object (KeyError when there is none)."""
        return self._write(key, obj, "MODIFIED")

    def _write(self, key: str, obj: dict, etype: str) -> dict:
        with self.lock:
            ns, name = _nsname(obj)
            old = self._objs[key][ns][name] if etype == "MODIFIED" else None
            rv = self._bump()
            obj["metadata"]["resourceVersion"] = str(rv)
            self._objs[key][ns][name] = obj
            self._index(key, obj, old)
            self._record(key, etype, obj, old, rv)
            return obj

    def remove(self, key: str, ns: str, name: str) -> dict | None:
        with self.lock:
            objs = self._objs[key].get(ns or "")
            old = objs.pop(name, None) if objs is not None else None
            if old is None:
                return None
            rv = self._bump()
            # The DELETED event carries the object with the deletion's resourceVersion.
            gone = dict(old)
            gone["metadata"] = {**old["metadata"], "resourceVersion": str(rv)}
            self._index(key, None, old)
            self._record(key, "DELETED", gone, old, rv)
            return gone

    def mutate(self, key: str, ns: str, name: str, fn) -> dict | None:
        """Atomic read-modify-write for controllers: fn(copy) edits it; returning False skips."""
        with self.lock:
            cur = self.get(key, ns, name)
            if cur is None:
                return None
            new = deepcopy(cur)
            if fn(new) is False or new == cur:
                return cur
            return self.put(key, new)

    def drop_resource(self, key: str) -> None:
        with self.lock:
            for ns, objs in list(self._objs.get(key, {}).items()):
                for name in list(objs):
                    self.remove(key, ns, name)

    # -- watch support ------------------------------------------------------------------------
    def events_after(self, key: str, rv: int) -> list[tuple]:
        """Events with resourceVersion > rv; TooOld when history no longer reaches back."""
        with self.lock:
            if rv < self._trimmed[key]:
                raise TooOld(self._trimmed[key])
            rvs, evs = self._log[key]
            i = bisect.bisect_right(rvs, rv)
            return evs[i:]

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.cond.notify_all()
