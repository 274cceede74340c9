"""`hvdk8s list` over many jobs against the in-process test API server.

Builds N jobs of 1 launcher + 7 worker pods each (rendered by mpijob.k8s.render, so the
objects have their real size) on a cluster that serves MPIJobs and TrainJobs too. A share
of the jobs (`--finished`, default 0.6) has finished: its launcher pod Succeeded, with a
rate in its log that no `get` or `wait` has recorded yet, as on a cluster where jobs ran
unattended; the others run. Then it measures

- `KubernetesBackend.list(all_namespaces=True)` in this process (connection set up
  beforehand): its own CPU seconds (this thread's: the test server's threads serve in the
  same process), and its requests: the lists by kind, and every other request;
- the whole `hvdk8s list -A` command in a separate process, as a user runs it (interpreter
  start, imports, kubeconfig, the lists, the table): wall time and the command's own CPU
  (the test server shares the machine, so the wall time counts its serialising too).

The requests must not depend on N: one paged list per kind (pods, Jobs, MPIJobs,
TrainJobs) and the discovery calls that say which kinds are served.

    python benchmarks/cli/bench_list.py                       # 50 and 500 jobs
    python benchmarks/cli/bench_list.py --jobs 500 --repeat 5 --out benchmarks/cli/list_results.json
    python benchmarks/cli/bench_list.py --code /tmp/before     # another checkout's launcher
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 7  # + 1 launcher = 8 pods per job
RATE_LINE = "total images/sec: 1234.5"


def _code_root() -> Path:
    """The checkout whose launcher is measured (--code; this one by default): its packages
    first on the path, before anything of hvdk8s is imported. Imported (bench_api.py): this
    checkout."""
    if __name__ == "__main__" and "--code" in sys.argv:
        return Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
    return ROOT


CODE = _code_root()
sys.path.insert(0, str(CODE))
if CODE != ROOT:
    sys.path.insert(1, str(ROOT))  # the test server of this checkout, where CODE has none

from kubesim.server import KubeAPIServer  # noqa: E402
from launcher.backends.kubernetes.rendering import render  # noqa: E402
from launcher.preparing.sshkeys import generate_ssh_keys  # noqa: E402
from mpijob.jobspec import names  # noqa: E402
from mpijob.jobspec.spec import build_spec  # noqa: E402


def populate(srv: KubeAPIServer, jobs: int, finished: float = 0.0) -> None:
    """N jobs of 8 pods; the first `finished` share of them Succeeded, with a rate in the
    launcher's log, the others Running."""
    ssh = generate_ssh_keys()
    nodes = max(1, jobs * WORKERS // 8)
    for i in range(nodes):
        srv.add_node(f"node-{i}", gpus=8)
    for j in range(jobs):
        spec = build_spec(name=f"job-{j:04d}", workers=WORKERS, gpus_per_worker=1,
                          command=("python", "train.py"))
        done = j < finished * jobs
        objects = render(spec, mode="pods", ssh=ssh)
        root = srv.create({**objects[0], "spec": {**objects[0]["spec"], "suspend": False}})
        template = root["spec"]["template"]
        launcher = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {**template["metadata"], "name": f"{spec.name}-launcher-abcde",
                                 "namespace": "default"},
                    "spec": template["spec"]}
        for obj in [launcher, *(o for o in objects if o["kind"] == "Pod")]:
            pod = srv.create(obj)
            node = f"node-{(j * WORKERS + len(obj['metadata']['name'])) % nodes}"
            container = pod["spec"]["containers"][0]["name"]
            succeeded = done and obj is launcher

            def run(p, node=node, container=container, succeeded=succeeded):
                p["spec"]["nodeName"] = node
                state = ({"terminated": {"exitCode": 0, "reason": "Completed"}} if succeeded
                         else {"running": {}})
                p["status"] = {"phase": "Succeeded" if succeeded else "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False" if succeeded else "True"}],
                    "containerStatuses": [{"name": container, "state": state,
                                           "restartCount": 0}]}

            srv.store.mutate("/pods", "default", pod["metadata"]["name"], run)
            if succeeded:
                uid = pod["metadata"]["uid"]
                srv.logbook.start_attempt(uid, container)
                srv.logbook.append(uid, container, RATE_LINE)
                srv.logbook.finish(uid, container)


def unrecord(srv: KubeAPIServer) -> None:
    """Every root as before any command ran: a list that records the rates it reads (on
    the roots' annotations) would otherwise find them there the next time."""
    key = f"{names.GROUP}/images-per-sec"  # launcher.backends.kubernetes.status's
    for job in srv.objects("jobs", "default"):
        if key in (job["metadata"].get("annotations") or {}):
            srv.store.mutate("batch/jobs", "default", job["metadata"]["name"],
                             lambda j: j["metadata"]["annotations"].pop(key, None))


def request_kinds(log) -> dict[str, int]:
    """Requests by what they do: "list pods" (a first page), "next page pods", "get log",
    "patch jobs", "discovery"."""
    kinds: Counter = Counter()
    for r in log:
        parts = r.path.strip("/").split("/")
        at = 2 if parts[0] == "api" else 3  # /api/v1/RESOURCE, /apis/GROUP/VERSION/RESOURCE
        if "namespaces" in parts[:at + 1] and len(parts) > at + 2:
            at += 2  # .../namespaces/NS/RESOURCE
        if len(parts) <= at:
            kinds["discovery"] += 1
        elif r.path.endswith("/log"):
            kinds["get log"] += 1
        elif r.method != "GET":
            kinds[f"{r.method.lower()} {parts[at]}"] += 1
        else:
            kinds[("next page " if r.query.get("continue") else "list ") + parts[at]] += 1
    return dict(sorted(kinds.items()))


def measure(jobs: int, repeat: int, finished: float) -> dict:
    from launcher.backends.kubernetes.backend import KubernetesBackend

    with KubeAPIServer(controllers=False) as srv, tempfile.TemporaryDirectory() as tmp:
        srv.install_mpi_operator()
        srv.install_trainer()
        populate(srv, jobs, finished)
        kubeconfig = srv.write_kubeconfig(Path(tmp) / "kubeconfig")
        backend_times, backend_cpus, cli_times, cli_cpus = [], [], [], []
        backend_requests: dict = {}
        for _ in range(repeat):
            unrecord(srv)
            backend = KubernetesBackend(context="test", kubeconfig=kubeconfig)
            _ = backend.client  # connect (kubeconfig, client import) outside the timing
            srv.clear_requests()
            c0, t0 = time.thread_time(), time.perf_counter()
            rows = backend.list(all_namespaces=True)
            backend_times.append(time.perf_counter() - t0)
            backend_cpus.append(time.thread_time() - c0)
            backend_requests = {"total": srv.count_requests(),
                                                    "by_kind": request_kinds(srv.request_log)}
            assert len(rows) == jobs, "a job missing from the list"
        env = {**os.environ, "KUBECONFIG": kubeconfig, "COLUMNS": "200",
               "PYTHONPATH": str(CODE)}
        command = [sys.executable, "-m", "launcher.cli.app", "list", "-A",
                   "--backend", "kubernetes", "--context", "test"]
        cli_requests: dict = {}
        for _ in range(repeat):
            unrecord(srv)
            srv.clear_requests()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=CODE)
            cli_times.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            cli_requests = {"total": srv.count_requests(),
                                            "by_kind": request_kinds(srv.request_log)}
            assert done.returncode == 0 and done.stdout.count("job-") == jobs, done.stderr
        return {"jobs": jobs, "pods": jobs * (WORKERS + 1), "finished": round(finished * jobs),
                "backend_list_s": round(statistics.median(backend_times), 3),
                "backend_cpu_s": round(statistics.median(backend_cpus), 3),
                "backend_cpu_runs_s": [round(c, 3) for c in backend_cpus],
                "cli_list_s": round(statistics.median(cli_times), 3),
                "cli_cpu_s": round(statistics.median(cli_cpus), 3),
                "backend_requests": backend_requests, "cli_requests": cli_requests,
                "load": round(os.getloadavg()[0], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="*", default=[50, 500])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--finished", type=float, default=0.6,
                        help="share of the jobs finished with an unrecorded rate")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="the checkout whose launcher is measured")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    print("jobs  pods  backend.list() s  its CPU s  `hvdk8s list -A` s  its CPU s  "
          "requests (backend/cli)")
    results = []
    for n in args.jobs:
        r = measure(n, args.repeat, args.finished)
        results.append(r)
        print(f"{r['jobs']:>4}  {r['pods']:>4}  {r['backend_list_s']:>16.3f}  "
              f"{r['backend_cpu_s']:>9.3f}  {r['cli_list_s']:>18.3f}  {r['cli_cpu_s']:>9.3f}  "
              f"{r['backend_requests']['total']}/{r['cli_requests']['total']}  "
              f"{r['backend_requests']['by_kind']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"code": str(args.code), "results": results},
                                       indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
