"""scheduler-plugins' Coscheduling plugin and its PodGroup controller, as a client meets them.

Modelled on github.com/kubernetes-sigs/scheduler-plugins v0.34.7 (the release its
as-a-second-scheduler Helm chart installs as `scheduler-plugins-scheduler`; HEAD behaves
the same), running inside kube-scheduler v1.35 (its go.mod):

- Pods join a group by the label scheduling.x-k8s.io/pod-group only
  (pkg/util/podgroup.go GetPodGroupLabel).
- QueueSort, Coscheduling.Less (pkg/coscheduling/coscheduling.go): priority, then the
  PodGroup's creationTimestamp, or the time the group last failed when it did
  (core.go GetCreationTimestamp, MarkPodGroupScheduleFailure), then "<ns>/<pod>".
- PreFilter, PodGroupManager.PreFilter (pkg/coscheduling/core/core.go): a pod whose
  PodGroup does not exist passes; a group in the backoff cache fails ("podGroup <ns>/<pg>
  failed recently"); fewer non-terminal pods with the label than minMember fails ("pre-filter
  pod <pod> cannot find enough sibling pods, current pods number: <n>, minMember of group:
  <m>"); gated pods that leave the rest short fail ("... cannot proceed due to gated pods in
  the same PodGroup"); spec.minResources (plus pods = minMember) must fit the free resources
  summed over nodes, the group's own pods not counted (CheckClusterResource, "resource gap:
  %v"), remembered for the plugin's permit wait in permittedPG.
- PostFilter, Coscheduling.PostFilter: when a member cannot be placed, unless enough members
  are assigned already or the gap (minMember - assigned) / minMember is at most
  podGroupRejectPercentage (10 by default, apis/config/v1/defaults.go), every waiting member is
  rejected ("optimistic rejection in PostFilter"), the group is backed off for
  podGroupBackoffSeconds (0 by default: no backoff) and marked failed, and the pod's message
  ends "PodGroup <ns>/<pg> gets rejected due to Pod <pod> is unschedulable even after
  PostFilter".
- Reserve/Permit, Coscheduling.Permit and PodGroupManager.Permit: a member that passes the
  filters is assumed on its node (kube-scheduler's cache: schedule_one.go schedulingCycle,
  sched.assume), so later pods of this scheduler see those resources taken, while the API
  still shows the pod unbound. When the assumed/bound members reach minMember, every waiting
  member is allowed and bound; otherwise the pod waits at Permit for the PodGroup's
  spec.scheduleTimeoutSeconds, or when that is unset or 0 the plugin's permitWaitingTimeSeconds
  (util.GetWaitTimeDuration; 60 s by default, 10 s in the chart's values.yaml, which this model
  installs). A pod whose PodGroup does not exist is rejected here: "PodGroup not found".
- Timeout, kube-scheduler framework/runtime/waiting_pods_map.go newWaitingPod: "rejected due to
  timeout after waiting <d> at plugin Coscheduling"; bindingCycle turns a rejection into a
  FitError of one node ("0/1 nodes are available: 1 <reason>."), handleBindingCycleError runs
  Unreserve and forgets the assumed pod, releasing its resources; Coscheduling.Unreserve
  rejects the group's other waiting pods ("rejection in Unreserve") and marks the group failed.
  Every rejected pod goes back to the queue, Pending and PodScheduled=False/Unschedulable.
- PodGroup status, pkg/controllers/podgroup_controller.go Reconcile (the separate
  scheduler-plugins-controller): "" -> Pending; Pending -> Scheduling once the group has
  minMember pods (status.occupiedBy from the first pod's owners); afterwards
  status.running/succeeded/failed are counted and the phase is Pending (too few pods),
  Scheduling, Running (running + succeeded >= minMember), Failed (a failed pod and
  failed + running + succeeded >= minMember) or Finished (succeeded >= minMember), the last two
  final. There is no Scheduled phase, no status.scheduled and no condition in this version.
  The controller lists pods by label only, in every namespace, as upstream does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from .podutil import is_terminal, pod_requests
from .quantity import parse_quantity
from .util import dig

PODGROUP_KEY = "scheduling.x-k8s.io/podgroups"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PLUGIN = "Coscheduling"
DEFAULT_WAIT_SECONDS = 60  # util.DefaultWaitTime
# kube-scheduler's informers leave out terminal pods (field selector status.phase!=Succeeded,
# status.phase!=Failed), so the plugin's pod lister and assigned counts never see them.


@dataclass
class CoschedulingArgs:
    """CoschedulingArgs as the chart configures them (pluginConfig in values.yaml)."""
    permit_waiting_time_seconds: float = 10
    pod_group_backoff_seconds: float = 0
    pod_group_reject_percentage: int = 10


@dataclass
class Waiting:
    """A pod assumed on `node` and waiting at Permit (framework waitingPod)."""
    pod: dict
    node: str
    group: str  # "<ns>/<pg>"
    deadline: float
    wait_seconds: float
    scheduler: str


@dataclass
class Coscheduling:
    args: CoschedulingArgs = field(default_factory=CoschedulingArgs)
    waiting: dict[str, Waiting] = field(default_factory=dict)  # pod uid -> Waiting
    permitted: dict[str, set] = field(default_factory=dict)  # assignedPodsByPG (Permit's part)
    backed_off: dict[str, float] = field(default_factory=dict)  # backedOffPG: group -> expiry
    permitted_pg: dict[str, float] = field(default_factory=dict)  # permittedPG: group -> expiry
    last_failed: dict[str, float] = field(default_factory=dict)  # group -> wall-clock time

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def group_of(pod: dict) -> str | None:
        name = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
        return f"{pod['metadata']['namespace']}/{name}" if name else None

    def members(self, group: str, pods: list[dict]) -> list[dict]:
        """The plugin's podLister view: non-terminal pods with the label in the namespace."""
        ns, name = group.split("/", 1)
        return [p for p in pods if p["metadata"]["namespace"] == ns and not is_terminal(p)
                and (p["metadata"].get("labels") or {}).get(GROUP_LABEL) == name]

    def assigned(self, group: str, pods: list[dict]) -> set[str]:
        """assignedPodsByPG: members assumed (waiting) or bound."""
        bound = {p["metadata"]["name"] for p in self.members(group, pods) if p["spec"].get("nodeName")}
        return bound | self.permitted.get(group, set())

    def prune(self, pods: list[dict], now: float) -> None:
        """Informer deletes (pgMgr.Unreserve on a deleted/terminal bound pod); expired caches."""
        alive = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
                 if not is_terminal(p)}
        waiting = {(w.group, w.pod["metadata"]["name"]) for w in self.waiting.values()}
        for group, names in list(self.permitted.items()):
            ns = group.split("/", 1)[0]
            names &= {n for n in names if (ns, n) in alive or (group, n) in waiting}
            if not names:
                del self.permitted[group]
        for cache in (self.backed_off, self.permitted_pg):
            for k in [k for k, t in cache.items() if t <= now]:
                del cache[k]

    def wait_seconds(self, pg: dict | None) -> float:
        """Coscheduling.Permit: util.GetWaitTimeDuration, a zero result keeping the plugin's."""
        timeout = dig(pg or {}, "spec.scheduleTimeoutSeconds")
        if timeout:
            return float(timeout)
        return float(self.args.permit_waiting_time_seconds or DEFAULT_WAIT_SECONDS)

    def sort_key(self, pod: dict, pg: dict | None) -> tuple:
        """Coscheduling.Less."""
        group = self.group_of(pod)
        if group and group in self.last_failed:
            created = self.last_failed[group]
        elif pg is not None:
            created = _epoch(pg["metadata"].get("creationTimestamp"))
        else:  # no group: the pod's first attempt, approximated by its creation
            created = _epoch(pod["metadata"].get("creationTimestamp"))
        return (-(pod["spec"].get("priority") or 0), created,
                f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")

    # -- extension points ---------------------------------------------------------------------
    def pre_filter(self, pod: dict, pg: dict | None, pods: list[dict], nodes: list[dict],
                   now: float) -> str | None:
        """PodGroupManager.PreFilter: the error text, or None."""
        group = self.group_of(pod)
        if group is None or pg is None:
            return None
        if group in self.backed_off:
            return f"podGroup {group} failed recently"
        members = self.members(group, pods)
        min_member = int(dig(pg, "spec.minMember") or 0)
        name = pod["metadata"]["name"]
        gap = min_member - len(members)
        if gap > 0:
            return (f"pre-filter pod {name} cannot find enough sibling pods, current pods "
                    f"number: {len(members)}, minMember of group: {min_member}")
        for p in members:
            if p["spec"].get("schedulingGates"):
                gap += 1
            if gap > 0:
                return f"pre-filter pod {name} cannot proceed due to gated pods in the same PodGroup"
        min_res = dig(pg, "spec.minResources")
        if not min_res or group in self.permitted_pg:
            return None
        err = self._check_cluster_resource(group, min_res, min_member, pods, nodes)
        if err:
            return err
        self.permitted_pg[group] = now + float(self.args.permit_waiting_time_seconds)
        return None

    def _check_cluster_resource(self, group, min_res, min_member, pods, nodes) -> str | None:
        """CheckClusterResource: subtract each node's free resources (the group's own pods and
        this scheduler's assumed pods of other groups counted as in the scheduler's cache)."""
        want: dict[str, _Amount] = {k: _Amount.parse(v) for k, v in min_res.items()}
        want["pods"] = _Amount(Decimal(min_member), 0, "DecimalSI")
        assumed = [w.pod | {"spec": {**w.pod["spec"], "nodeName": w.node}}
                   for w in self.waiting.values()]
        for node in nodes:
            name = node["metadata"]["name"]
            alloc = (node.get("status") or {}).get("allocatable") or {}
            used: dict[str, Decimal] = {}
            count = 0
            for p in pods + assumed:
                if p["spec"].get("nodeName") != name or is_terminal(p) or self.group_of(p) == group:
                    continue
                count += 1
                for k, v in pod_requests(p).items():
                    used[k] = used.get(k, Decimal(0)) + v
            free = {k: parse_quantity(v) - used.get(k, Decimal(0)) for k, v in alloc.items()
                    if k != "pods"}
            free["pods"] = parse_quantity(alloc.get("pods", "110")) - count
            for res in list(want):
                if res not in free:
                    continue  # util.ResourceList has no entry: a zero Quantity
                # int64Amount.Sub: cpu comes in milli (scale -3), the rest at scale 0.
                want[res] = want[res].sub(free[res], -3 if res == "cpu" else 0)
                if want[res].value <= 0:
                    del want[res]
            if not want:
                return None
        return f"resource gap: {_go_resource_list(want)}"

    def post_filter(self, pod: dict, pg: dict | None, pods: list[dict], now: float) -> tuple[str, list]:
        """Coscheduling.PostFilter: (message, waiting pods it rejects)."""
        if pg is None:
            return "can not find pod group", []
        group = self.group_of(pod)
        min_member = int(dig(pg, "spec.minMember") or 0)
        assigned = len(self.assigned(group, pods))
        if assigned >= min_member:
            return "", []
        if (min_member - assigned) / min_member <= self.args.pod_group_reject_percentage / 100:
            return "", []
        rejected = self._waiting_in(group)
        if self.args.pod_group_backoff_seconds and len(self.members(group, pods)) >= min_member:
            self.backed_off[group] = now + float(self.args.pod_group_backoff_seconds)
        self.permitted_pg.pop(group, None)
        self.last_failed[group] = time.time()
        return (f"PodGroup {group} gets rejected due to Pod {pod['metadata']['name']} is "
                "unschedulable even after PostFilter"), rejected

    def permit(self, pod: dict, pg: dict | None, pods: list[dict]) -> str:
        """PodGroupManager.Permit: 'Success', 'Wait' or 'PodGroup not found'."""
        group = self.group_of(pod)
        if pg is None:
            return "PodGroup not found"
        names = self.permitted.setdefault(group, set())
        names.add(pod["metadata"]["name"])
        if len(self.assigned(group, pods)) >= int(dig(pg, "spec.minMember") or 0):
            self.last_failed.pop(group, None)  # ClearPodGroupScheduleFailure
            return "Success"
        return "Wait"

    def unreserve(self, pod: dict, group_exists: bool) -> list[Waiting]:
        """Coscheduling.Unreserve for a pod that was assumed: the waiting siblings it rejects."""
        group = self.group_of(pod)
        names = self.permitted.get(group)
        if names is not None:
            names.discard(pod["metadata"]["name"])
            if not names:
                del self.permitted[group]
        if not group_exists:
            return []
        rejected = self._waiting_in(group)
        self.permitted_pg.pop(group, None)
        self.last_failed[group] = time.time()
        return rejected

    def _waiting_in(self, group: str) -> list[Waiting]:
        return [w for w in self.waiting.values() if w.group == group]


def reconcile_podgroup(pg: dict, all_pods: list[dict]) -> dict | None:
    """PodGroupReconciler.Reconcile: the new status, or None to leave it."""
    status = dict(pg.get("status") or {})
    phase = status.get("phase") or ""
    if phase in ("Finished", "Failed"):
        return None
    name = pg["metadata"]["name"]
    pods = [p for p in all_pods if (p["metadata"].get("labels") or {}).get(GROUP_LABEL) == name]
    pods.sort(key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))
    min_member = int(dig(pg, "spec.minMember") or 0)
    if phase == "":
        status["phase"] = "Pending"
    elif phase == "Pending":
        if len(pods) >= min_member:
            status["phase"] = "Scheduling"
            refs = sorted(f"{pods[0]['metadata']['namespace']}/{r.get('name')}"
                          for r in pods[0]["metadata"].get("ownerReferences") or []) if pods else []
            if refs:
                status["occupiedBy"] = ",".join(refs)
    else:
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        running, succeeded, failed = (phases.count(x) for x in ("Running", "Succeeded", "Failed"))
        for k, v in (("running", running), ("succeeded", succeeded), ("failed", failed)):
            if v:
                status[k] = v
            else:
                status.pop(k, None)  # int32 omitempty
        if len(pods) < min_member:
            status["phase"] = "Pending"
        else:
            if succeeded + running < min_member:
                status["phase"] = "Scheduling"
            if succeeded + running >= min_member:
                status["phase"] = "Running"
            if failed and failed + running + succeeded >= min_member:
                status["phase"] = "Failed"
            if succeeded >= min_member:
                status["phase"] = "Finished"
    return status if status != (pg.get("status") or {}) else None


def go_duration(seconds: float) -> str:
    """time.Duration's String() for whole and fractional seconds ("10s", "1m0s", "500ms")."""
    if seconds < 1:
        ms = Decimal(str(seconds)) * 1000
        return f"{ms.normalize():f}ms"
    s = Decimal(str(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    sec_text = f"{sec.normalize():f}s"
    if h:
        return f"{int(h)}h{int(m)}m{sec_text}"
    if m:
        return f"{int(m)}m{sec_text}"
    return sec_text


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return datetime.strptime(stamp.rstrip("Z")[:19], "%Y-%m-%dT%H:%M:%S").timestamp()


@dataclass
class _Amount:
    """resource.Quantity as an int64Amount (value x 10^scale) and its Format."""
    value: Decimal
    scale: int
    fmt: str

    @classmethod
    def parse(cls, text) -> _Amount:
        s = str(text)
        fmt = "BinarySI" if s.endswith("i") else (
            "DecimalExponent" if any(c in s for c in "eE") else "DecimalSI")
        q = parse_quantity(s)
        scale = 0
        while q != q.to_integral_value():
            q *= 10
            scale -= 1
        while scale < 0 and scale % 3:  # Quantity keeps milli/micro/nano steps
            q *= 10
            scale -= 1
        return cls(q, scale, fmt)

    def sub(self, amount: Decimal, scale: int) -> _Amount:
        """int64Amount.Sub: the result takes the smaller scale."""
        new_scale = min(self.scale, scale)
        mine = self.value * (Decimal(10) ** (self.scale - new_scale))
        theirs = amount * (Decimal(10) ** (-new_scale))
        return _Amount(mine - theirs, new_scale, self.fmt)


def _go_resource_list(rl: dict[str, _Amount]) -> str:
    """fmt %v of a v1.ResourceList: a map of Quantity structs (String has a pointer receiver,
    so map values print as {{value scale} {<nil>} <cached string> Format}; Sub clears the
    cached string)."""
    parts = [f"{k}:{{{{{int(v.value)} {v.scale}}} {{<nil>}}  {v.fmt}}}" for k, v in sorted(rl.items())]
    return f"map[{' '.join(parts)}]"
