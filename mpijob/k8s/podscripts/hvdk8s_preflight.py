"""hvdk8s preflight: check the GPUs and links a job was given, before the job's own program.

mpirun starts it on every rank of the job, with the job's own hostfile and line, just before
the user's program. It measures, and writes `HVDK8S_REPORT {json}` lines (kind "preflight")
that `hvdk8s get` reads from the launcher's log:

- per GPU (local rank 0 of each pod, through NVML where the image has nvidia-ml-py, else
  `nvidia-smi`): ECC errors and retired/remapped pages, XID errors where readable, why the
  clocks are throttled, the PCIe link against its maximum, and that the NVLinks the plan
  counted are up;
- per pod (a node's ranks): an all-reduce among its ranks;
- across pods: an all-reduce with one rank per pod, and pairs of pods when there are three
  or more (a slow pair names its node), and the whole job's all-reduce.

Bus bandwidth as nccl-tests reports it: busbw = 2(n-1)/n x bytes / time. Each figure is
judged against the plan's expectation (the model's bottleneck link for that path, given in
the plan file) below `threshold` x expected. The all-reduce is the image's own: Horovod on
the GPUs (NCCL) where horovod.torch is there, else mpi4py on host memory; an image with
neither gets the GPU checks only, and says so.

Exit status: 0, or 86 where the verdict is "fail" and the policy is "fail" (the launch line
then ends the job before the user's program starts). One file, Python 3.8, no dependency.

    python hvdk8s_preflight.py --plan /etc/hvdk8s/preflight.json
"""

# mypy: ignore-errors
# (it runs under the image's Python, 3.8 or later, with whichever of mpi4py, Horovod, torch
# and nvidia-ml-py the image has; hvdk8s never imports it)

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
from array import array

REPORT_PREFIX = "HVDK8S_REPORT "
FAILED_EXIT = 86
# Where each MPI tells a process its rank (as images/benchmark/hvdk8s_report.py reads it).
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK")
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "HOROVOD_SIZE")
# NVML clock throttle reasons that mean the hardware slowed itself (nvml.h
# nvmlClocksEventReasons: HW slowdown, thermal, power brake); idle and the application
# clock setting are not problems.
_THROTTLE_PROBLEMS = {0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                      0x40: "hardware thermal slowdown", 0x80: "power brake slowdown"}


def _env_int(names, default):
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


def report(kind, rank, **fields):
    record = {"kind": kind, "rank": int(rank), "time": time.time()}
    for key, value in fields.items():
        record[key] = None if isinstance(value, float) and not math.isfinite(value) else value
    sys.stdout.write(REPORT_PREFIX + json.dumps(record, separators=(",", ":"), sort_keys=True)
                     + "\n")
    sys.stdout.flush()


def busbw_gbs(nbytes, ranks, seconds):
    """nccl-tests' bus bandwidth of an all-reduce, GB/s."""
    if ranks < 2 or seconds <= 0:
        return None
    return 2.0 * (ranks - 1) / ranks * nbytes / seconds / 1e9


def judge(measured, expected, threshold):
    """'ok', 'slow' (below threshold x expected) or 'unjudged' (nothing expected)."""
    if measured is None or not expected:
        return "unjudged"
    return "slow" if measured < threshold * expected else "ok"


# ----------------------------------------------------------------------------- GPU checks
def _nvml_checks(expected_nvlinks):
    import pynvml as nv  # nvidia-ml-py, where the image has it

    nv.nvmlInit()
    out = []
    try:
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            gpu = {"gpu": index, "problems": [], "unreadable": []}

            def read(what, call, *args, handle=handle, gpu=gpu):
                try:
                    return call(handle, *args)
                except Exception:  # NOT_SUPPORTED and friends: said, not fatal
                    gpu["unreadable"].append(what)
                    return None

            uuid = read("uuid", nv.nvmlDeviceGetUUID)
            gpu["uuid"] = uuid.decode() if isinstance(uuid, bytes) else uuid
            ecc = read("ecc", nv.nvmlDeviceGetTotalEccErrors, 1, 1)  # uncorrected, volatile
            if ecc:
                gpu["problems"].append(f"{ecc} uncorrected ECC errors since boot")
            pending = read("retired pages", nv.nvmlDeviceGetRetiredPagesPendingStatus)
            if pending:
                gpu["problems"].append("retired pages pending (reset the GPU)")
            remap = read("row remapping", nv.nvmlDeviceGetRemappedRows)
            if remap and len(remap) >= 4 and remap[3]:
                gpu["problems"].append("row remapping failed")
            reasons = read("throttle reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons)
            for bit, why in sorted(_THROTTLE_PROBLEMS.items()):
                if reasons and reasons & bit:
                    gpu["problems"].append("clocks throttled: " + why)
            width = read("pcie width", nv.nvmlDeviceGetCurrPcieLinkWidth)
            max_width = read("pcie max width", nv.nvmlDeviceGetMaxPcieLinkWidth)
            gen = read("pcie generation", nv.nvmlDeviceGetCurrPcieLinkGeneration)
            max_gen = read("pcie max generation", nv.nvmlDeviceGetMaxPcieLinkGeneration)
            if width and max_width:
                gpu["pcie"] = f"x{width} gen{gen} of x{max_width} gen{max_gen}"
                if width < max_width:
                    gpu["problems"].append(f"PCIe link x{width} of x{max_width}")
            # An idle GPU may train its link down to save power: only width counts then.
            # A link NVML knows (its state reads) but inactive is down; past the last link
            # NVML answers INVALID_ARGUMENT, and a GPU without NVLink NOT_SUPPORTED.
            up, down = 0, []
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    state = nv.nvmlDeviceGetNvLinkState(handle, link)
                except Exception:
                    break
                if state:
                    up += 1
                else:
                    down.append(link)
            gpu["nvlinks_up"] = up
            if expected_nvlinks and up < expected_nvlinks:
                which = f" (down: {', '.join(map(str, down))})" if down else ""
                gpu["problems"].append(f"{up} of the {expected_nvlinks} NVLinks the plan "
                                       f"counted are up{which}")
            if not gpu["unreadable"]:
                del gpu["unreadable"]
            out.append(gpu)
    finally:
        nv.nvmlShutdown()
    return out, "nvml"


def _smi_checks(expected_nvlinks):
    fields = ("index,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
              "clocks_throttle_reasons.hw_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,"
              "pcie.link.width.current,pcie.link.width.max")
    text = subprocess.run(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20,
                          text=True, check=True).stdout
    out = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 8:
            continue
        gpu = {"gpu": int(cells[0]), "uuid": cells[1], "problems": []}
        if cells[2].isdigit() and int(cells[2]):
            gpu["problems"].append(f"{cells[2]} uncorrected ECC errors since boot")
        if cells[3] == "Yes":
            gpu["problems"].append("retired pages pending (reset the GPU)")
        for cell, why in ((cells[4], "hardware slowdown"), (cells[5], "hardware thermal slowdown")):
            if cell == "Active":
                gpu["problems"].append("clocks throttled: " + why)
        if cells[6].isdigit() and cells[7].isdigit():
            gpu["pcie"] = f"x{cells[6]} of x{cells[7]}"
            if int(cells[6]) < int(cells[7]):
                gpu["problems"].append(f"PCIe link x{cells[6]} of x{cells[7]}")
        if expected_nvlinks:
            gpu["unreadable"] = ["nvlinks"]
        out.append(gpu)
    return out, "nvidia-smi"


def xid_errors():
    """XID lines in the kernel log, where this container may read it (often not)."""
    try:
        text = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=5, text=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if not text:
        return None
    return [line.strip() for line in text.splitlines() if "NVRM: Xid" in line][-5:]


def gpu_checks(expected_nvlinks, gpus_expected):
    """Per-GPU findings and the source read, or ([], why not)."""
    if not gpus_expected:
        return [], "no GPUs in this job"
    for how in (_nvml_checks, _smi_checks):
        try:
            return how(expected_nvlinks)
        except Exception:
            continue
    return [], "neither NVML (nvidia-ml-py) nor nvidia-smi readable in the image"


# ---------------------------------------------------------------------------- all-reduce
class MpiComm:
    """mpi4py on host memory (the CPU path; also the GPU path where Horovod is absent)."""

    name = "mpi"

    def __init__(self):
        from mpi4py import MPI

        self.MPI = MPI
        self.world = MPI.COMM_WORLD
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()

    def own_group(self, groups):
        """This rank's communicator among `groups` (disjoint), made in one collective."""
        color = next((i for i, g in enumerate(groups) if self.rank in g), self.MPI.UNDEFINED)
        sub = self.world.Split(color, self.rank)
        return sub if sub != self.MPI.COMM_NULL else None

    def time_allreduce(self, comm, nbytes, iters, warmup):
        count = max(1, nbytes // 4)
        send, recv = array("f", bytes(4 * count)), array("f", bytes(4 * count))
        for _ in range(warmup):
            comm.Allreduce(send, recv, op=self.MPI.SUM)
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iters):
            comm.Allreduce(send, recv, op=self.MPI.SUM)
        return (time.perf_counter() - start) / iters, 4 * count

    def gather(self, value):
        return self.world.gather(value, root=0)

    def bcast(self, value):
        return self.world.bcast(value, root=0)


class HorovodComm:
    """The image's Horovod (horovod.torch, else horovod.tensorflow): process sets for the
    groups; on the GPUs its all-reduce is the job's own NCCL."""

    def __init__(self, groups, gpu):
        try:
            import horovod.torch as hvd
            import torch

            self.framework, self.lib = "torch", torch
        except ImportError:
            import horovod.tensorflow as hvd
            import tensorflow as tf

            self.framework, self.lib = "tensorflow", tf
        self.hvd, self.gpu = hvd, gpu
        self.name = "horovod-nccl" if gpu else "horovod-cpu"
        world = tuple(range(max((r for g in groups for r in g), default=0) + 1))
        # The whole job is Horovod's global set; the others are declared at init.
        self.sets = {tuple(g): hvd.ProcessSet(list(g)) for g in groups if tuple(g) != world}
        hvd.init(process_sets=list(self.sets.values()))
        self.sets[world] = hvd.global_process_set
        if gpu and self.framework == "torch":
            self.lib.cuda.set_device(hvd.local_rank())
        elif self.framework == "tensorflow":
            gpus = self.lib.config.list_physical_devices("GPU")
            if gpu and gpus:
                self.lib.config.experimental.set_memory_growth(gpus[hvd.local_rank()], True)
                self.lib.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
        self.rank, self.size = hvd.rank(), hvd.size()

    def own_group(self, groups):
        mine = next((g for g in groups if self.rank in g), None)
        return self.sets.get(tuple(mine)) if mine is not None else None

    def _tensor(self, count):
        if self.framework == "torch":
            return self.lib.zeros(count, dtype=self.lib.float32,
                                  device="cuda" if self.gpu else "cpu")
        with self.lib.device("/GPU:0" if self.gpu else "/CPU:0"):
            return self.lib.zeros([count], dtype=self.lib.float32)

    def _wait(self, result):
        if self.framework == "torch":
            if self.gpu:
                self.lib.cuda.synchronize()
        else:
            result.numpy()  # eager: the value is there once the all-reduce is done

    def time_allreduce(self, process_set, nbytes, iters, warmup):
        hvd = self.hvd
        count = max(1, nbytes // 4)
        tensor = self._tensor(count)
        result = tensor
        for i in range(warmup):
            result = hvd.allreduce(tensor, op=hvd.Sum, process_set=process_set, name=f"w{i}")
        self._wait(result)
        hvd.allreduce(self._tensor(1), op=hvd.Sum, process_set=process_set, name="barrier")
        start = time.perf_counter()
        for i in range(iters):
            result = hvd.allreduce(tensor, op=hvd.Sum, process_set=process_set, name=f"t{i}")
        self._wait(result)
        return (time.perf_counter() - start) / iters, 4 * count

    def gather(self, value):
        values = self.hvd.allgather_object(value)
        return values if self.rank == 0 else None

    def bcast(self, value):
        return self.hvd.broadcast_object(value, root_rank=0)


def under_mpirun():
    return any(name in os.environ for name in _RANK_VARIABLES[:3])


def open_comm(gpu_job, groups):
    """The image's own all-reduce: under mpirun, Horovod on the GPUs, else mpi4py (Horovod
    on CPU tensors where mpi4py is absent); under horovodrun (elastic jobs), Horovod. None:
    the image has neither."""
    tries = []
    if under_mpirun():
        if gpu_job:
            tries.append(lambda: HorovodComm(groups, True))
        tries += [MpiComm, lambda: HorovodComm(groups, False)]
    else:
        tries.append(lambda: HorovodComm(groups, gpu_job))
    for make in tries:
        try:
            return make()
        except Exception:
            continue
    return None


# ---------------------------------------------------------------------------------- plan
def rank_groups(pods):
    """The world ranks of each pod: mpirun --map-by slot fills the hostfile in order."""
    out, start = [], 0
    for pod in pods:
        out.append(list(range(start, start + int(pod["slots"]))))
        start += int(pod["slots"])
    return out


def pair_rounds(count):
    """Pods paired so that every pod is in two pairs, each round's pairs disjoint:
    (0,1),(2,3)... then (1,2),(3,4)...; with an odd count, (n-1,0) last."""
    if count < 3:
        return []
    rounds = [[(i, i + 1) for i in range(0, count - 1, 2)],
              [(i, (i + 1) % count) for i in range(1, count, 2)]]
    if count % 2:
        rounds.append([(count - 1, 0)])
    return rounds


def measurements(plan):
    """Every all-reduce to run, in rounds (the groups of one round run at once): a list of
    rounds, each a list of (path, key, ranks)."""
    pods = plan["pods"]
    groups = rank_groups(pods)
    rounds = [[("node", i, g) for i, g in enumerate(groups) if len(g) > 1]]
    if len(pods) > 1:
        rounds.append([("nodes", 0, [g[0] for g in groups])])
        for pairs in pair_rounds(len(pods)):
            rounds.append([("pair", f"{a}-{b}", [groups[a][0], groups[b][0]])
                           for a, b in pairs])
        if sum(len(g) for g in groups) > len(groups):
            rounds.append([("job", 0, [r for g in groups for r in g])])
    return [r for r in rounds if r]


def uniform(plan, size, slots):
    """The plan of an elastic job at its start: as many pods of `slots` ranks as the world
    holds, each expected what the plan's first (the slowest planned) pod is; pairs as the
    slowest planned pair."""
    template = {k: v for k, v in (plan.get("pods") or [{}])[0].items() if k not in ("node", "host")}
    count = max(1, size // slots)
    out = dict(plan, pods=[dict(template, slots=slots) for _ in range(count)])
    pairs = list((plan.get("pairs") or {}).values())
    if pairs:
        lowest = min(pairs, key=lambda e: e.get("gbs") or 0)
        out["pairs"] = {f"{a}-{b}": lowest for rnd in pair_rounds(count) for a, b in rnd}
    return out


def expected_for(plan, path, key):
    if path == "node":
        return plan["pods"][key].get("node_path") or {}
    if path == "pair":
        return (plan.get("pairs") or {}).get(key) or {}
    return plan.get(path) or {}


# ------------------------------------------------------------------------------ verdict
def findings(plan, results, gpu_reports, pod_hosts):
    """What failed, named: GPUs, nodes (their pods), pairs of nodes, the paths across."""
    pods = plan["pods"]

    def where(i):
        node, host = pods[i].get("node"), pod_hosts.get(i) or "?"
        return f"node {node} (pod {host})" if node else f"pod {host}"

    out = []
    for g in gpu_reports:
        if g.get("problems"):
            out.append(f"GPU {g['gpu']} of {where(g['pod'])}: {'; '.join(g['problems'])}")
    pair_count = {}
    for r in results:
        if r["path"] == "pair":
            for i in r["pods"]:
                seen, slow = pair_count.get(i, (0, 0))
                pair_count[i] = (seen + 1, slow + (r["verdict"] == "slow"))
    # A pod in two pairs, both slow, is the slow one; a single slow pair names both ends.
    named = {i for i, (seen, slow) in pair_count.items() if seen >= 2 and slow == seen}
    slow_pairs = any(r["path"] == "pair" and r["verdict"] == "slow" for r in results)
    for r in results:
        if r["verdict"] != "slow":
            continue
        figures = (f"{r['busbw_gbs']:.3g} GB/s busbw, expected {r['expected_gbs']:.3g} "
                   f"({r.get('link') or 'model'})")
        if r["path"] == "node":
            out.append(f"{where(r['pods'][0])}: all-reduce of its {r['ranks']} ranks {figures}")
        elif r["path"] == "pair" and not set(r["pods"]) & named:
            a, b = r["pods"]
            out.append(f"{where(a)} and {where(b)}: all-reduce between them {figures}")
        elif r["path"] in ("nodes", "job") and not slow_pairs:
            what = "across nodes (one rank each)" if r["path"] == "nodes" else "whole job"
            out.append(f"{what}: {figures}")
    for i in sorted(named):
        out.append(f"{where(i)}: every all-reduce with it is slow ({pair_count[i][0]} pairs)")
    return out


def run(plan, policy, threshold, iters, warmup, nbytes):
    started = time.perf_counter()
    rank = _env_int(_RANK_VARIABLES, 0)
    pods = plan["pods"]
    groups = rank_groups(pods)
    gpu_job = bool(plan.get("gpus"))
    comm = open_comm(gpu_job, [ranks for rnd in measurements(plan) for _, _, ranks in rnd])
    if comm is not None:
        rank = comm.rank
    my_pod = next((i for i, g in enumerate(groups) if rank in g), 0)
    mine = {"rank": rank, "host": socket.gethostname(), "pod": my_pod}
    if groups and groups[my_pod] and groups[my_pod][0] == rank:
        gpus, source = gpu_checks(pods[my_pod].get("nvlinks"), gpu_job)
        mine["gpus"], mine["gpu_source"] = gpus, source
        mine["xid"] = xid_errors() if gpu_job else None
    mine["timings"] = []
    if comm is not None:
        for rnd in measurements(plan):  # the groups of a round are disjoint: run at once
            handle = comm.own_group([ranks for _, _, ranks in rnd])
            if handle is None:
                continue
            path, key, ranks = next(m for m in rnd if rank in m[2])
            seconds, sent = comm.time_allreduce(handle, nbytes, iters, warmup)
            mine["timings"].append([path, key, ranks, seconds, sent])
    gathered = comm.gather(mine) if comm is not None else [mine]
    verdict = None
    if rank == 0:
        verdict = summarize(plan, gathered, policy, threshold, comm, started)
    if comm is not None:
        verdict = comm.bcast(verdict)
    return FAILED_EXIT if verdict == "fail" and policy == "fail" else 0


def summarize(plan, gathered, policy, threshold, comm, started):
    pods = plan["pods"]
    gpu_reports = []
    for rank_info in gathered:
        pod = pods[rank_info["pod"]] if rank_info["pod"] < len(pods) else {}
        for g in rank_info.get("gpus") or []:
            g = dict(g, host=rank_info["host"], node=pod.get("node"), pod=rank_info["pod"])
            g["verdict"] = "unhealthy" if g.get("problems") else "ok"
            gpu_reports.append(g)
            report("preflight", 0, check="gpu", **g)
        if rank_info.get("xid"):
            report("preflight", 0, check="xid", host=rank_info["host"], node=pod.get("node"),
                   lines=rank_info["xid"])
    # One figure per group: its slowest member's time (every rank waits for it).
    by_group = {}
    hosts = {info["rank"]: info["host"] for info in gathered}
    for info in gathered:
        for path, key, ranks, seconds, sent in info["timings"]:
            entry = by_group.setdefault((path, str(key)), [key, ranks, 0.0, sent])
            entry[2] = max(entry[2], seconds)
    results = []
    for (path, _), (key, ranks, seconds, sent) in sorted(by_group.items()):
        expect = expected_for(plan, path, key)
        measured = busbw_gbs(sent, len(ranks), seconds)
        groups = rank_groups(pods)
        member_pods = sorted({i for i, g in enumerate(groups) for r in ranks if r in g})
        r = {"path": path, "pods": member_pods, "ranks": len(ranks), "bytes": sent,
             "seconds": seconds, "busbw_gbs": measured,
             "expected_gbs": expect.get("gbs"), "link": expect.get("link"),
             "link_kind": expect.get("kind"), "host": hosts.get(ranks[0]),
             "nodes": [pods[i].get("node") for i in member_pods],
             "backend": comm.name if comm is not None else None}
        if plan.get("gpus") and r["backend"] != "horovod-nccl":
            r["expected_gbs"] = None  # host memory through MPI: not the GPUs' links
        r["verdict"] = judge(measured, r["expected_gbs"], threshold)
        results.append(r)
        report("preflight", 0, check="allreduce", **r)
    pod_hosts = {}
    for info in sorted(gathered, key=lambda i: i["rank"]):
        pod_hosts.setdefault(info["pod"], info["host"])
    found = findings(plan, results, gpu_reports, pod_hosts)
    verdict = "fail" if found else "pass"
    notes = []
    if comm is None:
        notes.append("no mpi4py or Horovod in the image: all-reduce not measured")
    elif plan.get("gpus") and comm.name == "mpi":
        notes.append("no Horovod in the image: all-reduce measured by MPI on host memory, "
                     "not judged against the GPU links")
    sources = sorted({info.get("gpu_source") for info in gathered if info.get("gpu_source")})
    report("preflight", 0, check="summary", verdict=verdict, policy=policy,
           threshold=threshold, findings=found, notes=notes, gpu_checks=sources,
           backend=comm.name if comm is not None else None, ranks=len(gathered),
           seconds=time.perf_counter() - started)
    return verdict


def main(argv=None):
    parser = argparse.ArgumentParser(description="hvdk8s preflight")
    parser.add_argument("--plan", help="the plan file (JSON) hvdk8s wrote")
    parser.add_argument("--plan-json", help="the plan itself, as JSON")
    parser.add_argument("--policy", choices=("warn", "fail"), default="warn")
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--bytes", type=int, default=None)
    parser.add_argument("--uniform-slots", type=int, default=None,
                        help="elastic: pods of this many ranks, as many as the world holds")
    args = parser.parse_args(argv)
    if args.plan_json:
        plan = json.loads(args.plan_json)
    elif args.plan:
        with open(args.plan) as f:
            plan = json.load(f)
    else:
        size = _env_int(_SIZE_VARIABLES, 1)
        plan = {"pods": [{"slots": size}]}
    if args.uniform_slots:
        plan = uniform(plan, _env_int(_SIZE_VARIABLES, args.uniform_slots), args.uniform_slots)
    threshold = args.threshold if args.threshold is not None else plan.get("threshold", 0.7)
    nbytes = args.bytes or plan.get("bytes") or (64 << 20 if plan.get("gpus") else 8 << 20)
    iters = args.iters or plan.get("iters", 5)
    warmup = args.warmup if args.warmup is not None else plan.get("warmup", 2)
    return run(plan, args.policy, threshold, iters, warmup, nbytes)


if __name__ == "__main__":
    sys.exit(main())
