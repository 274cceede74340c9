"""ResourceQuota and LimitRange admission for pods, and the quota controller's status.used.

Modelled on:
- k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go (checkRequest): a pod
  whose usage would take any tracked resource past `hard` is refused with 403
  `exceeded quota: NAME, requested: R=V, used: R=V, limited: R=V` (only the resources
  over the limit, sorted); a pod missing a request or limit the quota tracks gets
  `failed quota: NAME: must specify limits.cpu,limits.memory`.
- pkg/quota/v1/evaluator/core/pods.go (PodUsageFunc, podComputeUsageHelper): what a pod
  uses: `pods` and `count/pods`, `requests.cpu` (= `cpu`), `requests.memory` (= `memory`),
  `limits.cpu`, `limits.memory`, and `requests.<extended resource>` (extended resources
  have no `limits.` form in quota); terminal pods use nothing. Scopes are not modelled.
- pkg/controller/resourcequota (status.hard/status.used): recomputed here from the live
  pods every tick, as if the controller were always in sync; admission counts live pods,
  so two creates in one tick cannot both take the last slot.
- plugin/pkg/admission/limitranger/admission.go (mergePodResourceRequirements): type
  Container `default` fills missing limits, `defaultRequest` missing requests, and the
  `kubernetes.io/limit-ranger` annotation says what was set; `max` is checked after.
  pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem: defaultRequest defaults to
  default, default to max.
"""

from __future__ import annotations

from decimal import Decimal

from . import errors
from .controller import Loop
from .podutil import container_requests, is_terminal
from .quantity import canonical, fmt, parse_quantity

_STANDARD = ("cpu", "memory")
_LIMIT_RANGER = "kubernetes.io/limit-ranger"


def _fmt(v: Decimal) -> str:
    """resource.Quantity's String() for sums: binary suffixes for whole Mi/Gi amounts."""
    if v == v.to_integral_value() and v >= 2**20:
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20)):
            if v % size == 0:
                return f"{int(v // size)}{suffix}"
    return fmt(v)


def pod_usage(pod: dict) -> dict[str, Decimal]:
    """What a non-terminal pod counts against a quota (pods.go PodUsageFunc)."""
    if is_terminal(pod):
        return {}
    usage = {"pods": Decimal(1), "count/pods": Decimal(1)}
    spec = pod.get("spec") or {}
    limits: dict[str, Decimal] = {}
    requests: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            requests[k] = requests.get(k, Decimal(0)) + v
        for k, v in ((c.get("resources") or {}).get("limits") or {}).items():
            limits[k] = limits.get(k, Decimal(0)) + parse_quantity(v)
    for k, v in requests.items():
        usage[f"requests.{k}"] = v
        if k in _STANDARD:
            usage[k] = v
    for k in _STANDARD:
        if k in limits:
            usage[f"limits.{k}"] = limits[k]
    return usage


def _required_missing(pod: dict, hard: dict) -> list[str]:
    """pods.go Constraints: every container must set what the quota tracks for cpu/memory."""
    missing = set()
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        lim = res.get("limits") or {}
        for r in _STANDARD:
            if (f"requests.{r}" in hard or r in hard) and r not in req:
                missing.add(f"requests.{r}" if f"requests.{r}" in hard else r)
            if f"limits.{r}" in hard and r not in lim:
                missing.add(f"limits.{r}")
    return sorted(missing)


def namespace_usage(store, ns: str, skip_uid: str | None = None) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for p in store.items("/pods", ns):
        if p["metadata"].get("uid") == skip_uid:
            continue
        for k, v in pod_usage(p).items():
            total[k] = total.get(k, Decimal(0)) + v
    return total


def admit_quota(rt, obj: dict, store) -> None:
    if rt.key != "/pods":
        return
    ns = obj["metadata"]["namespace"]
    quotas = store.items("/resourcequotas", ns)
    if not quotas:
        return
    requested = pod_usage(obj)
    used = namespace_usage(store, ns, obj["metadata"].get("uid"))
    name = obj["metadata"].get("name")
    for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        hard = (q.get("spec") or {}).get("hard") or {}
        missing = _required_missing(obj, hard)
        if missing:
            raise errors.forbidden("", "pods", name, f"failed quota: {q['metadata']['name']}: "
                                   f"must specify {','.join(missing)}")
        over = sorted(k for k in hard if k in requested
                      and used.get(k, Decimal(0)) + requested[k] > parse_quantity(hard[k]))
        if over:
            def show(values, over=over):
                return ",".join(f"{k}={_fmt(values.get(k, Decimal(0)))}" for k in over)
            raise errors.forbidden("", "pods", name, (
                f"exceeded quota: {q['metadata']['name']}, requested: {show(requested)}, "
                f"used: {show(used)}, limited: "
                + ",".join(f"{k}={hard[k]}" for k in over)))


def default_limit_range(obj: dict) -> None:
    """SetDefaults_LimitRangeItem for type Container."""
    for item in (obj.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        if item.get("max") and not item.get("default"):
            item["default"] = dict(item["max"])
        if item.get("default"):
            item["defaultRequest"] = {**item["default"], **(item.get("defaultRequest") or {})}
        if item.get("min") and not item.get("defaultRequest"):
            item["defaultRequest"] = dict(item["min"])


def apply_limit_ranges(rt, obj: dict, store) -> None:
    """LimitRanger: fill defaults into a new pod's containers, then check `max`."""
    if rt.key != "/pods":
        return
    items = [i for lr in store.items("/limitranges", obj["metadata"]["namespace"])
             for i in (lr.get("spec") or {}).get("limits") or [] if i.get("type") == "Container"]
    if not items:
        return
    said = []
    for c in (obj.get("spec") or {}).get("containers") or []:
        res = c.setdefault("resources", {})
        set_req, set_lim = [], []
        for item in items:
            for k, v in (item.get("default") or {}).items():
                if k not in (res.get("limits") or {}):
                    res.setdefault("limits", {})[k] = canonical(v)
                    set_lim.append(k)
            for k, v in (item.get("defaultRequest") or {}).items():
                if k not in (res.get("requests") or {}):
                    res.setdefault("requests", {})[k] = canonical(v)
                    set_req.append(k)
        set_req, set_lim = sorted(set(set_req)), sorted(set(set_lim))
        if set_req:
            said.append(f"{', '.join(set_req)} request for container {c['name']}")
        if set_lim:
            said.append(f"{', '.join(set_lim)} limit for container {c['name']}")
        for item in items:
            for k, v in (item.get("max") or {}).items():
                lim = (res.get("limits") or {}).get(k)
                if lim is None:
                    raise errors.forbidden("", "pods", obj["metadata"].get("name"),
                                           f"maximum {k} usage per Container is {v}.  No "
                                           "limit is specified")
                if parse_quantity(lim) > parse_quantity(v):
                    raise errors.forbidden("", "pods", obj["metadata"].get("name"),
                                           f"maximum {k} usage per Container is {v}, but "
                                           f"limit is {lim}")
    if said:
        obj["metadata"].setdefault("annotations", {})[_LIMIT_RANGER] = \
            "LimitRanger plugin set: " + "; ".join(said)


class QuotaController(Loop):
    """status.hard = spec.hard, status.used = the live pods' usage of what hard tracks."""

    name = "resourcequota"

    def __init__(self, store, tick: float = 0.02):
        super().__init__(tick)
        self.store = store

    def _step(self) -> None:
        with self.store.lock:
            quotas = self.store.items("/resourcequotas")
        for q in quotas:
            m = q["metadata"]
            hard = (q.get("spec") or {}).get("hard") or {}
            with self.store.lock:
                used = namespace_usage(self.store, m["namespace"])
            status = {"hard": dict(hard),
                      "used": {k: _fmt(used.get(k, Decimal(0))) for k in hard}}
            if q.get("status") != status:
                def write(obj, status=status):
                    obj["status"] = status
                self.store.mutate("/resourcequotas", m["namespace"], m["name"], write)
