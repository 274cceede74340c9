"""What the preflight should measure on this placement, and how its figures are judged.

The preflight (mpijob/k8s/podscripts/hvdk8s_preflight.py) runs all-reduces over kinds of
path before the user's program: the ranks of one pod ("node": NVLink or PCIe inside it),
one rank per pod ("nodes": the network, or the NVLink fabric of an NVL72 partition), pairs
of pods ("pair": a slow pair names its nodes) and the whole job ("job"). Each is reported as
nccl-tests' bus bandwidth, busbw = 2(n-1)/n x bytes / time, which for a ring equals the
bandwidth of its slowest link: the quantity the throughput model already computes.

So the expectation of a path is the model's own all-reduce of the same bytes over the
same GPUs (mpijob.perf.perfmodel.allreduce_candidates: the better of the ring and the
hierarchical schedule, latency included), turned into busbw. A path is "slow" when it
measures below `threshold` x expected.

DEFAULT_THRESHOLD (0.7) is set by the faults it must catch and the noise it must not:
- caught: RDMA silently falling back to TCP (the model's TCP/RDMA efficiencies, 0.6/0.92:
  0.65 of expected), a PCIe link trained at half width (0.5), a NIC at a lower speed
  (0.1-0.4), a node's NVLinks down (NCCL then goes through PCIe: 0.03-0.3);
- tolerated: nccl-tests' busbw at 64 MiB is 0.75-0.95 of the links' effective figures the
  model uses (NVIDIA's published DGX and HGX results; at 64 MiB NCCL is near its plateau),
  and run-to-run noise on GPUs is a few percent (NCCL on dedicated links). Not measured
  here: this session had no GPU. On CPUs the spread is far wider (this shared 2-core VM:
  0.73 to 1.39 of the mean under load, benchmarks/preflight/measured.json), which is why
  CPU figures are reported and not judged.
A GPU's health (ECC, retired pages, throttling, PCIe width, NVLinks up) is judged by the
program itself: those are facts, not figures against a model.

Pure: the plan is a dict the program reads (JSON in the job's ConfigMap or its line).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mpijob.perf import perfdata
from mpijob.perf.calibration import LINK_KINDS, LinkBandwidth
from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, Assumptions, allreduce_candidates
from mpijob.scheduling import links
from mpijob.scheduling.cluster import Node

DEFAULT_THRESHOLD = 0.7
GPU_BYTES = 64 << 20  # near NCCL's bandwidth plateau, a few ms on any link
CPU_BYTES = 8 << 20  # MPI on host memory: tens of ms on a small machine
ITERS, WARMUP = 5, 2
# The program's exit when its verdict is "fail" under --preflight fail (the launch line ends
# the job on it, before the user's program).
FAILED_EXIT = 86
# Fixed cost of a preflight: mpirun's start over ssh, Python, Horovod/NCCL or mpi4py set up.
# CPU: measured on this 2-core VM, 4 ranks (benchmarks/preflight/README.md). GPU: an
# assumption (torch and horovod.torch imports ~3 s, NCCL communicators ~1 s per process set).
START_SECONDS = {"cpu": 3.5, "gpu": 10.0}
NCCL_INIT_SECONDS_PER_SET = 1.0
PATHS = ("node", "nodes", "pair", "job")


@dataclass(frozen=True)
class Expected:
    """The model's expectation of one path: busbw (GB/s), the bottleneck, its link kind
    (mpijob.perf.calibration.LINK_KINDS: what `calibrate` fits from the measurement)."""

    gbs: float
    link: str
    kind: str

    def to_json(self) -> dict:
        return {"gbs": round(self.gbs, 4), "link": self.link, "kind": self.kind}


Pod = tuple[Node, tuple[int, ...]]


def link_kind(bottleneck: str) -> str:
    """The calibration's link kind of a bottleneck as perfmodel describes it."""
    if bottleneck.startswith(("network", "inter-rack")):
        return "net"
    if bottleneck.startswith("pod-to-pod"):
        return "shm"
    if "NVLink" in bottleneck:
        return "nvlink"
    return "pcie"


def expected(pods: Sequence[Pod], nbytes: int = GPU_BYTES,
             assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> Expected | None:
    """The busbw the model predicts for an all-reduce of `nbytes` over every GPU of `pods`
    (None: fewer than two GPUs, nothing to reduce)."""
    n = sum(len(gpus) for _, gpus in pods)
    if n < 2:
        return None
    best = min(allreduce_candidates(pods, assumptions, []),
               key=lambda c: c.seconds(nbytes, 1.0))
    seconds = best.seconds(nbytes, 1.0)
    return Expected(2 * (n - 1) / n * nbytes / seconds / 1e9, best.bottleneck,
                    link_kind(best.bottleneck))


def nvlinks_expected(node: Node, gpus: Sequence[int]) -> int:
    """The fewest NVLinks the plan counts on any of the pod's GPUs (0: it counts none): its
    links to the node's other GPUs, at most what one GPU has."""
    topo = node.topology
    gpu = perfdata.normalize_gpu(node.gpu_model) or ""
    cap = perfdata.NVLINKS_PER_GPU.get(gpu)
    counts = []
    for g in gpus:
        if g >= topo.gpus:
            return 0
        total = sum(links.nvlink_count(topo.link(g, other)) for other in range(topo.gpus)
                    if other != g)
        counts.append(min(total, cap) if cap else total)
    return min(counts, default=0)


def one_rank_each(pods: Sequence[Pod]) -> list[Pod]:
    return [(node, gpus[:1]) for node, gpus in pods]


def pair_rounds(count: int) -> list[list[tuple[int, int]]]:
    """The pairs of pods the program measures, in rounds of disjoint pairs run at once, so
    that every pod is in two pairs: (0,1),(2,3)... then (1,2),(3,4)...; (n-1,0) last when
    the count is odd (the program's own pair_rounds)."""
    if count < 3:
        return []
    rounds = [[(i, i + 1) for i in range(0, count - 1, 2)],
              [(i, (i + 1) % count) for i in range(1, count, 2)]]
    if count % 2:
        rounds.append([(count - 1, 0)])
    return rounds


def pair_keys(count: int) -> list[tuple[int, int]]:
    return [pair for rnd in pair_rounds(count) for pair in rnd]


def gpu_plan(pods: Sequence[Pod], slots: Sequence[int], *, hosts: Sequence[str] | None = None,
             assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
             threshold: float = DEFAULT_THRESHOLD, nbytes: int = GPU_BYTES) -> dict:
    """The program's plan for a GPU job: per pod in hostfile order (its node, ranks, the
    NVLinks counted, the expectation of its own all-reduce), and the expectations across
    pods, pairs of pods and the whole job."""
    plan: dict = {"gpus": True, "threshold": threshold, "bytes": nbytes,
                  "iters": ITERS, "warmup": WARMUP, "pods": []}
    for i, ((node, gpus), count) in enumerate(zip(pods, slots, strict=True)):
        pod: dict = {"slots": count, "node": node.name}
        if hosts:
            pod["host"] = hosts[i]
        nvl = nvlinks_expected(node, gpus) if len(gpus) > 1 else 0
        if nvl:
            pod["nvlinks"] = nvl
        own = expected([(node, gpus)], nbytes, assumptions)
        if own is not None:
            pod["node_path"] = own.to_json()
        plan["pods"].append(pod)
    if len(pods) > 1:
        heads = one_rank_each(pods)
        across = expected(heads, nbytes, assumptions)
        if across is not None:
            plan["nodes"] = across.to_json()
        pairs = {}
        for a, b in pair_keys(len(pods)):
            pair = expected([heads[a], heads[b]], nbytes, assumptions)
            if pair is not None:
                pairs[f"{a}-{b}"] = pair.to_json()
        if pairs:
            plan["pairs"] = pairs
        whole = expected(pods, nbytes, assumptions)
        if whole is not None and sum(slots) > len(pods):
            plan["job"] = whole.to_json()
    return plan


def plain_plan(slots: Sequence[int], *, gpus: bool = False,
               nodes: Sequence[str] | None = None, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """A plan without expectations: the ranks of each pod. A CPU job's (the model has no CPU
    MPI all-reduce) or one placed by the scheduler: its figures are reported, not judged."""
    pods = [{"slots": s, **({"node": nodes[i]} if nodes else {})} for i, s in enumerate(slots)]
    return {"gpus": gpus, "threshold": threshold, "bytes": GPU_BYTES if gpus else CPU_BYTES,
            "iters": ITERS, "warmup": WARMUP, "pods": pods}


def for_elastic(plan: dict, gpus_per_worker: int) -> dict:
    """An elastic job's plan: its workers at the start are whichever are Ready, one pod each,
    on nodes the plan may not have picked. A pod is expected what the slowest planned pod
    of one worker's GPUs is (where the plan has such pods); nothing is expected across pods,
    whose nodes and pairs are known only then. The program makes one pod per worker of it
    (--uniform-slots)."""
    own = [p for p in plan.get("pods") or [] if p.get("slots") == gpus_per_worker]
    pod: dict = {"slots": gpus_per_worker}
    if own and all(p.get("node_path") for p in own):
        pod["node_path"] = min((p["node_path"] for p in own), key=lambda e: e["gbs"])
    if own and min(p.get("nvlinks", 0) for p in own):
        pod["nvlinks"] = min(p["nvlinks"] for p in own)
    return {k: v for k, v in plan.items() if k not in ("nodes", "pairs", "job")} | {"pods": [pod]}


def for_template(plan: dict, slots: Sequence[int]) -> dict | None:
    """A plan for uniform workers from one template (operator, TrainJob modes), where the
    operator decides which worker runs on which planned node: every pod is expected what
    the slowest planned pod is, and named by its host, not a node. None where the planned
    pods are not these."""
    pods = plan.get("pods") or []
    if len(pods) != len(slots):
        return None
    own = [p["node_path"] for p in pods if p.get("node_path")]
    lowest = min(own, key=lambda e: e["gbs"]) if len(own) == len(pods) else None
    links_counted = [p.get("nvlinks", 0) for p in pods]
    out = []
    for count in slots:
        pod: dict = {"slots": count}
        if lowest is not None:
            pod["node_path"] = lowest
        if min(links_counted, default=0):
            pod["nvlinks"] = min(links_counted)
        out.append(pod)
    pairs = plan.get("pairs") or {}
    lowest_pair = min(pairs.values(), key=lambda e: e["gbs"]) if pairs else None
    return {**plan, "pods": out,
            **({"pairs": {k: lowest_pair for k in pairs}} if lowest_pair else {})}


# ---------------------------------------------------------------------------- judgement
def judge(measured_gbs: float | None, expected_gbs: float | None,
          threshold: float = DEFAULT_THRESHOLD) -> str:
    """"ok", "slow" (below threshold x expected) or "unjudged" (nothing expected)."""
    if measured_gbs is None or not expected_gbs:
        return "unjudged"
    return "slow" if measured_gbs < threshold * expected_gbs else "ok"


def _rounds(plan: dict) -> list[list[tuple[int, float | None]]]:
    """(ranks, expected GB/s) of each group, round by round, as the program runs them."""
    pods = plan["pods"]
    rounds = [[(int(p["slots"]), (p.get("node_path") or {}).get("gbs")) for p in pods
               if int(p["slots"]) > 1]]
    if len(pods) > 1:
        rounds.append([(len(pods), (plan.get("nodes") or {}).get("gbs"))])
        pairs = plan.get("pairs") or {}
        rounds += [[(2, (pairs.get(f"{a}-{b}") or {}).get("gbs")) for a, b in rnd]
                   for rnd in pair_rounds(len(pods))]
        total = sum(int(p["slots"]) for p in pods)
        if total > len(pods):
            rounds.append([(total, (plan.get("job") or {}).get("gbs"))])
    return [r for r in rounds if r]


def estimated_seconds(plan: dict) -> float:
    """The preflight's cost by the model's arithmetic: its fixed start, NCCL's communicators
    for each round's groups (made at once, disjoint), and every round's all-reduces at the
    expected busbw, warm-up included; a round lasts as long as its slowest group."""
    gpu = bool(plan.get("gpus"))
    nbytes = int(plan.get("bytes") or (GPU_BYTES if gpu else CPU_BYTES))
    reps = int(plan.get("iters", ITERS)) + int(plan.get("warmup", WARMUP))
    rounds = _rounds(plan)
    total = START_SECONDS["gpu" if gpu else "cpu"]
    if gpu:
        total += NCCL_INIT_SECONDS_PER_SET * len(rounds)
    for groups in rounds:
        worst = 0.0
        for ranks, gbs in groups:
            if ranks > 1 and gbs:
                worst = max(worst, 2 * (ranks - 1) / ranks * nbytes / (gbs * 1e9))
        total += reps * worst
    return total


@dataclass(frozen=True)
class Verdict:
    """What a job's preflight said: "pass", "fail", "running" (no summary yet) or "none";
    the hardware named; each path's figure."""

    verdict: str
    policy: str | None
    findings: tuple[str, ...]
    paths: tuple[dict, ...]
    gpus: tuple[dict, ...]
    notes: tuple[str, ...] = ()
    seconds: float | None = None

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "policy": self.policy, "findings": list(self.findings),
                "paths": list(self.paths), "gpus": list(self.gpus), "notes": list(self.notes),
                "seconds": self.seconds}


def verdict_of(reports: Iterable[dict], threshold: float | None = None) -> Verdict:
    """The preflight's reports (kind "preflight") as one verdict. Each path is judged again
    here (the same rule as the program's; `threshold`: another than the job's)."""
    paths, gpus, summary = [], [], None
    for r in reports:
        check = r.get("check")
        if check == "allreduce":
            paths.append(r)
        elif check == "gpu":
            gpus.append(r)
        elif check == "summary":
            summary = r
    if summary is None:
        return Verdict("running" if paths or gpus else "none", None, (), tuple(paths), tuple(gpus))
    limit = threshold if threshold is not None else float(summary.get("threshold") or DEFAULT_THRESHOLD)
    judged = tuple({**p, "verdict": judge(p.get("busbw_gbs"), p.get("expected_gbs"), limit)}
                   for p in paths)
    findings = tuple(summary.get("findings") or ())
    if threshold is not None:  # judged here, so the program's names do not apply
        findings = tuple(f for f in findings if f.startswith("GPU ")) + tuple(
            f"{p['path']} {'/'.join(n or '?' for n in p.get('nodes') or [])}: "
            f"{p['busbw_gbs']:.3g} GB/s busbw, expected {p['expected_gbs']:.3g}"
            for p in judged if p["verdict"] == "slow")
    return Verdict("fail" if findings else "pass", summary.get("policy"), findings, judged,
                   tuple(gpus), tuple(summary.get("notes") or ()), summary.get("seconds"))


def measured_links(reports: Iterable[dict]) -> dict[str, list[float]]:
    """Measured busbw per calibration link kind, from the judged paths of preflights run
    with the GPUs' own all-reduce (a ring's busbw is its slowest link's bandwidth)."""
    out: dict[str, list[float]] = {}
    for r in reports:
        if r.get("check") != "allreduce" or not r.get("busbw_gbs") or not r.get("link_kind"):
            continue
        if r.get("expected_gbs") is None:  # host memory or no model: not that link
            continue
        if r.get("path") == "job":  # a mix of links; the single-link paths say more
            continue
        out.setdefault(str(r["link_kind"]), []).append(float(r["busbw_gbs"]))
    return out


def fitted_links(measured: dict[str, list[float]]):
    """The calibration's link bandwidths from preflight figures: per kind, their mean and its
    standard error (mpijob.perf.calibration.LinkBandwidth; busbw is the ring's slowest link,
    which is what the model's link bandwidth means). The 64 MiB figures carry NCCL's latency,
    a few percent below the pure bandwidth on every link but the NVL72 fabric's."""
    out = []
    for kind, values in sorted(measured.items()):
        if kind not in LINK_KINDS or not values:
            continue
        mean = sum(values) / len(values)
        err = (math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
               if len(values) > 1 else None)
        out.append(LinkBandwidth(kind=kind, gbs=mean, gbs_stderr=err, runs=len(values)))
    return out


def describe(plan: dict, policy: str) -> str:
    """One line for submit: what the preflight will expect, what it costs, what it does."""
    own = [p["node_path"]["gbs"] for p in plan.get("pods") or [] if p.get("node_path")]
    parts = []
    if own:
        parts.append(f"{min(own):.3g} GB/s in a node")
    if plan.get("nodes"):
        parts.append(f"{plan['nodes']['gbs']:.3g} GB/s across nodes")
    expects = f"expects busbw {', '.join(parts)}" if parts else "nothing to expect"
    then = "the program does not start" if policy == "fail" else "the program starts, get says so"
    return (f"preflight ({policy}): about {estimated_seconds(plan):.0f} s before the program "
            f"by the model; {expects}; below {plan.get('threshold', DEFAULT_THRESHOLD):g} of "
            f"that it names the slow node, and {then} (--preflight off skips it)")
