"""Event-driven cluster simulation: gang-scheduled Horovod jobs under one placement policy.

Time jumps from event to event (arrivals and completions). At each event the scheduler
walks the queue in submission order:
- Gang semantics: a job starts only when `mpijob.scheduling.placement.place` finds room for all its
  workers at once; nothing is held while it waits.
- FIFO with EASY backfill (Lifka 1995; what Slurm's backfill does): the queue's head gets a
  reservation: the earliest time enough GPUs of its pool free up if running jobs end as
  predicted (counting GPUs, not their layout). A later job may jump ahead only if it fits
  now and either ends before that time, uses GPUs the head will not need then, or runs on
  GPUs the head cannot use (another GPU type). At most `backfill_depth` queued jobs are
  looked at per event.
- A running job's duration is its work (images) / the images/s `mpijob.perf.perfmodel` predicts
  for the placement it got, so a policy that spreads a job over slow links makes it run,
  and hold its GPUs, longer.
- A job that cannot be placed even on its empty pool is dropped and counted.

Metrics per policy (`PolicySummary`, over the jobs that ran): job completion time (JCT,
submit to end) mean and 95th percentile; mean over jobs of predicted images/s per GPU;
GPU utilisation = GPU-seconds held by jobs between the first and the last submission /
(cluster GPUs x that window); share of jobs on more than one node; mean queueing delay
(submit to start); mean predicted scaling efficiency of the multi-GPU jobs.

Speed: the free-GPU state is kept per node and the `Cluster` handed to `place` is rebuilt
from the nodes of the job's pool that still have free GPUs (unchanged nodes are the same
objects; a node changes by `dataclasses.replace`). A job that failed to place is not tried
again until GPUs of its pool are freed (allocations alone cannot make room), and neither
is any other job of the same shape (pool, workers, GPUs per worker); an unchanged pool
gives the same placement, so it is reused; a backfill candidate that could not pass the
rule even at perfect scaling on its pool's fastest GPU is not placed at all. Predictions
are cached per (model, batch, placement shape), the shape being which GPUs of which kind of
node each pod holds, and whether the job gets cross-node NVLink.

NVLink partitions (NVL72 racks, mpijob.scheduling.nvlink): a multi-node job whose nodes all
share one partition, on a cluster that serves ComputeDomains, gets the IMEX channel and is
priced at NVLink speed between its nodes (mpijob.perf.nvlink_domain), whichever policy
placed it; otherwise its nodes meet on the network. `ignore_partitions=True` hides the
partitions from placement only (the nodes `place` sees have no partition), so a run can
show what partition-aware placement is worth against the same policy blind to them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mpijob.perf import nvlink_domain, perfmodel
from mpijob.perf.simworkload import SimJob
from mpijob.plural import plural
from mpijob.scheduling import placement as placement_mod
from mpijob.scheduling.cluster import Cluster, Node

SUMMARY_COLUMNS = ("policy", "mean_jct_s", "p95_jct_s", "mean_images_per_sec_per_gpu",
                   "gpu_utilization", "multi_node_share", "mean_queue_s")
# The rest of a PolicySummary: kept apart so that the summary's columns stay exactly those.
EXTRA_COLUMNS = ("policy", "multi_gpu_scaling_efficiency", "jobs_completed", "jobs_dropped",
                 "makespan_s", "place_calls")
DEFAULT_BACKFILL_DEPTH = 64


@dataclass(frozen=True)
class JobOutcome:
    job: SimJob
    start_s: float | None = None
    end_s: float | None = None
    images_per_sec: float = 0.0
    nodes_used: int = 0
    scaling_efficiency: float = 1.0
    dropped: str | None = None  # why the job could never be placed
    # Its nodes share an NVLink partition and it got the ComputeDomain channel.
    nvlink_across_nodes: bool = False

    @property
    def started_s(self) -> float:
        assert self.start_s is not None, "asked of a job that never started"
        return self.start_s

    @property
    def ended_s(self) -> float:
        assert self.end_s is not None, "asked of a job that never ended"
        return self.end_s

    @property
    def jct_s(self) -> float:
        return self.ended_s - self.job.submit_s

    @property
    def queue_s(self) -> float:
        return self.started_s - self.job.submit_s


@dataclass(frozen=True)
class PolicySummary:
    policy: str
    mean_jct_s: float
    p95_jct_s: float
    mean_images_per_sec_per_gpu: float
    gpu_utilization: float
    multi_node_share: float
    mean_queue_s: float
    jobs_completed: int
    jobs_dropped: int
    makespan_s: float
    place_calls: int
    # Mean predicted scaling efficiency of the jobs with more than one GPU.
    multi_gpu_scaling_efficiency: float = math.nan

    def row(self) -> dict:
        return {c: getattr(self, c) for c in SUMMARY_COLUMNS}

    def extra_row(self) -> dict:
        return {c: getattr(self, c) for c in EXTRA_COLUMNS}


@dataclass(frozen=True)
class SimResult:
    summary: PolicySummary
    outcomes: tuple[JobOutcome, ...]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    if not values:
        return math.nan
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(policy: str, outcomes: Sequence[JobOutcome], total_gpus: int,
              place_calls: int = 0) -> PolicySummary:
    done = [o for o in outcomes if o.dropped is None and o.end_s is not None]
    dropped = sum(1 for o in outcomes if o.dropped is not None)
    if not done:
        nan = math.nan
        return PolicySummary(policy, nan, nan, nan, nan, nan, nan, 0, dropped, 0.0, place_calls, nan)
    first = min(o.job.submit_s for o in done)
    makespan = max(o.ended_s for o in done) - first
    # Utilisation over the arrival window: the drain after the last submission is one long
    # job finishing alone and would say more about the tail than about the policy.
    w_end = max(o.job.submit_s for o in done)
    if w_end <= first:
        w_end = first + makespan
    window = w_end - first
    busy = sum(o.job.gpus * max(0.0, min(o.ended_s, w_end) - max(o.started_s, first))
               for o in done)
    jcts = [o.jct_s for o in done]
    multi = [o.scaling_efficiency for o in done if o.job.gpus > 1]
    return PolicySummary(
        policy=policy,
        mean_jct_s=sum(jcts) / len(done),
        p95_jct_s=percentile(jcts, 95),
        mean_images_per_sec_per_gpu=sum(o.images_per_sec / o.job.gpus for o in done) / len(done),
        gpu_utilization=busy / (total_gpus * window) if window > 0 else 0.0,
        multi_node_share=sum(1 for o in done if o.nodes_used > 1) / len(done),
        mean_queue_s=sum(o.queue_s for o in done) / len(done),
        jobs_completed=len(done),
        jobs_dropped=dropped,
        makespan_s=makespan,
        place_calls=place_calls,
        multi_gpu_scaling_efficiency=sum(multi) / len(multi) if multi else math.nan,
    )


class _State:
    """Mutable free-GPU state, the per-pool views `place` sees, and the prediction cache."""

    def __init__(self, cluster: Cluster, precision: str,
                 assumptions: perfmodel.Assumptions = perfmodel.DEFAULT_ASSUMPTIONS,
                 ignore_partitions: bool = False):
        self.nodes: list[Node] = list(cluster.nodes)
        self.compute_domains = cluster.compute_domains
        self.ignore_partitions = ignore_partitions
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.free = [n.gpus - len(n.allocated) for n in self.nodes]
        self.total_gpus = sum(n.gpus for n in self.nodes)
        self.precision = precision
        self.assumptions = assumptions
        self.pools: dict[tuple, tuple[int, ...]] = {}
        self.pool_free: dict[tuple, int] = {}
        self.pool_total: dict[tuple, int] = {}
        self.pool_max_node: dict[tuple, int] = {}
        # Bumped whenever GPUs of the pool are freed: a failed placement may succeed now.
        self.pool_epoch: dict[tuple, int] = {}
        # Bumped on every change to the pool's GPUs.
        self.pool_version: dict[tuple, int] = {}
        self.node_pools: list[list[tuple]] = [[] for _ in self.nodes]
        self.kinds: dict[tuple, int] = {}
        self.node_kind = [self._kind(n) for n in self.nodes]
        self.predictions: dict[tuple, perfmodel.Prediction] = {}
        self.best_ips: dict[tuple, float] = {}

    def _kind(self, node: Node) -> int:
        key = (node.gpu_model, node.pcie_gen, node.network_gbps, node.topology,
               tuple(sorted((k, v) for k, v in node.labels.items()
                            if (k, v) in perfmodel.RDMA_LABELS)))
        return self.kinds.setdefault(key, len(self.kinds))

    def pool(self, selector: tuple) -> tuple[int, ...]:
        if selector not in self.pools:
            members = tuple(i for i, n in enumerate(self.nodes)
                            if n.ready and all(n.labels.get(k) == v for k, v in selector))
            self.pools[selector] = members
            self.pool_free[selector] = sum(self.free[i] for i in members)
            self.pool_total[selector] = sum(self.nodes[i].gpus for i in members)
            self.pool_max_node[selector] = max((self.nodes[i].gpus for i in members), default=0)
            self.pool_epoch[selector] = 0
            self.pool_version[selector] = 0
            for i in members:
                self.node_pools[i].append(selector)
        return self.pools[selector]

    def snapshot(self, selector: tuple) -> Cluster:
        free = self.free
        nodes = self.nodes
        members = tuple(nodes[i] for i in self.pools[selector] if free[i] > 0)
        if self.ignore_partitions:
            members = tuple(replace(n, nvlink_domain=None) if n.nvlink_domain else n
                            for n in members)
        return Cluster(members, compute_domains=self.compute_domains)

    def take(self, name: str, gpus: Sequence[int], sign: int) -> None:
        i = self.index[name]
        node = self.nodes[i]
        allocated = node.allocated | frozenset(gpus) if sign > 0 else node.allocated - frozenset(gpus)
        self.nodes[i] = replace(node, allocated=allocated)
        delta = -len(gpus) if sign > 0 else len(gpus)
        self.free[i] += delta
        for sel in self.node_pools[i]:
            self.pool_free[sel] += delta
            self.pool_version[sel] += 1
            if sign < 0:
                self.pool_epoch[sel] += 1

    def fastest_run_s(self, job: SimJob) -> float:
        """A lower bound on the job's run time: perfect scaling on the pool's fastest GPU."""
        key = (job.node_selector, job.model, job.batch_size)
        best = self.best_ips.get(key)
        if best is None:
            models = {self.nodes[i].gpu_model for i in self.pool(job.node_selector)}
            best = max((perfmodel.single_gpu_images_per_sec(m, job.model, self.precision,
                                                            job.batch_size) for m in models),
                       default=math.inf)
            self.best_ips[key] = best
        return job.work_images / (job.gpus * best)

    def channel(self, placement) -> bool:
        """Whether the job gets a ComputeDomain channel, decided on the real nodes (not the
        view `place` had), as placement.py's _with_compute_domain does for every policy."""
        names = {a.node for a in placement.assignments}
        return (self.compute_domains and len(names) > 1 and nvlink_domain.shared_domain(
            [self.nodes[self.index[n]] for n in names]) is not None)

    def predict(self, job: SimJob, placement) -> perfmodel.Prediction:
        per_node: dict[int, list[tuple[int, ...]]] = {}
        for a in placement.assignments:
            per_node.setdefault(self.index[a.node], []).append(tuple(a.gpus))
        shape = tuple(sorted((self.node_kind[i], tuple(sorted(pods))) for i, pods in per_node.items()))
        channel = self.channel(placement)
        key = (job.model, job.batch_size, shape, channel)
        pred = self.predictions.get(key)
        if pred is None:
            pods = [(self.nodes[self.index[a.node]], tuple(a.gpus)) for a in placement.assignments]
            assumptions = (replace(self.assumptions, nvlink_channel=True) if channel
                           else self.assumptions)
            pred = perfmodel.predict_pods(model=job.model, batch_size=job.batch_size,
                                          precision=self.precision, pods=pods,
                                          assumptions=assumptions)
            self.predictions[key] = pred
        return pred


def simulate(cluster: Cluster, jobs: Sequence[SimJob], policy: str, *, precision: str = "fp32",
             place: Callable | None = None, make_request: Callable | None = None,
             backfill_depth: int = DEFAULT_BACKFILL_DEPTH,
             progress: Callable[[int], None] | None = None,
             assumptions: perfmodel.Assumptions = perfmodel.DEFAULT_ASSUMPTIONS,
             ignore_partitions: bool = False) -> SimResult:
    """Run `jobs` (sorted by submit time) on `cluster` under `policy`; with
    `ignore_partitions`, placement does not see the nodes' NVLink partitions.

    `place(cluster, request, policy)` and `make_request(job)` default to mpijob.scheduling.placement's;
    `progress(n)` is called with the number of jobs finished or dropped so far."""
    if place is None or make_request is None:
        place = place or placement_mod.place
        make_request = make_request or (lambda j: placement_mod.PlacementRequest(
            workers=j.workers, gpus_per_worker=j.gpus_per_worker,
            node_selector=dict(j.node_selector)))
    sim = _Simulation(_State(cluster, precision, assumptions, ignore_partitions), jobs, policy, place,
                      make_request, backfill_depth, progress)
    return sim.run()


class _Simulation:
    """One policy's run: the event loop (arrivals, ends) and FIFO with EASY backfill."""

    def __init__(self, state: _State, jobs: Sequence[SimJob], policy: str, place: Callable,
                 make_request: Callable, backfill_depth: int,
                 progress: Callable[[int], None] | None) -> None:
        self.state, self.policy, self.place = state, policy, place
        self.make_request, self.backfill_depth, self.progress = make_request, backfill_depth, progress
        self.jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
        self.outcomes: list[JobOutcome | None] = [None] * len(self.jobs)
        self.requests: dict[int, object] = {}
        self.queue: list[int] = []  # indices into jobs, FIFO
        # job index -> (its pool's version, the placement found then or None): placement is
        # a function of the pool's state, so an unchanged pool gives the same answer.
        self.tried: dict[int, tuple[int, object]] = {}
        # (selector, workers, GPUs per worker) -> pool epoch at which such a job failed to place
        self.failed: dict[tuple, int] = {}
        self.running: list[tuple[float, int, int]] = []  # heap of (end, seq, job index)
        self.held: dict[int, tuple] = {}  # job index -> its placement's assignments
        self.overlap_cache: dict[tuple, bool] = {}
        self.seq = 0
        self.finished = 0
        self.calls = 0
        self.next_arrival = 0
        self.now = 0.0

    # --- the event loop -----------------------------------------------------------------
    def run(self) -> SimResult:
        jobs = self.jobs
        while self.next_arrival < len(jobs) or self.running:
            t_arr = jobs[self.next_arrival].submit_s if self.next_arrival < len(jobs) else math.inf
            t_end = self.running[0][0] if self.running else math.inf
            if t_end <= t_arr:
                self._end_jobs(t_end)
            else:
                self._admit_arrivals(t_arr)
            self.schedule()
        for k in self.queue:  # only reachable if a job can never start (should not happen)
            self.outcomes[k] = JobOutcome(jobs[k], dropped="never placed")
        final = [o for o in self.outcomes if o is not None]
        return SimResult(summarize(self.policy, final, self.state.total_gpus, self.calls),
                         tuple(final))

    def _end_jobs(self, now: float) -> None:
        self.now = now
        while self.running and self.running[0][0] == now:
            _, _, k = heapq.heappop(self.running)
            for a in self.held.pop(k):
                self.state.take(a.node, a.gpus, -1)
            self._count_done()

    def _admit_arrivals(self, now: float) -> None:
        self.now = now
        while self.next_arrival < len(self.jobs) and self.jobs[self.next_arrival].submit_s == now:
            k = self.next_arrival
            self.next_arrival += 1
            why = self.unplaceable(k)
            if why:
                self.drop(k, why)
            else:
                self.queue.append(k)

    def _count_done(self) -> None:
        self.finished += 1
        if self.progress:
            self.progress(self.finished)

    # --- one job ------------------------------------------------------------------------
    def request(self, k: int):
        if k not in self.requests:
            self.requests[k] = self.make_request(self.jobs[k])
        return self.requests[k]

    def try_place(self, k: int):
        job, state = self.jobs[k], self.state
        sel = job.node_selector
        state.pool(sel)
        version = state.pool_version[sel]
        seen = self.tried.get(k)
        if seen is not None and seen[0] == version:
            return seen[1]  # nothing changed in its pool since the last try
        shape = (sel, job.workers, job.gpus_per_worker)
        if state.pool_free[sel] < job.gpus or self.failed.get(shape) == state.pool_epoch[sel]:
            return None
        self.calls += 1
        pl = self.place(state.snapshot(sel), self.request(k), self.policy)
        if not pl.feasible:
            # Until GPUs of this pool are freed, every job of this shape fails the same way.
            self.failed[shape] = state.pool_epoch[sel]
            pl = None
        self.tried[k] = (version, pl)
        return pl

    def start(self, k: int, pl, pred: perfmodel.Prediction) -> None:
        job = self.jobs[k]
        for a in pl.assignments:
            self.state.take(a.node, a.gpus, +1)
        end = self.now + job.work_images / pred.images_per_sec
        self.held[k] = pl.assignments
        self.outcomes[k] = JobOutcome(job, self.now, end, pred.images_per_sec,
                                      len({a.node for a in pl.assignments}),
                                      pred.scaling_efficiency,
                                      nvlink_across_nodes=self.state.channel(pl))
        heapq.heappush(self.running, (end, self.seq, k))
        self.seq += 1

    def drop(self, k: int, why: str) -> None:
        self.outcomes[k] = JobOutcome(self.jobs[k], dropped=why)
        self._count_done()

    def unplaceable(self, k: int) -> str | None:
        job, state = self.jobs[k], self.state
        sel = job.node_selector
        state.pool(sel)
        if job.gpus > state.pool_total[sel]:
            return f"needs {plural(job.gpus, 'GPU')}; its pool has {state.pool_total[sel]}"
        if job.gpus_per_worker > state.pool_max_node[sel]:
            return f"a worker needs {plural(job.gpus_per_worker, 'GPU')}; no node of its pool has that many"
        return None

    # --- backfill -----------------------------------------------------------------------
    def shadow(self, head: int) -> tuple[float, int]:
        """When the head could start, counting GPUs of its pool, and the GPUs spare then."""
        state = self.state
        sel = self.jobs[head].node_selector
        members = set(state.pools[sel])
        avail = state.pool_free[sel]
        need = self.jobs[head].gpus
        for end, _, k in sorted(self.running):
            avail += sum(len(a.gpus) for a in self.held[k] if state.index[a.node] in members)
            if avail >= need:
                return end, avail - need
        return math.inf, 0

    def overlaps(self, a: int, b: int) -> bool:
        sa, sb = self.jobs[a].node_selector, self.jobs[b].node_selector
        if sa == sb:
            return True
        if (sa, sb) not in self.overlap_cache:
            self.overlap_cache[(sa, sb)] = bool(set(self.state.pool(sa)) & set(self.state.pool(sb)))
        return self.overlap_cache[(sa, sb)]

    def schedule(self) -> None:
        jobs, queue, state = self.jobs, self.queue, self.state
        head_res: tuple[float, int] | None = None
        i = 0
        looked = 0
        while i < len(queue) and looked <= self.backfill_depth:
            k = queue[i]
            is_head = i == 0
            if not is_head and self.overlaps(k, queue[0]):
                # Skip the placement call when no placement could pass the backfill rule.
                if head_res is None:
                    head_res = self.shadow(queue[0])
                shadow_t, extra = head_res
                if jobs[k].gpus > extra and self.now + state.fastest_run_s(jobs[k]) > shadow_t:
                    i += 1
                    looked += 1
                    continue
            pl = self.try_place(k)
            if pl is None:
                sel = jobs[k].node_selector
                if is_head and state.pool_free[sel] == state.pool_total[sel]:
                    queue.pop(0)
                    self.drop(k, "does not fit even on its empty pool")
                    continue
                i += 1
                looked += 1
                continue
            pred = state.predict(jobs[k], pl)
            if is_head:
                queue.pop(0)
                head_res = None
                self.start(k, pl, pred)
                continue
            ok = not self.overlaps(k, queue[0])
            if not ok:
                assert head_res is not None  # set when the head was blocked
                shadow_t, extra = head_res
                end = self.now + jobs[k].work_images / pred.images_per_sec
                if end <= shadow_t:
                    ok = True
                elif jobs[k].gpus <= extra:
                    head_res = (shadow_t, extra - jobs[k].gpus)
                    ok = True
            if ok:
                queue.pop(i)
                self.start(k, pl, pred)
            else:
                i += 1
            looked += 1
