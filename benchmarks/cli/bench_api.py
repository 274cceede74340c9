"""What hvdk8s costs the API server, and itself, on generated clusters of 500 to 5,000 nodes.

The in-process test API server (kubesim) is filled with N nodes (90 % with
8 GPUs, a third of those full, a third half-used) and PODS_PER_NODE live pods a node of
realistic size (4-8 KB of JSON each: labels, owner references, managed fields, env,
volumes, container statuses), and each command runs as a user runs it, in its own process:

- `submit` of a 64-worker x 8-GPU job (pods mode),
- `plan` of the same job,
- `wait` on a running job for --wait-seconds (requests a minute),
- `list -A` over 500 jobs of 8 pods (bench_list.py's jobs),

measuring wall time, the command's CPU seconds (the test server runs on the same machine,
so the wall time includes its serialising; the CPU time is the command's own), the test
server's CPU seconds meanwhile (server_cpu_s: this process, the server and its scheduler),
requests, response bytes and the command's peak RSS (os.wait4); plan, submit and list run --repeat
times and the median run is kept. --code LABEL=DIR (several) runs the CLI of each checkout
(e.g. the code before a change) against the same cluster, one after the other, so that
before and after are measured alike. --profile DIR adds one cProfile'd submit per cluster.

    git archive OLD | tar -x -C /tmp/before      # the code before, to compare
    .venv/bin/python benchmarks/cli/bench_api.py --code before=/tmp/before after=. \
        --out benchmarks/cli/api_results.json
    .venv/bin/python benchmarks/cli/bench_api.py --plot benchmarks/cli/api_results.json
    .venv/bin/python benchmarks/cli/bench_api.py --nodes 5000 --pods-per-node 30 \
        --list-jobs 0 --repeat 1 --out benchmarks/cli/api_results_150k.json   # 150,000 pods
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kubesim.server import KubeAPIServer  # noqa: E402
from kubesim.util import now_rfc3339  # noqa: E402

CLI = "import sys; from launcher.cli.app import main; sys.exit(main(sys.argv[1:]))"
PODS_PER_NODE = 10
NAMESPACES = [f"team-{i:02d}" for i in range(20)]
SYSTEM_PODS = ("kube-proxy", "node-exporter", "calico-node", "fluent-bit", "nvidia-dcgm")


def _fill(rng: random.Random, target: int, body: dict) -> dict:
    """Pads a pod with env vars until its JSON is about `target` bytes."""
    env = body["spec"]["containers"][0].setdefault("env", [])
    size = len(json.dumps(body))
    while size < target:
        value = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(120))
        env.append({"name": f"SETTING_{len(env)}", "value": value})
        size += 150
    return body


def make_pod(rng: random.Random, name: str, ns: str, node: str, gpus: int) -> dict:
    now = now_rfc3339()
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name.rsplit("-", 1)[0],
             "uid": str(uuid.UUID(int=rng.getrandbits(128))), "controller": True,
             "blockOwnerDeletion": True}
    resources = {"requests": {"cpu": f"{rng.choice((100, 250, 500, 1000, 2000))}m",
                              "memory": f"{rng.choice((128, 256, 512, 1024, 4096))}Mi"},
                 "limits": {"memory": "8Gi"}}
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    container = {
        "name": "main", "image": f"registry.example.com/{ns}/app:v{rng.randint(1, 99)}",
        "imagePullPolicy": "IfNotPresent", "args": ["--port=8080", "--log-level=info"],
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "resources": resources,
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                         {"name": "kube-api-access", "mountPath":
                          "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "uid": str(uuid.UUID(int=rng.getrandbits(128))),
            "creationTimestamp": now, "generateName": name.rsplit("-", 1)[0] + "-",
            "labels": {"app": name.rsplit("-", 2)[0], "pod-template-hash": "5d8f7c9b6",
                       "team": ns},
            "annotations": {"kubectl.kubernetes.io/restartedAt": now,
                            "prometheus.io/scrape": "true"},
            "ownerReferences": [owner],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": now, "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                            "f:spec": {"f:containers": {'k:{"name":"main"}': {
                                                ".": {}, "f:image": {}, "f:resources": {}}}}}}]},
        "spec": {"nodeName": node, "containers": [container], "restartPolicy": "Always",
                 "serviceAccountName": "default", "schedulerName": "default-scheduler",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}],
                 "volumes": [{"name": "config", "configMap": {"name": "app-config"}},
                             {"name": "kube-api-access", "projected": {"sources": [
                                 {"serviceAccountToken": {"path": "token"}}]}}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.244.0.5",
                   "startTime": now, "qosClass": "Burstable",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                                  for t in ("Initialized", "Ready", "ContainersReady",
                                            "PodScheduled")],
                   "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                          "image": container["image"], "imageID": "sha256:" +
                                          f"{rng.getrandbits(256):064x}", "containerID":
                                          "containerd://" + f"{rng.getrandbits(256):064x}",
                                          "started": True,
                                          "state": {"running": {"startedAt": now}}}]}}
    return _fill(rng, rng.randint(4000, 8000), body)


def populate(srv: KubeAPIServer, nodes: int, pods_per_node: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    images = [{"names": [f"registry.example.com/base/image-{k}@sha256:{k:064x}",
                         f"registry.example.com/base/image-{k}:v1"], "sizeBytes": 10**8 + k}
              for k in range(12)]
    count = 0
    for i in range(nodes):
        name = f"node-{i:05d}"
        gpu = i % 10 != 9
        labels = {"topology.kubernetes.io/zone": f"zone-{i % 3}", "rack": f"rack-{i // 32}"}
        if gpu:
            labels.update({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                           "nvidia.com/gpu.count": "8"})
        node = srv.add_node(name, gpus=8 if gpu else 0, labels=labels, cpu="128",
                            memory="1024Gi")
        srv.store.mutate("/nodes", "", name, lambda n: n["status"].update(images=images))
        used = (8, 4, 0)[i % 3] if gpu else 0
        gpu_pods = [4] * (used // 4)
        for j in range(pods_per_node):
            ns = NAMESPACES[(i + j) % len(NAMESPACES)] if j >= len(SYSTEM_PODS) else "kube-system"
            app = SYSTEM_PODS[j] if j < len(SYSTEM_PODS) else f"svc{(i * 7 + j) % 97}"
            gpus = gpu_pods.pop() if gpu_pods and j >= len(SYSTEM_PODS) else 0
            srv.store.create("/pods", make_pod(rng, f"{app}-{i:05d}-{j:02d}", ns, name, gpus))
            count += 1
        del node
    return count


def running_job(srv: KubeAPIServer, name: str) -> None:
    """A pods-mode job whose launcher and worker run (no controllers: set by hand)."""
    from launcher.backends.kubernetes.rendering import render
    from launcher.preparing.sshkeys import generate_ssh_keys
    from mpijob.jobspec.spec import build_spec

    spec = build_spec(name=name, workers=1, gpus_per_worker=0, command=("sleep", "inf"))
    objects = render(spec, mode="pods", ssh=generate_ssh_keys())
    root = srv.create({**objects[0], "spec": {**objects[0]["spec"], "suspend": False}})
    template = root["spec"]["template"]
    launcher = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {**template["metadata"], "name": f"{name}-launcher-abcde",
                             "namespace": "default"}, "spec": template["spec"]}
    for obj in [launcher, *(o for o in objects if o["kind"] == "Pod")]:
        pod = srv.create(obj)

        def run(p):
            p["spec"]["nodeName"] = "node-00009"
            p["status"] = {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": c["name"], "state": {"running": {}},
                                       "restartCount": 0} for c in p["spec"]["containers"]]}
        srv.store.mutate("/pods", "default", pod["metadata"]["name"], run)


# Runs the measured commands. A child's peak RSS (ru_maxrss) starts from its parent's at
# fork, and the benchmark holds the whole test cluster: so a small helper started before
# the cluster is built forks them, and reports each one's own figure (os.wait4).
HELPER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    t0 = time.perf_counter()
    proc = subprocess.Popen(job["argv"], cwd=job["cwd"], env=job["env"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall": time.perf_counter() - t0,
                      "cpu": usage.ru_utime + usage.ru_stime,
                      "maxrss_kb": usage.ru_maxrss, "err": err[-2000:].decode("utf-8", "replace")}),
          flush=True)
"""
_helper: list = []


def start_helper() -> None:
    _helper.append(subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True))


def compile_checkout(code: Path) -> None:
    """Byte-compiles a checkout's packages, as pip does at install: where
    PYTHONDONTWRITEBYTECODE is set (or the tree is read-only) every run would otherwise
    compile all the CLI's modules again (0.15-0.2 s of each command's start here)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "launcher", "mpijob"], cwd=code,
                   check=True, stdout=subprocess.DEVNULL)


PROFILED = ("import cProfile, sys; from launcher.cli.app import main; "
            "cProfile.run('main(sys.argv[1:])', {out!r})")


def measure_peak(code: Path, env: dict, srv, args, ok=(0,), profile: str | None = None) -> dict:
    """One CLI command in its own process: wall time, requests, MiB answered, and the
    command's own peak RSS."""
    if not _helper:
        start_helper()
    helper = _helper[0]
    srv.clear_requests()
    before = srv.bytes_out
    server_t0 = os.times()
    program = PROFILED.format(out=profile) if profile else CLI
    helper.stdin.write(json.dumps({"argv": [sys.executable, "-c", program, *args],
                                   "cwd": str(code),
                                   "env": {**env, "PYTHONPATH": str(code)}}) + "\n")
    helper.stdin.flush()
    done = json.loads(helper.stdout.readline())
    server_t1 = os.times()
    if done["rc"] not in ok:
        raise RuntimeError(f"{' '.join(args)} exited {done['rc']}: {done['err']}")
    return {"wall_s": round(done["wall"], 3), "cpu_s": round(done["cpu"], 3),
            "requests": srv.count_requests(), "by_kind": request_kinds(srv.request_log),
            "mib": round((srv.bytes_out - before) / 2**20, 1),
            "peak_rss_mib": round(done["maxrss_kb"] / 1024, 1),
            # The benchmark's own process is the test API server and its scheduler: their
            # CPU while the command ran, which shares the command's 2 cores.
            "server_cpu_s": round(server_t1.user + server_t1.system
                                  - server_t0.user - server_t0.system, 3)}


def request_kinds(log) -> dict[str, int]:
    """Requests by method and what they read or wrote ("GET pods list", "POST pods"):
    where a command's requests go."""
    counts: dict[str, int] = {}
    for r in list(log):
        parts = r.path.strip("/").split("/")
        # /api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/...
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            rest = rest[2:]
        what = rest[0] if rest else "/".join(parts) or "/"
        if r.method == "GET" and len(rest) == 1:
            what += " watch" if r.query.get("watch") in ("true", "1") else " list"
        elif r.method == "GET":
            what += " get"
        key = f"{r.method} {what}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def median(runs: list[dict]) -> dict:
    """The run of median wall time, with every run's wall and CPU seconds beside it."""
    mid = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    return {**mid, "walls": [r["wall_s"] for r in runs], "cpus": [r["cpu_s"] for r in runs]}


def cluster_run(nodes: int, pods_per_node: int, codes: dict[str, Path], wait_seconds: float,
                repeat: int = 1, profile_dir: str | None = None, gzip: bool = False) -> dict:
    """Each command of each checkout in `codes` against one generated cluster; plan and
    submit `repeat` times (the median kept)."""
    out: dict = {"nodes": nodes, "gzip": gzip}
    with KubeAPIServer(controllers=False) as srv, tempfile.TemporaryDirectory() as tmp:
        srv.gzip_responses = gzip  # as the API server answers a client that asks
        t0 = time.perf_counter()
        out["pods"] = populate(srv, nodes, pods_per_node)
        out["populate_s"] = round(time.perf_counter() - t0, 1)
        # The generated cluster lives as long as the benchmark: out of reach of Python's
        # cyclic GC, whose full collections would otherwise walk its millions of objects in
        # the middle of a measured command (a real API server's Go GC runs beside it).
        gc.freeze()
        # Only the scheduler runs (it binds submit's workers), every 50 ms: a kubelet walking
        # 50,000 pods every tick would take the CPU the measured command needs (a real
        # control plane runs on other machines). The scheduler's cycle is cheap now that
        # its usage is kept from the pod events (scheduler.UsageCache); at 0.2 s, submit
        # waited ~0.1 s longer for its workers' binding.
        srv.scheduler.tick = 0.05
        srv.scheduler.start()
        env = {**os.environ, "KUBECONFIG": srv.write_kubeconfig(Path(tmp) / "kubeconfig"),
               "COLUMNS": "200"}
        common = ["--context", "test"]
        if wait_seconds:
            running_job(srv, "steady")
        for label, code in codes.items():
            r = out[label] = {"load": os.getloadavg()[0]}
            r["plan"] = median([measure_peak(code, env, srv, [
                "plan", "--workers", "64", "--gpus", "8", *common]) for _ in range(repeat)])

            def submit(name: str, profile: str | None = None, code: Path = code) -> dict:
                return measure_peak(code, env, srv, [
                    "submit", "mpi", "--name", name, "--workers", "64", "--gpus", "8",
                    "--image", "registry.example.com/horovod:0.28.1", "--backend",
                    "kubernetes", "-n", "default", *common], profile=profile)

            runs = []
            for k in range(repeat):
                runs.append(submit(f"big-{label}-{k}"))
                release(srv, f"big-{label}-{k}")  # the GPUs back, for the next submit
            r["submit"] = median(runs)
            r["load_end"] = os.getloadavg()[0]
            if profile_dir:  # one more, profiled (cProfile: slower than the runs above)
                prof = str(Path(profile_dir, f"submit-{label}-{nodes}.prof").resolve())
                submit(f"big-{label}-prof", profile=prof)
                release(srv, f"big-{label}-prof")
            if wait_seconds:
                w = measure_peak(code, env, srv, ["wait", "steady", "--timeout",
                                                  str(wait_seconds), "--backend", "kubernetes",
                                                  "-n", "default", *common], ok=(124,))
                w["requests_per_min"] = round(w["requests"] * 60 / wait_seconds, 1)
                r["wait"] = w
    return out


def release(srv: KubeAPIServer, job: str) -> None:
    for kind in ("jobs", "pods", "services", "configmaps", "secrets"):
        for obj in srv.objects(kind, "default"):
            if obj["metadata"]["name"].startswith(job):
                srv.store.remove(srv.resource(kind).key, "default", obj["metadata"]["name"])


def list_run(jobs: int, codes: dict[str, Path], repeat: int, gzip: bool = False,
             finished: float = 0.0) -> dict:
    """`list -A` over bench_list.py's jobs, on a cluster serving MPIJobs and TrainJobs; a
    `finished` share of the jobs Succeeded with a rate no command has recorded yet."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "cli"))
    from bench_list import populate as populate_jobs
    from bench_list import unrecord

    out: dict = {"jobs": jobs, "gzip": gzip, "finished": round(finished * jobs)}
    with KubeAPIServer(controllers=False) as srv, tempfile.TemporaryDirectory() as tmp:
        srv.gzip_responses = gzip
        srv.install_mpi_operator()
        srv.install_trainer()
        populate_jobs(srv, jobs, finished)
        gc.freeze()  # as in cluster_run
        env = {**os.environ, "KUBECONFIG": srv.write_kubeconfig(Path(tmp) / "kubeconfig"),
               "COLUMNS": "200"}
        for label, code in codes.items():
            runs = []
            for _ in range(repeat):
                unrecord(srv)  # each run finds the rates as unrecorded as the first did
                runs.append(measure_peak(code, env, srv, ["list", "-A", "--backend",
                                                          "kubernetes", "--context", "test"]))
            out[label] = {**median(runs), "load": os.getloadavg()[0]}
    return out


def plot(paths: list[str], png: str) -> None:
    """Time, CPU and peak RSS against the cluster's pods, for every run in `paths`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = [json.loads(Path(p).read_text()) for p in paths]
    labels = list(dict.fromkeys(label for doc in docs for label in doc["labels"]))
    rows = sorted((r for doc in docs for r in doc["clusters"]), key=lambda r: r["pods"])
    fig, (ax_t, ax_c, ax_m) = plt.subplots(1, 3, figsize=(14, 4))
    for label in labels:
        for cmd, style in (("submit", "-o"), ("plan", "--s")):
            have = [r for r in rows if label in r]
            xs = [r["pods"] / 1000 for r in have]
            load = f"load {min(r[label]['load'] for r in have):.0f}-" \
                   f"{max(r[label]['load'] for r in have):.0f}"
            for ax, key in ((ax_t, "wall_s"), (ax_c, "cpu_s"), (ax_m, "peak_rss_mib")):
                ax.plot(xs, [r[label][cmd][key] for r in have], style,
                        label=f"{cmd}, {label}" + (f" ({load})" if ax is ax_t else ""))
    ax_t.axhline(2.0, color="grey", lw=0.8, ls=":")
    ax_c.axhline(2.0, color="grey", lw=0.8, ls=":")
    ax_m.axhline(150, color="grey", lw=0.8, ls=":")
    ax_m.axhline(300, color="grey", lw=0.8, ls=":")
    what = "thousands of pods (4-8 KB each; 10 or 30 a node)"
    ax_t.set(xlabel=what, ylabel="wall time (s)",
             title=f"wall time ({docs[0]['cpus']} shared cores, test server on them)")
    ax_c.set(xlabel=what, ylabel="CPU seconds of the command", title="the command's CPU time")
    ax_m.set(xlabel=what, ylabel="peak RSS (MiB)", title="the command's peak RSS")
    for ax in (ax_t, ax_c, ax_m):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[500, 2000, 5000])
    parser.add_argument("--pods-per-node", type=int, default=PODS_PER_NODE)
    parser.add_argument("--code", nargs="*", default=[f"after={ROOT}"],
                        help="LABEL=CHECKOUT whose CLI to run (several: each on the same cluster)")
    parser.add_argument("--wait-seconds", type=float, default=60.0)
    parser.add_argument("--wait-at", type=int, default=2000, help="cluster size to time wait on")
    parser.add_argument("--list-jobs", type=int, default=500)
    parser.add_argument("--list-finished", type=float, default=0.6,
                        help="share of list -A's jobs finished with a rate not yet recorded")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of plan, submit and list -A (the median is kept)")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="also run submit once under cProfile, writing DIR/submit-*.prof")
    parser.add_argument("--gzip", action="store_true",
                        help="the test server gzips answers of 128 KiB or more to clients "
                        "that ask, as kube-apiserver does (hvdk8s asks unless the kubeconfig "
                        "says disable-compression)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--plot", nargs="+", default=None, help="results JSON files to draw")
    parser.add_argument("--png", default=str(ROOT / "benchmarks" / "cli" / "api_scaling.png"))
    args = parser.parse_args()
    if args.plot:
        plot(args.plot, args.png)
        return 0
    start_helper()  # while this process is still small
    codes = {label: Path(path).resolve() for label, _, path in
             (c.partition("=") for c in args.code)}
    for code in codes.values():
        compile_checkout(code)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    doc = {"labels": list(codes), "pods_per_node": args.pods_per_node,
           "cpus": os.cpu_count(), "load_before": os.getloadavg(), "clusters": []}
    for n in args.nodes:
        r = cluster_run(n, args.pods_per_node, codes,
                        args.wait_seconds if n == args.wait_at else 0, args.repeat, args.profile,
                        args.gzip)
        doc["clusters"].append(r)
        print(json.dumps(r), flush=True)
    if args.list_jobs:
        doc["list"] = list_run(args.list_jobs, codes, args.repeat, args.gzip,
                               args.list_finished)
        print(json.dumps(doc["list"]), flush=True)
    doc["load_after"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
