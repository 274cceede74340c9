"""A kube-scheduler stand-in: filters nodes like the default plugins and binds pods.

Filter order and failure texts follow the real plugins (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit) so FailedScheduling messages
read like a real cluster's: "0/3 nodes are available: 1 node(s) didn't match Pod's
node affinity/selector, 2 Insufficient nvidia.com/gpu."

Pods for a scheduler-plugins scheduler go through the Coscheduling plugin's extension
points one at a time (coscheduling.py cites them): a member is assumed on its node and
waits at Permit until minMember are assumed or bound, or its wait runs out. Time for those
waits comes from `Scheduler.clock` (monotonic seconds), which tests may replace.
"""

from __future__ import annotations

import time
from collections import Counter
from decimal import Decimal

from . import events, kai, workloads
from .controller import Loop
from .coscheduling import (
    GROUP_LABEL,
    PLUGIN,
    Coscheduling,
    Waiting,
    go_duration,
    reconcile_podgroup,
)
from .podutil import get_condition, is_terminal, pod_requests, set_condition
from .quantity import parse_quantity
from .rest import bind_pod
from .store import TooOld
from .util import dig, now_rfc3339
from .volcano import enqueue_phase

DEFAULT = "default-scheduler"
# How each gang scheduler finds a pod's group, and where its PodGroups live.
GANG = {
    "volcano": {"annotation": "scheduling.k8s.io/group-name",
                "key": "scheduling.volcano.sh/podgroups", "ready_phase": "Running"},
    # Coscheduling reads this one label (pkg/util/podgroup.go GetPodGroupLabel).
    "scheduler-plugins": {"label": (GROUP_LABEL,), "key": "scheduling.x-k8s.io/podgroups"},
    "kai": {"annotation": kai.GROUP_ANNOTATION, "key": kai.PODGROUP_KEY},
}


def tolerates(tol: dict, taint: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"
    if tol["key"] != taint.get("key"):
        return False
    return op == "Exists" or (tol.get("value") or "") == (taint.get("value") or "")


def _expr_matches(expr: dict, value: str | None) -> bool:
    op, vals = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in vals
    if op == "NotIn":
        return value is None or value not in vals
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            have, want = int(value), int(vals[0])
        except (TypeError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: dict, node: dict) -> bool:
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term selects nothing
    labels = node["metadata"].get("labels") or {}
    for e in exprs:
        if not _expr_matches(e, labels.get(e.get("key"))):
            return False
    for f in fields:
        value = node["metadata"]["name"] if f.get("key") == "metadata.name" else None
        if not _expr_matches(f, value):
            return False
    return True


def affinity_matches(pod: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    for k, v in (dig(pod, "spec.nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = dig(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        return any(_term_matches(t, node) for t in req.get("nodeSelectorTerms") or [])
    return True


class Usage:
    """Requests of non-terminated pods bound to each node."""

    def __init__(self, pods: list[dict]):
        self.by_node: dict[str, Counter] = {}
        # (protocol, port) -> how many pods hold it: pods bound by hand may share one, and
        # one of them ending must not free it for the other
        self.ports: dict[str, Counter] = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node and not is_terminal(p):
                self.add(node, p)

    def add(self, node: str, pod: dict) -> None:
        c = self.by_node.setdefault(node, Counter())
        for k, v in pod_requests(pod).items():
            c[k] += v
        c["pods"] += 1
        self.ports.setdefault(node, Counter()).update(host_ports(pod))

    def remove(self, node: str, pod: dict) -> None:
        c = self.by_node.get(node)
        if c is None:
            return
        for k, v in pod_requests(pod).items():
            c[k] -= v
        c["pods"] -= 1
        held = self.ports.get(node)
        if held is not None:
            held.subtract(host_ports(pod))

    def copy(self) -> Usage:
        u = Usage([])
        u.by_node = {k: Counter(v) for k, v in self.by_node.items()}
        u.ports = {k: Counter(v) for k, v in self.ports.items()}
        return u


class UsageCache:
    """What the bound pods take of each node, and which pods are not bound yet, kept up to
    date from the pod events rather than recounted every cycle: kube-scheduler's cache
    (pkg/scheduler/backend/cache/cache.go, AddPod/UpdatePod/RemovePod into each NodeInfo)
    and its scheduling queue (backend/queue: unscheduled pods enter activeQ on their add
    event) are fed by its informer the same way. Scanning 20,000-150,000 pods each cycle
    cost the test server more CPU than the client it serves (benchmarks/cli/bench_api.py)."""

    def __init__(self):
        self._usage = Usage([])
        self._counted: dict[tuple[str, str], dict] = {}  # (ns, name) -> the pod as counted
        self._unbound: dict[tuple[str, str], dict] = {}  # live pods without a node
        self._rv: int | None = None

    def current(self, store) -> Usage:
        """This cycle's usage, a copy the cycle may assume pods on. Call under store.lock."""
        events = None
        if self._rv is not None:
            try:
                events = store.events_after("/pods", self._rv)
            except TooOld:  # the history was compacted past us: a relist, as informers do
                events = None
        if events is None:
            self._usage, self._counted, self._unbound = Usage([]), {}, {}
            for pod in store.items("/pods"):
                self._count(pod)
        else:
            for _, etype, obj, _ in events:
                self._uncount(obj)
                if etype != "DELETED":
                    self._count(obj)
        self._rv = store.rv
        return self._usage.copy()

    def unbound(self) -> list[dict]:
        """The live pods no node holds yet, as of the last current()."""
        return list(self._unbound.values())

    def _count(self, pod: dict) -> None:
        if is_terminal(pod):
            return
        m = pod["metadata"]
        ref = (m.get("namespace") or "", m["name"])
        node = pod["spec"].get("nodeName")
        if node:
            self._usage.add(node, pod)
            self._counted[ref] = pod
        else:
            self._unbound[ref] = pod

    def _uncount(self, pod: dict) -> None:
        m = pod["metadata"]
        ref = (m.get("namespace") or "", m["name"])
        self._unbound.pop(ref, None)
        counted = self._counted.pop(ref, None)
        if counted is not None:
            self._usage.remove(counted["spec"]["nodeName"], counted)


def host_ports(pod: dict) -> set[tuple[str, int]]:
    """(protocol, port) a pod takes on its node. The API server defaults hostPort to
    containerPort on the host network (pkg/apis/core/v1/defaults.go, SetDefaults_Pod)."""
    spec = pod.get("spec") or {}
    out = set()
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for p in c.get("ports") or []:
            port = p.get("hostPort") or (p.get("containerPort") if spec.get("hostNetwork") else 0)
            if port:
                out.add((p.get("protocol") or "TCP", int(port)))
    return out


def filter_node(pod: dict, node: dict, usage: Usage) -> list[str]:
    """Failure reasons for this node; empty means the pod fits."""
    spec = node.get("spec") or {}
    tols = pod["spec"].get("tolerations") or []
    if spec.get("unschedulable") and not any(tolerates(t, {
            "key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}) for t in tols):
        return ["node(s) were unschedulable"]
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and \
                not any(tolerates(t, taint) for t in tols):
            return [f"node(s) had untolerated taint {{{taint.get('key')}: "
                    f"{taint.get('value') or ''}}}"]
    if not affinity_matches(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    alloc = (node.get("status") or {}).get("allocatable") or {}
    used = usage.by_node.get(node["metadata"]["name"], Counter())
    reasons = []
    held = usage.ports.get(node["metadata"]["name"])
    if held and any(held[port] > 0 for port in host_ports(pod)):
        # kube-scheduler's NodePorts filter (pkg/scheduler/framework/plugins/nodeports).
        reasons.append("node(s) didn't have free ports for the requested pod ports")
    if used["pods"] + 1 > parse_quantity(alloc.get("pods", "110")):
        reasons.append("Too many pods")
    for res, want in sorted(pod_requests(pod).items(), key=lambda kv: _res_order(kv[0])):
        if want <= 0:
            continue
        have = parse_quantity(alloc[res]) if res in alloc else Decimal(0)
        if want > have - used[res]:
            reasons.append(f"Insufficient {res}")
    return reasons


def _res_order(name: str):
    return ({"cpu": 0, "memory": 1, "ephemeral-storage": 2}.get(name, 3), name)


def fit_message(n_nodes: int, reasons: Counter) -> str:
    if n_nodes == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{n_nodes} nodes are available: {', '.join(parts)}."


class Scheduler(Loop):
    name = "scheduler"

    def __init__(self, store, tick: float = 0.02, clock=time.monotonic):
        super().__init__(tick)
        self.store = store
        self.clock = clock  # seconds; Permit waits and the plugin's caches expire by it
        self.names: dict[str, str | None] = {DEFAULT: None}  # schedulerName -> gang kind
        self.coscheduling = Coscheduling()  # the plugin's state: waiting pods, caches
        self._last_sig = None
        self._reported: dict[str, str] = {}  # pod uid -> last FailedScheduling message
        self._reported_pg: dict[tuple, str] = {}  # (PodGroup uid, reason) -> last event
        self.workload_api = False  # serve_workload_api(): the GangScheduling plugin is on
        self._usage = UsageCache()

    def enable(self, scheduler_name: str, gang: str | None = None) -> None:
        """Act as `scheduler_name` too (gang: 'volcano' or 'scheduler-plugins' semantics)."""
        self.names[scheduler_name] = gang
        self._last_sig = None

    def disable(self, scheduler_name: str) -> None:
        self.names.pop(scheduler_name, None)

    def _step(self) -> None:
        st = self.store
        with st.lock:
            sig = (st.last_rv("/nodes"), st.last_rv("/pods"),
                   *(st.last_rv(g["key"]) for g in GANG.values()), st.last_rv(kai.QUEUE_KEY),
                   st.last_rv(workloads.WORKLOAD_KEY),
                   tuple(self.names))
            now = self.clock()
            if sig == self._last_sig and not self._timer_due(now):
                return  # nothing changed since the last attempt: same answer
            nodes = sorted(st.items("/nodes"), key=lambda n: n["metadata"]["name"])
            pods = st.items("/pods")
            usage = self._usage.current(st)
        self._last_sig = sig
        if "volcano" in self.names.values():
            self._enqueue(nodes, pods)
        if "scheduler-plugins" in self.names.values():
            self._cosched_expire(pods, now)
            self._podgroup_controller(pods)
        pending = [p for p in self._usage.unbound()
                   if (p.get("status") or {}).get("phase", "Pending") == "Pending"
                   and not p["metadata"].get("deletionTimestamp")
                   and not p["spec"].get("schedulingGates")
                   # Pods with DRA claims are placed by the DynamicResources model (dra.py).
                   and not p["spec"].get("resourceClaims")
                   and p["spec"].get("schedulerName", DEFAULT) in self.names
                   and p["metadata"]["uid"] not in self.coscheduling.waiting]  # assumed
        if not pending:
            return
        pending.sort(key=lambda p: (-(p["spec"].get("priority") or 0),
                                    p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        groups: dict[tuple, list[dict]] = {}
        cosched: list[dict] = []
        gangs: dict[tuple, list[dict]] = {}
        for pod in pending:
            if self.workload_api and (key := workloads.gang_key(pod)) is not None:
                gangs.setdefault(key, []).append(pod)
                continue
            gang = self.names.get(pod["spec"].get("schedulerName", DEFAULT))
            if gang == "scheduler-plugins":
                cosched.append(pod)
                continue
            group = self._group_of(pod, gang) if gang else None
            if gang == "kai" and not group:
                continue  # KAI schedules a pod once the podgrouper has given it a PodGroup
            if group:
                groups.setdefault((gang, pod["metadata"]["namespace"], group), []).append(pod)
                continue
            node, msg = self._place(pod, nodes, usage)
            if node:
                self._bind(pod, node, usage)
            else:
                self._unschedulable(pod, msg)
        for (gang, ns, group), members in groups.items():
            self._schedule_gang(gang, ns, group, members, pods, nodes, usage)
        if cosched:
            self._cosched_cycle(cosched, pods, nodes, usage, now)
        for key, members in gangs.items():
            self._workload_gang(key, members, pods, nodes, usage)

    def _enqueue(self, nodes, pods) -> None:
        """Volcano's enqueue action for PodGroups not yet Inqueue (volcano.py)."""
        key = GANG["volcano"]["key"]
        for pg in self.store.items(key):
            phase = dig(pg, "status.phase")
            if phase not in (None, "", "Pending"):
                continue
            want = enqueue_phase(pg, nodes, pods)
            if want != phase:
                m = pg["metadata"]
                self.store.mutate(key, m["namespace"], m["name"], lambda g, w=want: g.setdefault(
                    "status", {}).__setitem__("phase", w))

    @staticmethod
    def _group_of(pod: dict, gang: str) -> str | None:
        spec = GANG[gang]
        m = pod["metadata"]
        if "annotation" in spec:
            return (m.get("annotations") or {}).get(spec["annotation"])
        labels = m.get("labels") or {}
        return next((labels[k] for k in spec["label"] if labels.get(k)), None)

    def _place(self, pod, nodes, usage) -> tuple[str | None, str]:
        reasons: Counter = Counter()
        for node in nodes:
            failed = filter_node(pod, node, usage)
            if not failed:
                return node["metadata"]["name"], ""
            reasons.update(failed)
        return None, fit_message(len(nodes), reasons)

    def _bind(self, pod, node, usage, component=DEFAULT, assumed=False) -> None:
        m = pod["metadata"]
        bound = self.store.mutate("/pods", m["namespace"], m["name"], lambda p: bind_pod(p, node)
                                  if not p["spec"].get("nodeName") else False)
        if bound is None:
            if assumed:
                usage.remove(node, pod)  # ForgetPod
            return
        if not assumed:
            usage.add(node, pod)
        self._reported.pop(m["uid"], None)
        events.record(self.store, bound, "Normal", "Scheduled",
                      f"Successfully assigned {m['namespace']}/{m['name']} to {node}", component)

    def _unschedulable(self, pod, msg, component=DEFAULT, reason="FailedScheduling") -> None:
        m = pod["metadata"]
        cond = get_condition(pod, "PodScheduled")
        if not cond or cond.get("message") != msg or cond.get("status") != "False":
            self.store.mutate("/pods", m["namespace"], m["name"], lambda p: set_condition(
                p.setdefault("status", {}), "PodScheduled", "False", "Unschedulable", msg,
                now_rfc3339()))
        if self._reported.get(m["uid"]) != msg:
            self._reported[m["uid"]] = msg
            events.record(self.store, pod, "Warning", reason, msg, component)

    def _schedule_gang(self, gang, ns, group, members, pods, nodes, usage) -> None:
        """Volcano: bind every pending member only if minMember pods can run at once."""
        spec = GANG[gang]
        component = next(n for n, g in self.names.items() if g == gang)
        pg = self.store.get(spec["key"], ns, group)
        if pg is None:
            return  # real gang schedulers leave pods pending until their PodGroup exists
        if gang == "kai":
            self._kai_gang(pg, members, pods, nodes, usage, component)
            return
        if dig(pg, "status.phase") in (None, "", "Pending"):
            msg = ("pod group is not enqueued (Pending): its minResources do not fit the "
                   "idle resources")
            for pod in members:
                self._unschedulable(pod, msg, component)
            return
        min_member = int(dig(pg, "spec.minMember") or 1)
        bound = [p for p in pods if p["spec"].get("nodeName") and not is_terminal(p)
                 and p["metadata"]["namespace"] == ns and self._group_of(p, gang) == group]
        total = len(bound) + len(members)
        trial, placed, msg = usage.copy(), [], ""
        if total < min_member:
            msg = (f"{len(members)}/{total} tasks in gang unschedulable: pod group is not ready, "
                   f"{total} Pending, {min_member} minAvailable")
        else:
            for pod in members:
                node, why = self._place(pod, nodes, trial)
                if node is None:
                    msg = why
                    break
                trial.add(node, pod)
                placed.append((pod, node))
        if msg:
            for pod in members:
                self._unschedulable(pod, msg, component)
            # Volcano keeps an enqueued group Inqueue while it cannot be allocated.
            self._pg_status(spec["key"], ns, group, "Inqueue", msg)
            return
        for pod, node in placed:
            self._bind(pod, node, usage, component)
        self._pg_status(spec["key"], ns, group, spec["ready_phase"], None)

    def _kai_gang(self, pg, members, pods, nodes, usage, component) -> None:
        """KAI's allocate action for one PodGroup (kai.py cites it)."""
        m = pg["metadata"]
        queue = dig(pg, "spec.queue") or kai.DEFAULT_QUEUE
        if self.store.get(kai.QUEUE_KEY, "", queue) is None:
            return  # "Queue '<q>' does not exist": the PodGroup is left out of the session
        min_member = int(dig(pg, "spec.minMember") or 1)
        group = m["name"]
        alive = [p for p in pods if not is_terminal(p) and p["metadata"]["namespace"] ==
                 m["namespace"] and kai.podgroup_of(p) == group]
        gated = [p for p in alive if p["spec"].get("schedulingGates")]
        if len(alive) - len(gated) < min_member:
            kai.record_podgroup_event(self.store, pg, "NotReady", kai.not_ready_message(
                min_member, len(alive), len(gated)), self._reported_pg)
            return
        bound = [p for p in alive if p["spec"].get("nodeName")]
        trial, placed, per_node = usage.copy(), [], []
        for pod in members:
            node, per_node = self._place_reasons(pod, nodes, trial)
            if node is None:
                break
            trial.add(node, pod)
            placed.append((pod, node))
        if len(placed) < len(members) and len(bound) + len(placed) < min_member:
            msg = kai.gang_message(len(bound) + len(placed), min_member, kai.fit_error(per_node))
            kai.record_podgroup_event(self.store, pg, "Unschedulable", msg, self._reported_pg)
            self.store.mutate(kai.PODGROUP_KEY, m["namespace"], group, lambda g: kai.
                              mark_unschedulable(g.setdefault("status", {}), msg))
            for pod in members:  # markTaskUnschedulable: v1.PodReasonUnschedulable
                self._unschedulable(pod, msg, component, reason="Unschedulable")
            return
        for pod, node in placed:
            self._bind(pod, node, usage, component)
        self.store.mutate(kai.PODGROUP_KEY, m["namespace"], group, lambda g: g.setdefault(
            "status", {}).__setitem__("schedulingConditions", []))

    def _workload_gang(self, key, members, pods, nodes, usage) -> None:
        """kube-scheduler's GangScheduling plugin for one pod group (workloads.py)."""
        ns, name, pod_group, _ = key
        pol = workloads.policy(self.store.get(workloads.WORKLOAD_KEY, ns, name), pod_group)
        if pol is None:
            return  # PreEnqueue: no Workload (or no such pod group) yet
        need = workloads.min_count(pol)
        if need is None:  # basic policy: scheduled one by one
            for pod in members:
                node, msg = self._place(pod, nodes, usage)
                if node:
                    self._bind(pod, node, usage)
                else:
                    self._unschedulable(pod, msg)
            return
        group = [p for p in pods if not is_terminal(p) and workloads.gang_key(p) == key]
        if len(group) < need:
            return  # PreEnqueue: fewer than minCount pods observed
        assigned = sum(1 for p in group if p["spec"].get("nodeName"))
        trial, placed, unfit = usage.copy(), [], []
        for pod in members:
            node, msg = self._place(pod, nodes, trial)
            if node is None:
                unfit.append((pod, msg))
                continue
            trial.add(node, pod)
            placed.append((pod, node))
        for pod, msg in unfit:
            self._unschedulable(pod, msg)
        if assigned + len(placed) < need:
            return  # the fitting members wait at Permit: nothing is bound
        for pod, node in placed:
            self._bind(pod, node, usage)

    def _place_reasons(self, pod, nodes, usage) -> tuple[str | None, list[list[str]]]:
        per_node = []
        for node in nodes:
            failed = filter_node(pod, node, usage)
            if not failed:
                return node["metadata"]["name"], []
            per_node.append(failed)
        return None, per_node

    def _pg_status(self, key, ns, name, phase, msg) -> None:
        def edit(pg):
            status = pg.setdefault("status", {})
            status["phase"] = phase
            if msg:
                set_condition(status, "Unschedulable", "True", "NotEnoughResources", msg,
                              now_rfc3339())
            else:
                status["conditions"] = [c for c in status.get("conditions") or []
                                        if c.get("type") != "Unschedulable"]
        self.store.mutate(key, ns, name, edit)

    # -- scheduler-plugins: the Coscheduling plugin (coscheduling.py) ---------------------------
    def _timer_due(self, now: float) -> bool:
        cs = self.coscheduling
        return any(w.deadline <= now for w in cs.waiting.values()) or any(
            t <= now for t in (*cs.backed_off.values(), *cs.permitted_pg.values()))

    def _cosched_component(self) -> str:
        return next(n for n, g in self.names.items() if g == "scheduler-plugins")

    def _cosched_expire(self, pods: list[dict], now: float) -> None:
        """Waiting pods deleted or timed out are rejected; the group's others with them."""
        cs = self.coscheduling
        live = {p["metadata"]["uid"]: p for p in pods}
        for uid, w in list(cs.waiting.items()):
            p = live.get(uid)
            if p is None or p["spec"].get("nodeName") or p["metadata"].get("deletionTimestamp"):
                # The pod went away (or was bound by someone else): the framework rejects it
                # and Unreserve rejects its siblings.
                cs.waiting.pop(uid, None)
                self._after_rejection(w, pods)
        for w in sorted(cs.waiting.values(), key=lambda w: w.deadline):
            if w.pod["metadata"]["uid"] in cs.waiting and w.deadline <= now:
                self._reject_waiting(w, f"rejected due to timeout after waiting "
                                        f"{go_duration(w.wait_seconds)} at plugin {PLUGIN}", pods)
        cs.prune(pods, now)

    def _reject_waiting(self, w, reason: str, pods: list[dict]) -> None:
        """WaitOnPermit rejected: bindingCycle's FitError of one node, then
        handleBindingCycleError (Unreserve, ForgetPod) and the failure handler."""
        if self.coscheduling.waiting.pop(w.pod["metadata"]["uid"], None) is None:
            return
        self._unschedulable(w.pod, f"0/1 nodes are available: 1 {reason}.", w.scheduler)
        self._after_rejection(w, pods)

    def _after_rejection(self, w, pods: list[dict]) -> None:
        ns, name = w.group.split("/", 1)
        group_exists = self.store.get("scheduling.x-k8s.io/podgroups", ns, name) is not None
        for sibling in self.coscheduling.unreserve(w.pod, group_exists):
            self._reject_waiting(sibling, "rejection in Unreserve", pods)

    def _podgroup_controller(self, pods: list[dict]) -> None:
        """scheduler-plugins-controller's PodGroupReconciler (coscheduling.reconcile_podgroup)."""
        key = GANG["scheduler-plugins"]["key"]
        for pg in self.store.items(key):
            status = reconcile_podgroup(pg, pods)
            if status is not None:
                m = pg["metadata"]
                self.store.mutate(key, m["namespace"], m["name"],
                                  lambda g, s=status: g.__setitem__("status", s))

    def _cosched_cycle(self, pending: list[dict], pods, nodes, usage, now: float) -> None:
        """One scheduling cycle per pod, in Coscheduling.Less order, against this scheduler's
        cache: bound pods plus the pods it has assumed (waiting at Permit)."""
        cs = self.coscheduling
        key = GANG["scheduler-plugins"]["key"]
        cache = usage.copy()
        for w in cs.waiting.values():
            cache.add(w.node, w.pod)

        def pg_of(pod):
            name = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
            return self.store.get(key, pod["metadata"]["namespace"], name) if name else None

        ordered = sorted(((cs.sort_key(p, pg_of(p)), p) for p in pending), key=lambda t: t[0])
        for _, pod in ordered:
            self._cosched_one(pod, pg_of(pod), pods, nodes, cache, usage, now)

    def _cosched_one(self, pod, pg, pods, nodes, cache, usage, now) -> None:
        cs = self.coscheduling
        component = pod["spec"].get("schedulerName")
        group = cs.group_of(pod)
        if group is None:  # not in a group: the plugin lets it through
            node, msg = self._place(pod, nodes, cache)
            if node:
                self._bind(pod, node, cache, component)
                usage.add(node, pod)
            else:
                self._unschedulable(pod, msg, component)
            return
        if not nodes:
            self._unschedulable(pod, fit_message(0, Counter()), component)
            return
        # PreFilter, then Filter; either failing runs PostFilter (schedulingCycle).
        pre = cs.pre_filter(pod, pg, pods, nodes, now)
        node, why = (None, "") if pre else self._place(pod, nodes, cache)
        if node is None:
            post, rejected = cs.post_filter(pod, pg, pods, now)
            for w in rejected:
                self._reject_waiting(w, "optimistic rejection in PostFilter", pods)
            # framework.FitError.Error(): "0/N nodes are available: <PreFilter message>." or
            # the Filter histogram, then " <PostFilter message>."
            msg = f"0/{len(nodes)} nodes are available: {pre}." if pre else why
            if post:
                msg += f" {post}."
            self._unschedulable(pod, msg, component)
            return
        # Reserve (assume on the node), then Permit.
        cache.add(node, pod)
        verdict = cs.permit(pod, pg, pods)
        if verdict == "PodGroup not found":
            cache.remove(node, pod)  # Unreserve (no group: nothing else) and ForgetPod
            self._unschedulable(pod, "0/1 nodes are available: 1 PodGroup not found.", component)
            return
        if verdict == "Wait":
            wait = cs.wait_seconds(pg)
            cs.waiting[pod["metadata"]["uid"]] = Waiting(pod, node, group, now + wait, wait,
                                                         component)
            return
        # Success: allow every waiting sibling, then bind them and this pod.
        allowed = [w for w in cs.waiting.values() if w.group == group]
        for w in allowed:
            del cs.waiting[w.pod["metadata"]["uid"]]
        for w in allowed:
            self._bind(w.pod, w.node, cache, w.scheduler, assumed=True)
            usage.add(w.node, w.pod)
        self._bind(pod, node, cache, component, assumed=True)
        usage.add(node, pod)
