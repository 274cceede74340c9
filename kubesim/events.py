"""core/v1 Event recording, the way client-go's EventRecorder writes them."""

from __future__ import annotations

import time

from .util import new_uid, now_rfc3339


def involved(obj: dict) -> dict:
    m = obj["metadata"]
    ref = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": m["name"],
           "uid": m.get("uid"), "resourceVersion": m.get("resourceVersion")}
    if m.get("namespace"):
        ref["namespace"] = m["namespace"]
    return ref


def record(store, obj: dict, etype: str, reason: str, message: str, component: str,
           host: str | None = None) -> dict:
    """Write an Event about `obj` straight into the store (controllers bypass admission)."""
    ns = obj["metadata"].get("namespace") or "default"
    now = now_rfc3339()
    # client-go names events "<object>.<hex unix nanos>"
    name = f"{obj['metadata']['name']}.{time.time_ns():x}"
    source = {"component": component}
    if host:
        source["host"] = host
    ev = {"kind": "Event", "apiVersion": "v1",
          "metadata": {"name": name, "namespace": ns, "uid": new_uid(),
                       "creationTimestamp": now},
          "involvedObject": involved(obj), "reason": reason, "message": message,
          "source": source, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
          "type": etype, "eventTime": None, "reportingComponent": component,
          "reportingInstance": host or ""}
    with store.lock:
        if store.get("/namespaces", "", ns) is None:
            return ev
        while store.get("/events", ns, name) is not None:
            name += "0"
            ev["metadata"]["name"] = name
        return store.create("/events", ev)

