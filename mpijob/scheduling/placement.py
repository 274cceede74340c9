"""Gang placement of a job's workers onto nodes and GPUs: all or nothing, explained.

Input: a `Cluster` snapshot and a `PlacementRequest` (W workers of G GPUs each, node
selector, tolerations, cpu/memory per worker). Output: a `Placement` that holds every worker
or none, with the reason when it cannot fit. Workers are indivisible: a worker's G GPUs
are on one node.

Which nodes can take workers (all policies): Ready, matching every selector label, every
NoSchedule/NoExecute taint tolerated (PreferNoSchedule only lowers preference), and with
room: free GPUs // G workers, and free cpu / memory per worker where both the node's free
amount and the request are known (unknown is not checked).

Policies:
- topology (default): the fewest nodes first. Then the GPU sets whose weakest link is
  fastest (checked across all the nodes used: the slowest pair paces the allreduce), then
  whole idle nodes left untouched when used nodes suffice (they are what the next 8-GPU job
  needs), then the most link bandwidth, then the tightest fit. On each node the set is the
  best of its free GPUs (see mpijob.scheduling.placement_sets), one pod per node holding all the job's
  workers there.
- binpack: the fewest nodes, links ignored: most-used nodes first, lowest free GPU indices.
- spread: kube-scheduler's default scoring (NodeResourcesFit LeastAllocated): one pod per
  worker, each on the node with the largest share of its GPUs still free after it (free
  cpu for CPU jobs), ties by node name, lowest free GPU indices.
CPU jobs (G = 0) are placed by cpu and memory when known; a node whose free cpu/memory is
unknown takes any number of workers, so topology and binpack put them on one node. Nodes
without GPUs are preferred for CPU jobs, keeping GPU nodes free.
Determinism: equal input gives equal output (ties end in node name, then GPU index).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from mpijob.errors import SpecError
from mpijob.jobspec.defaults import PLACEMENT_POLICIES
from mpijob.jobspec.quantity import parse_quantity
from mpijob.jobspec.spec import JobSpec
from mpijob.jobspec.toleration import HARD_TAINT_EFFECTS, Toleration
from mpijob.plural import plural
from mpijob.scheduling.cluster import Cluster, Node, Taint
from mpijob.scheduling.dra_devices import devices_by_index
from mpijob.scheduling.network import domain_of
from mpijob.scheduling.placement_network import min_nodes, narrow
from mpijob.scheduling.placement_nvlink import narrow_partitions
from mpijob.scheduling.placement_sets import SetIndex, indices_of, mask_of, set_index
from mpijob.scheduling.presets import preset_for
from mpijob.wellknown import UNSCHEDULABLE_TAINT

POLICIES = PLACEMENT_POLICIES
POLICY_ALIASES = {"gputopology": "topology"}
_UNBOUNDED = 1 << 30


@dataclass(frozen=True)
class PlacementRequest:
    workers: int
    gpus_per_worker: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    cpu_per_worker: float | None = None  # cores
    memory_per_worker: float | None = None  # bytes
    # Allow one job's nodes in several zones (mpijob.scheduling.placement_network).
    cross_zone: bool = False

    @classmethod
    def from_spec(cls, spec: JobSpec) -> PlacementRequest:
        return cls(
            workers=spec.workers,
            gpus_per_worker=spec.gpus_per_worker,
            node_selector=dict(spec.node_selector),
            tolerations=tuple(spec.tolerations),
            cpu_per_worker=float(parse_quantity(spec.cpu)) if spec.cpu else None,
            memory_per_worker=float(parse_quantity(spec.memory)) if spec.memory else None,
            cross_zone=spec.cross_zone,
        )

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker


@dataclass(frozen=True)
class NodeAssignment:
    node: str
    gpus: tuple[int, ...]
    workers: int
    # The planned GPUs' DRA device UUIDs, in `gpus` order, when the node publishes them.
    device_uuids: tuple[str, ...] = ()

    @property
    def slots(self) -> int:
        """MPI slots of the node's pod: one per GPU, or one per rank of a CPU job."""
        return len(self.gpus) or self.workers


@dataclass(frozen=True)
class Placement:
    feasible: bool
    policy: str
    assignments: tuple[NodeAssignment, ...] = ()
    reason: str | None = None
    explanation: tuple[str, ...] = ()
    # The one rack or block holding every node, for gang schedulers (mpijob.scheduling.network).
    network_domain: object = None
    # The one multi-node NVLink partition holding every node (mpijob.scheduling.nvlink).
    nvlink_domain: str | None = None
    # The job spans nodes of that partition and the cluster serves ComputeDomains: it gets
    # the IMEX channel cross-node NVLink needs (mpijob.k8s.computedomain).
    compute_domain: bool = False

    @property
    def nodes_used(self) -> int:
        return len({a.node for a in self.assignments})

    def to_json(self) -> dict:
        return {
            "feasible": self.feasible,
            "policy": self.policy,
            "placement": [
                {"node": a.node, "gpus": list(a.gpus), "workers": a.workers} for a in self.assignments
            ],
            "nodes_used": self.nodes_used,
            "reason": self.reason,
            "explanation": list(self.explanation),
            **({"nvlink_domain": self.nvlink_domain, "compute_domain": self.compute_domain}
               if self.nvlink_domain else {}),
        }


# --- who may run where ------------------------------------------------------------------
def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key is not None and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return (toleration.value or "") == (taint.value or "")


def taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value is not None else f"{t.key}:{t.effect}"


@dataclass
class _Candidate:
    node: Node
    free_mask: int
    cap: int  # workers it can hold by GPUs, cpu and memory
    idle: bool
    soft_penalty: int  # untolerated PreferNoSchedule taints
    index: SetIndex = None  # type: ignore[assignment]  # set for GPU jobs only
    profile: tuple = ()

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def free_count(self) -> int:
        return self.free_mask.bit_count()


@dataclass
class _Screen:
    candidates: list[_Candidate]
    total: int = 0
    not_ready: int = 0
    selector_miss: int = 0
    tainted: dict[str, int] = field(default_factory=dict)
    no_room_cpu: int = 0
    no_room_memory: int = 0
    no_gpus: int = 0


def _validate(request: PlacementRequest, policy: str) -> str:
    policy = POLICY_ALIASES.get(policy, policy)
    if policy not in POLICIES:
        raise SpecError("placement", f"unknown policy {policy!r}; expected one of {', '.join(POLICIES)}")
    if not isinstance(request.workers, int) or request.workers < 1:
        raise SpecError("workers", f"must be at least 1, got {request.workers!r}")
    if not isinstance(request.gpus_per_worker, int) or request.gpus_per_worker < 0:
        raise SpecError("gpus_per_worker", f"must be 0 or more, got {request.gpus_per_worker!r}")
    for name in ("cpu_per_worker", "memory_per_worker"):
        value = getattr(request, name)
        if value is not None and value <= 0:
            raise SpecError(name, f"must be positive, got {value!r}")
    return policy


@dataclass(frozen=True)
class NodeVerdict:
    """Whether a job's pods may go to a node at all, as kube-scheduler's filters decide
    (NodeUnschedulable/TaintToleration, NodeAffinity for the node selector, Ready)."""

    blocked: str | None = None  # "not-ready", "selector" or "taint"; None: allowed
    taint: Taint | None = None  # the untolerated hard taint, when blocked by one
    soft_penalty: int = 0  # untolerated PreferNoSchedule taints


def screen_node(node: Node, request: PlacementRequest) -> NodeVerdict:
    """One node against the job's selector and tolerations: placement screens the cluster
    with it, and submit re-checks a plan against a fresh snapshot with it."""
    if not node.ready:
        return NodeVerdict("not-ready")
    if any(node.labels.get(k) != v for k, v in request.node_selector.items()):
        return NodeVerdict("selector")
    soft = 0
    for taint in node.taints or ():
        if any(tolerates(t, taint) for t in request.tolerations):
            continue
        if taint.effect in HARD_TAINT_EFFECTS:
            return NodeVerdict("taint", taint)
        soft += 1
    return NodeVerdict(soft_penalty=soft)


def room_by_resources(node: Node, request: PlacementRequest) -> tuple[int | None, int | None]:
    """Workers the node's free CPU and free memory can hold (None: not limited by it)."""
    by_cpu = by_mem = None
    if request.cpu_per_worker is not None and node.free_cpu is not None:
        by_cpu = int(node.free_cpu / request.cpu_per_worker + 1e-9)  # 0.3 / 0.1 is 2.999...
    if request.memory_per_worker is not None and node.free_memory is not None:
        by_mem = int(node.free_memory / request.memory_per_worker + 1e-9)
    return by_cpu, by_mem


def _screen(cluster: Cluster, request: PlacementRequest, *, with_profiles: bool) -> _Screen:
    g = request.gpus_per_worker
    screen = _Screen(candidates=[], total=len(cluster.nodes))
    for node in cluster.nodes:
        verdict = screen_node(node, request)
        if verdict.blocked == "not-ready":
            screen.not_ready += 1
            continue
        if verdict.blocked == "selector":
            screen.selector_miss += 1
            continue
        if verdict.blocked == "taint" and verdict.taint is not None:
            key = taint_text(verdict.taint)
            screen.tainted[key] = screen.tainted.get(key, 0) + 1
            continue
        soft = verdict.soft_penalty
        allocated = node.allocated
        taken = 0
        for i in allocated:
            taken |= 1 << i
        free_mask = ((1 << node.gpus) - 1) & ~taken
        cap = free_mask.bit_count() // g if g else _UNBOUNDED
        if g and node.gpus == 0:
            screen.no_gpus += 1
            continue
        by_cpu, by_mem = room_by_resources(node, request)
        if by_cpu is not None:
            if by_cpu < 1:
                screen.no_room_cpu += 1
            cap = min(cap, by_cpu)
        if by_mem is not None:
            if by_mem < 1:
                screen.no_room_memory += 1
            cap = min(cap, by_mem)
        if cap < 1:
            continue
        cand = _Candidate(node, free_mask, min(cap, request.workers), not allocated and node.gpus > 0, soft)
        if g and with_profiles:
            cand.index = set_index(_topology_of(node), pcie_gen=node.pcie_gen, gpu_model=node.gpu_model)
            cand.profile = cand.index.profile(free_mask)
        screen.candidates.append(cand)
    return screen


def _topology_of(node: Node):
    """The node's topology sized to its GPU count (a snapshot may disagree with itself)."""
    topo = node.topology
    if topo.gpus == node.gpus:
        return topo
    if topo.gpus > node.gpus:
        return topo.subset(node.gpus)

    return preset_for(node.gpu_model, node.gpus)


# --- the reason it does not fit -----------------------------------------------------------
def _why_not(screen: _Screen, request: PlacementRequest) -> str:
    w, g = request.workers, request.gpus_per_worker
    parts = []
    if g:
        parts.append(f"needs {plural(w * g, 'GPU')} ({plural(w, 'worker')} x {plural(g, 'GPU')})")
    else:
        parts.append(f"needs {plural(w, 'CPU worker')}")
    if request.cpu_per_worker is not None or request.memory_per_worker is not None:
        res = []
        if request.cpu_per_worker is not None:
            res.append(f"{request.cpu_per_worker:g} cpu")
        if request.memory_per_worker is not None:
            res.append(f"{_bytes(request.memory_per_worker)} memory")
        parts[-1] += f" with {' and '.join(res)} each"
    if screen.total == 0:
        parts.append("the cluster has no nodes")
        return "; ".join(parts)
    selector_ok = screen.total - screen.not_ready - screen.selector_miss
    if request.node_selector:
        sel = ",".join(f"{k}={v}" for k, v in request.node_selector.items())
        parts.append(f"{selector_ok} of {plural(screen.total, 'node')} "
                     f"{'matches' if selector_ok == 1 else 'match'} the selector {sel}")
    if screen.not_ready:
        parts.append(f"{plural(screen.not_ready, 'node')} not Ready")
    for taint, count in sorted(screen.tainted.items()):
        parts.append(f"{plural(count, 'node')} excluded by taint {taint} ({_taint_advice(taint)})")
    if screen.no_gpus and g:
        parts.append(f"{plural(screen.no_gpus, 'node')} without GPUs")
    if screen.no_room_cpu:
        parts.append(f"{plural(screen.no_room_cpu, 'node')} without {request.cpu_per_worker:g} free cpu")
    if screen.no_room_memory and request.memory_per_worker is not None:
        parts.append(f"{plural(screen.no_room_memory, 'node')} without "
                     f"{_bytes(request.memory_per_worker)} free memory")
    cands = screen.candidates
    if g:
        free_total = sum(c.free_count for c in cands)
        holds = sum(c.cap for c in cands)
        if cands:
            biggest = max(cands, key=lambda c: (c.free_count, _neg_name(c.name)))
            parts.append(
                f"{plural(len(cands), 'eligible node')} {'holds' if len(cands) == 1 else 'hold'} "
                f"{plural(holds, 'worker')} ({plural(free_total, 'free GPU')}); largest free "
                f"block is {plural(biggest.free_count, 'GPU')} on {biggest.name}"
            )
        else:
            parts.append(f"no eligible node has a free block of {plural(g, 'GPU')}")
    else:
        holds = sum(c.cap for c in cands)
        parts.append(f"eligible nodes hold {plural(holds, 'worker')}")
    return "; ".join(parts)


def _eligible(count: int, total: int) -> str:
    return f"{count} of {plural(total, 'node')} eligible"


def _neg_name(name: str) -> tuple:
    return tuple(-ord(ch) for ch in name)


def _bytes(value: float) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}"


# --- topology and binpack: the fewest nodes ----------------------------------------------
def _cap_at(c: _Candidate, g: int, threshold: int) -> int:
    """Workers `c` holds with every GPU set's weakest link at least `threshold`."""
    k = c.cap
    while k > 0 and c.profile[k * g][0] < threshold:
        k -= 1
    return k


def _choose_nodes(cands: list[_Candidate], caps: dict[str, int], need: int, m: int,
                  quality_of) -> list[tuple[_Candidate, int]] | None:
    """m nodes holding `need` workers, touching as few idle nodes as possible.

    `caps` is what each node may hold; `quality_of(c, k)` ranks k workers on c (larger is
    better). Returns [(candidate, workers)] or None."""
    usable = [c for c in cands if caps[c.name] > 0]
    busy = [c for c in usable if not c.idle]
    idle = [c for c in usable if c.idle]

    def rank_big(c):  # biggest room first, then the better sets, then the name
        cap = caps[c.name]
        q = quality_of(c, cap)
        return (-cap, c.soft_penalty, -q[0], -c.node.network_gbps, -q[1], c.name)

    busy.sort(key=rank_big)
    idle.sort(key=rank_big)
    busy_prefix = [0]
    for c in busy:
        busy_prefix.append(busy_prefix[-1] + caps[c.name])
    idle_prefix = [0]
    for c in idle:
        idle_prefix.append(idle_prefix[-1] + caps[c.name])

    for j in range(0, m + 1):  # idle nodes used
        b = m - j
        if b > len(busy) or j > len(idle):
            continue
        if busy_prefix[b] + idle_prefix[j] < need:
            continue
        if m == 1:
            pool = busy if b == 1 else idle
            fits = [c for c in pool if caps[c.name] >= need]
            best = min(fits, key=lambda c: (c.soft_penalty, _neg(quality_of(c, need)), c.free_count, c.name))
            return [(best, need)]
        chosen_idle = idle[:j]
        room_idle = idle_prefix[j]
        chosen_busy = busy[: max(b - 1, 0)]
        if b:
            # The last busy node: the best one that still completes the job (best fit).
            rest_need = need - room_idle - busy_prefix[b - 1]
            last_pool = busy[b - 1:]
            fits = [c for c in last_pool if caps[c.name] >= max(rest_need, 1)]
            def rank_last(c, rest_need=rest_need):  # better sets and network, then tightest fit
                q = quality_of(c, min(caps[c.name], max(rest_need, 1)))
                return (c.soft_penalty, -q[0], -c.node.network_gbps, -q[1], caps[c.name], c.name)

            last = min(fits, key=rank_last)
            chosen_busy.append(last)
        order = chosen_busy + chosen_idle
        out = []
        remaining = need
        for pos, c in enumerate(order):
            after = len(order) - pos - 1
            k = min(caps[c.name], remaining - after)
            out.append((c, k))
            remaining -= k
        if remaining != 0 or any(k < 1 for _, k in out):  # pragma: no cover - guarded by minimality
            continue
        return out
    return None


def _neg(q) -> tuple:
    return tuple(-x for x in q)


def _place_packed(screen: _Screen, request: PlacementRequest, policy: str) -> Placement:
    w, g = request.workers, request.gpus_per_worker
    eligible = len(screen.candidates)
    # One NVLink partition when one holds the job, else the fewest; then the fewest nodes,
    # in one zone, under the fewest racks: the candidates left are the domain the rules
    # below choose in.
    parts = narrow_partitions(screen.candidates, w, cross_zone=request.cross_zone)
    pool = parts.candidates if parts is not None else screen.candidates
    narrowed = narrow(pool, w, cross_zone=request.cross_zone)
    cands = narrowed.candidates
    m = narrowed.nodes
    if m is None:
        reason = _why_not(screen, request)
        if narrowed.reason:
            reason += f"; {narrowed.reason}"
        return Placement(False, policy, reason=reason,
                         explanation=(f"policy {policy}: cannot fit",))
    notes = []
    if policy == "topology" and g:
        # The best bottleneck the m nodes can all keep: try link speeds from the top.
        levels = sorted({c.profile[k * g][0] for c in cands for k in range(1, c.cap + 1)}, reverse=True)
        lo, hi = 0, len(levels) - 1  # find the first level that fits (monotone)
        while lo < hi:
            mid = (lo + hi) // 2
            caps_mid = [_cap_at(c, g, levels[mid]) for c in cands]
            if (min_nodes([x for x in caps_mid if x], w) or m + 1) <= m:
                hi = mid
            else:
                lo = mid + 1
        threshold = levels[lo]
        caps = {c.name: _cap_at(c, g, threshold) for c in cands}

        def quality_of(c, k):
            return c.profile[k * g] if k else (-1, -1)
    else:
        caps = {c.name: c.cap for c in cands}

        def quality_of(c, k):
            # binpack, and CPU jobs: CPU-only nodes first for CPU jobs, then fuller nodes.
            return (1 if not g and c.node.gpus == 0 else 0, -c.free_count)

    picks = _choose_nodes(cands, caps, w, m, quality_of)
    if picks is None:  # pragma: no cover - m nodes exist by construction
        return Placement(False, policy, reason=_why_not(screen, request))
    assignments = []
    for c, k in picks:
        if not g:
            gpus: tuple[int, ...] = ()
        elif policy == "topology":
            gpus = indices_of(c.index.best(c.free_mask, k * g))
        else:
            gpus = indices_of(c.free_mask)[: k * g]
        assignments.append(NodeAssignment(c.name, gpus, k))
        notes.append(_describe(c, gpus, k, g, policy))
    idle_left = sum(1 for c in screen.candidates if c.idle) - sum(1 for c, _ in picks if c.idle)
    head = [_policy_line(policy, g),
            f"{_eligible(eligible, screen.total)}; fewest nodes that hold "
            f"{plural(w, 'worker')}: {m}", *(parts.notes if parts else ()), *narrowed.notes]
    if g and idle_left and any(not c.idle for c, _ in picks):
        head.append(f"{plural(idle_left, 'idle node')} left whole for larger jobs")

    domain = domain_of([c.node.network for c, _ in picks]) if len(picks) > 1 else None
    return Placement(True, policy, tuple(assignments), None, tuple(head + notes), domain)


def _policy_line(policy: str, g: int) -> str:
    if policy == "topology" and g:
        return ("policy topology: fewest nodes, then the GPU sets with the fastest weakest link, "
                "then idle nodes kept whole, then the most link bandwidth")
    if policy == "topology":
        return "policy topology (CPU job): fewest nodes by cpu/memory, CPU-only nodes first"
    if policy == "binpack":
        return "policy binpack: fewest nodes, most-used nodes first, lowest free GPU indices"
    return "policy spread: kube-scheduler LeastAllocated, one pod per worker"


def _describe(c: _Candidate, gpus: tuple[int, ...], k: int, g: int, policy: str) -> str:
    text = f"{c.name}: {plural(k, 'worker')}"
    if not g:
        return text + " (CPU)"
    text += f", GPUs {','.join(map(str, gpus))}"
    if len(gpus) < 2 or c.index is None:
        return text

    mask = mask_of(gpus)
    weak, total = c.index.quality(mask)
    pair = c.index.weakest_pair(mask)
    assert pair is not None  # two GPUs or more
    a, b = pair
    pairs = len(gpus) * (len(gpus) - 1) // 2
    text += (f"; weakest link {c.index.topology.links[a][b]} ({weak / 1000:g} GB/s, GPU{a}-GPU{b}), "
             f"{total / 1000:g} GB/s over {plural(pairs, 'pair')}")
    if policy == "topology":
        text += f"; the best {len(gpus)}-GPU set of its {plural(c.free_count, 'free GPU')}"
    return text


# --- spread -------------------------------------------------------------------------------
def _place_spread(screen: _Screen, request: PlacementRequest) -> Placement:
    w, g = request.workers, request.gpus_per_worker
    cands = screen.candidates
    if sum(c.cap for c in cands) < w:
        return Placement(False, "spread", reason=_why_not(screen, request),
                         explanation=("policy spread: cannot fit",))
    cpu = request.cpu_per_worker or 0.0

    def score(c: _Candidate, used: int) -> tuple:
        # LeastAllocated after adding one more pod: the larger free share wins (smaller key).
        share = (c.free_count - (used + 1) * g) / c.node.gpus if g else 0.0
        free_cpu = c.node.free_cpu - (used + 1) * cpu if c.node.free_cpu is not None else 0.0
        pods_here = 0 if g else used  # CPU jobs without known cpu: fewest pods first
        return (c.soft_penalty, -share, pods_here, -free_cpu, c.name)

    heap = [(score(c, 0), i) for i, c in enumerate(cands)]
    heapq.heapify(heap)
    used = [0] * len(cands)
    order: list[int] = []
    while len(order) < w:
        _, i = heapq.heappop(heap)
        order.append(i)
        used[i] += 1
        if used[i] < cands[i].cap:
            heapq.heappush(heap, (score(cands[i], used[i]), i))

    taken: dict[int, int] = {}
    assignments = []
    for i in order:
        c = cands[i]
        start = taken.get(i, 0)
        gpus = indices_of(c.free_mask)[start:start + g] if g else ()
        taken[i] = start + g
        assignments.append(NodeAssignment(c.name, gpus, 1))
    nodes = len({a.node for a in assignments})
    notes = [_policy_line("spread", g),
             f"{_eligible(len(cands), screen.total)}; {plural(w, 'pod')} on {plural(nodes, 'node')}"]
    return Placement(True, "spread", tuple(assignments), None, tuple(notes))


# --- entry point --------------------------------------------------------------------------
def place(cluster: Cluster, request: PlacementRequest, policy: str = "topology") -> Placement:
    """An all-or-nothing placement of `request` on `cluster` under `policy`."""
    policy = _validate(request, policy)
    screen = _screen(cluster, request, with_profiles=(policy == "topology"))
    if policy == "spread":
        placement = _place_spread(screen, request)
    else:
        placement = _place_packed(screen, request, policy)
    return _with_devices(_with_compute_domain(placement, cluster), cluster)


def _with_compute_domain(placement: Placement, cluster: Cluster) -> Placement:
    """Name the one NVLink partition a placement's nodes share (any policy), and whether
    the job gets a ComputeDomain there: several nodes, and a cluster that serves them."""
    if not placement.feasible:
        return placement
    domains = {cluster.node(a.node).nvlink_domain for a in placement.assignments}
    domain = domains.pop() if len(domains) == 1 else None
    multi = placement.nodes_used > 1
    return replace(placement, nvlink_domain=domain,
                   compute_domain=bool(domain and multi and cluster.compute_domains))


def _with_devices(placement: Placement, cluster: Cluster) -> Placement:
    """Name the planned GPUs by their DRA devices where the nodes publish them."""
    if not placement.feasible or not any(n.dra_devices for n in cluster.nodes):
        return placement

    out = []
    for a in placement.assignments:
        by_index = devices_by_index(cluster.node(a.node).dra_devices)
        if a.gpus and all(i in by_index for i in a.gpus):
            a = replace(a, device_uuids=tuple(by_index[i].uuid for i in a.gpus))
        out.append(a)
    return replace(placement, assignments=tuple(out))


# Taints the node lifecycle controller puts on a node for its condition, and the one `kubectl
# cordon` stands for (pkg/apis/core/well_known_taints.go): a job should not tolerate them.
CORDONED = UNSCHEDULABLE_TAINT
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
                    "node.kubernetes.io/pid-pressure", "node.kubernetes.io/network-unavailable")


def _taint_advice(taint: str) -> str:
    """What to do about nodes a taint keeps the job off: a cordon is lifted by whoever
    cordoned it, a condition by mending the node; other taints the job may tolerate."""
    if taint.startswith(CORDONED):
        return "cordoned: kubectl uncordon NODE, when its owner is done with it"
    if taint.startswith(CONDITION_TAINTS):
        return "the node's condition: fix the node, not the job"
    return "add --toleration"
