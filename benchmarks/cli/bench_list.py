"""`hvdk8s list` over many jobs against the in-process test API server.

Builds N jobs of 1 launcher + 7 worker pods each (rendered by mpijob.k8s.render, so the
objects have their real size), marks every pod Running on a node, then times
`KubernetesBackend.list()` (in this process) and the whole `hvdk8s list` command (a
separate process, as a user runs it: interpreter start, imports, kubeconfig, the list
calls, the table), with the command's own CPU seconds beside its wall time (the test server
shares the machine, so the wall time counts its serialising too), and counts the HTTP
requests each makes: the count must not depend on N.

    .venv/bin/python benchmarks/cli/bench_list.py            # 50 and 500 jobs
    .venv/bin/python benchmarks/cli/bench_list.py --jobs 500 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.backends.kubernetes.rendering import render  # noqa: E402
from launcher.preparing.sshkeys import generate_ssh_keys  # noqa: E402
from kubesim.server import KubeAPIServer  # noqa: E402
from mpijob.jobspec.spec import build_spec  # noqa: E402

WORKERS = 7  # + 1 launcher = 8 pods per job


def populate(srv: KubeAPIServer, jobs: int) -> None:
    ssh = generate_ssh_keys()
    nodes = max(1, jobs * WORKERS // 8)
    for i in range(nodes):
        srv.add_node(f"node-{i}", gpus=8)
    for j in range(jobs):
        spec = build_spec(name=f"job-{j:04d}", workers=WORKERS, gpus_per_worker=1,
                          command=("python", "train.py"))
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

            def run(p, node=node):
                p["spec"]["nodeName"] = node
                p["status"] = {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": p["spec"]["containers"][0]["name"],
                                           "state": {"running": {}}, "restartCount": 0}]}

            srv.store.mutate("/pods", "default", pod["metadata"]["name"], run)


def measure(jobs: int, repeat: int) -> dict:
    from launcher.backends.kubernetes.backend import KubernetesBackend

    with KubeAPIServer(controllers=False) as srv, tempfile.TemporaryDirectory() as tmp:
        populate(srv, jobs)
        kubeconfig = srv.write_kubeconfig(Path(tmp) / "kubeconfig")
        backend_times, cli_times, cli_cpus = [], [], []
        for _ in range(repeat):
            backend = KubernetesBackend(context="test", kubeconfig=kubeconfig)
            _ = backend.client  # connect (kubeconfig, client import) outside the timing
            srv.clear_requests()
            t0 = time.perf_counter()
            rows = backend.list()
            backend_times.append(time.perf_counter() - t0)
            backend_requests = srv.count_requests()
            assert len(rows) == jobs and all(r.phase == "Running" for r in rows), "bad rows"
        env = {**os.environ, "KUBECONFIG": kubeconfig, "COLUMNS": "200"}
        command = [str(ROOT / ".venv" / "bin" / "hvdk8s"), "list", "--backend", "kubernetes",
                   "--context", "test"]
        for _ in range(repeat):
            srv.clear_requests()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            cli_times.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            cli_requests = srv.count_requests()
            assert done.returncode == 0 and done.stdout.count("Running") == jobs, done.stderr
        return {"jobs": jobs, "pods": jobs * (WORKERS + 1),
                "backend_list_s": statistics.median(backend_times),
                "cli_list_s": statistics.median(cli_times),
                "cli_cpu_s": statistics.median(cli_cpus),
                "backend_requests": backend_requests, "cli_requests": cli_requests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="*", default=[50, 500])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("jobs  pods  backend.list() s  `hvdk8s list` s  its CPU s  requests (backend/cli)")
    for n in args.jobs:
        r = measure(n, args.repeat)
        print(f"{r['jobs']:>4}  {r['pods']:>4}  {r['backend_list_s']:>16.3f}  "
              f"{r['cli_list_s']:>15.3f}  {r['cli_cpu_s']:>9.3f}  "
              f"{r['backend_requests']}/{r['cli_requests']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
