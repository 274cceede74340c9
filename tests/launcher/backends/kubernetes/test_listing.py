"""`hvdk8s list` pays as `kubectl get` does: one paged list per kind a job is made of
(pods, the root Jobs, MPIJobs, TrainJobs), whatever the number of jobs, and no request
per job: not a launcher's log, not a write."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes import client as client_module
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render import SSHKeys
from mpijob.k8s.render_trainjob import horovod_runtime, runtime_name

SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
              "ssh-ed25519 AAAA x")
LISTED = ("pods", "jobs", "mpijobs", "trainjobs")
DISCOVERY = re.compile(r"/apis?(/[^/]+(/[^/]+)?)?")


def finished_pods_job(srv: KubeAPIServer, name: str, namespace: str) -> None:
    """A built-in job whose launcher pod has succeeded, its rate recorded nowhere yet."""
    spec = build_spec(name=name, namespace=namespace, workers=2, command=("python", "train.py"))
    root, *rest = render(spec, mode="pods", ssh=SSH)
    root = srv.create(root)
    template = root["spec"]["template"]
    launcher = {"apiVersion": "v1", "kind": "Pod", "spec": template["spec"],
                "metadata": {**template["metadata"], "name": f"{name}-launcher-abcde",
                             "namespace": namespace}}
    for pod in (launcher, *(o for o in rest if o["kind"] == "Pod")):
        created = srv.create(pod)

        def succeeded(p):
            p["status"] = {"phase": "Succeeded", "containerStatuses": [
                {"name": p["spec"]["containers"][0]["name"], "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}

        srv.store.mutate("/pods", namespace, created["metadata"]["name"], succeeded)


def fill(srv: KubeAPIServer, jobs: int) -> list[str]:
    names = []
    for i in range(jobs):
        for mode in ("pods", "operator", "trainjob"):
            name, namespace = f"{mode[:4]}-{i}", ("default", "team")[i % 2]
            if mode == "pods":
                finished_pods_job(srv, name, namespace)
            else:
                spec = build_spec(name=name, namespace=namespace, workers=2,
                                  command=("python", "train.py"))
                if mode == "trainjob" and srv.get("clustertrainingruntimes",
                                                  runtime_name(spec)) is None:
                    srv.create(horovod_runtime(spec))
                srv.create(render(spec, mode=mode, ssh=SSH)[0])
            names.append(name)
    return sorted(names)


def lists_by_kind(requests) -> tuple[Counter, list[str]]:
    """First pages of lists by resource, and every request that is neither such a list, nor
    the next page of one, nor discovery."""
    firsts: Counter = Counter()
    others = []
    for r in requests:
        resource = r.path.rstrip("/").rsplit("/", 1)[-1]
        if r.method == "GET" and resource in LISTED:
            if not r.query.get("continue"):
                firsts[resource] += 1
        elif not (r.method == "GET" and DISCOVERY.fullmatch(r.path)):
            others.append(f"{r.method} {r.path}")
    return firsts, others


@pytest.mark.parametrize("all_namespaces", [True, False])
def test_list_makes_one_paged_list_per_kind_and_nothing_per_job(tmp_path, monkeypatch,
                                                                 all_namespaces):
    monkeypatch.setattr(client_module, "PAGE_SIZE", 4)  # the pods come in several pages
    with KubeAPIServer(controllers=False) as srv:
        srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        srv.install_mpi_operator()
        srv.install_trainer()
        jobs = fill(srv, 4)
        backend = KubernetesBackend(context="test",
                                    kubeconfig=srv.write_kubeconfig(tmp_path / "kubeconfig"))
        srv.clear_requests()
        rows = backend.list(all_namespaces=all_namespaces)
        firsts, others = lists_by_kind(srv.request_log)
        pages = srv.count_requests("GET", r"/pods$")
    assert firsts == Counter(LISTED) and others == []
    assert pages > 1
    in_default = [n for n in jobs if int(n.rsplit("-", 1)[1]) % 2 == 0]
    assert sorted(r.name for r in rows) == (jobs if all_namespaces else in_default)
    assert {r.phase for r in rows if r.name.startswith("pods-")} == {"Succeeded"}
