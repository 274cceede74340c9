"""Issue 20 defect 5: worker pods request CPU and memory (a share of their node) when the
user gives no --cpu/--memory, their memory limit covers the Memory-backed /dev/shm, and the
launcher has limits, so quotas on requests.* and limits.* admit the job."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from launcher.formats.clusterfile import load_cluster
from launcher.preparing.planning import plan_job
from mpijob.jobspec import names
from mpijob.jobspec.quantity import parse_quantity
from mpijob.jobspec.spec import build_spec
from mpijob.jobspec.worker_share import plan_shares, pod_defaults
from mpijob.scheduling.placement import PlacementRequest, place
from tests.render_cases import FIXED_KEYS as KEYS

runner = CliRunner()

CLUSTER = """\
nodes:
  - {name: big, gpus: 8, topology: dgx1-v100, cpu: "80", memory: 512Gi}
  - {name: small, gpus: 4, cpu: "32", memory: 256Gi}
"""


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


def workers_of(objects: list[dict]) -> list[dict]:
    """The worker containers: the Pods' (built-in mode), or the MPIJob's Worker template."""
    out = []
    for o in objects:
        if o["kind"] == "Pod":
            out.append(o["spec"]["containers"][0])
        elif o["kind"] == "MPIJob":
            out.append(o["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0])
    return out


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_a_quota_on_cpu_and_memory_requests_and_limits_admits_the_job(k8s, mode):
    """Fails on the code before: workers had no cpu/memory requests and the launcher no
    cpu limit, so ResourceQuota admission refused them ("must specify requests.cpu")."""
    srv = k8s.server()
    if mode == "operator":
        srv.install_mpi_operator()
    srv.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team"},
                "spec": {"hard": {"requests.cpu": "120", "requests.memory": "1000Gi",
                                  "limits.cpu": "120", "limits.memory": "1000Gi"}}},
               "default")
    srv.wait_for(lambda: srv.get("resourcequotas", "team").get("status"))
    srv.script_pod(r"qa-worker-\d+", exit_code=None)
    result = runner.invoke(app, ["submit", "mpi", "--name", "qa", "--workers", "2", "--gpus",
                                 "8", "--image", "img:1", "--mode", mode, "python", "t.py",
                                 *k8s.cli_args()])
    assert result.exit_code == 0, result.output

    def workers():
        return [p for p in srv.objects("pods", "default")
                if p["metadata"]["labels"].get(names.LABEL_JOB) == "qa"
                and p["metadata"]["labels"].get(names.LABEL_ROLE) == names.ROLE_WORKER]

    srv.wait_for(lambda: len(workers()) == 2)
    for p in workers():
        res = p["spec"]["containers"][0]["resources"]
        # The test nodes: 64 CPU, 512Gi, 8 GPUs: 8 x 0.9 x 64 / 8 = 57.6 -> 57; 8 x 0.9 x
        # 512Gi / 8 = 460.8Gi -> 460Gi; the limit adds the 4Gi /dev/shm.
        assert res["requests"] == {"cpu": "57", "memory": "460Gi", "nvidia.com/gpu": "8"}
        assert res["limits"] == {"cpu": "57", "memory": "464Gi", "nvidia.com/gpu": "8"}


@pytest.mark.parametrize("mode", ["pods", "operator"])
@pytest.mark.parametrize("memory", [None, "2Gi"])
def test_the_memory_limit_covers_dev_shm(mode, memory):
    """/dev/shm is a Memory-backed emptyDir charged to the pod: a limit of only --memory
    OOM-kills ranks that fill it (fails on the code before: limit == --memory)."""
    spec = build_spec(name="shm", workers=2, gpus_per_worker=1, memory=memory, shm_size="8Gi",
                      command=("python", "t.py"))
    plan = plan_job(spec, None)
    objects = render(spec, decisions=plan.decisions, mode=mode, ssh=KEYS)
    containers = workers_of(objects)
    assert containers
    for c in containers:
        res = c["resources"]
        shm = parse_quantity("8Gi")
        assert parse_quantity(res["limits"]["memory"]) >= parse_quantity(
            res["requests"]["memory"]) + shm
        if memory:
            assert res["requests"]["memory"] == memory
    launcher = next(o for o in objects if o["kind"] in ("Job", "MPIJob"))
    text = json.dumps(launcher)
    assert '"limits": {"cpu": "1", "memory": "1Gi"}' in text  # the launcher's, for limits.*


def test_plan_shows_each_pods_default_requests_and_where_they_come_from(cluster_file):
    """Fails on the code before: plan had no CPU/memory columns and no worker_requests."""
    args = ["plan", "--workers", "3", "--gpus", "4", "--cluster", cluster_file]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert any(line.split()[:5] == ["big", "2", "0,1,2,3,4,5,6,7", "72", "460Gi"]
               for line in lines), table.output
    assert any(line.split()[:5] == ["small", "1", "0,1,2,3", "28", "230Gi"]
               for line in lines), table.output
    assert "requests: node big: CPU 0.9 x 80 allocatable / 8 GPUs" in table.output
    data = json.loads(runner.invoke(app, [*args, "-o", "json"]).output)
    assert data["worker_requests"][1] == {
        "node": "small", "cpu": "28", "memory": "230Gi", "memory_limit": "234Gi",
        "source": "node small: CPU 0.9 x 32 allocatable / 4 GPUs; memory 0.9 x 256Gi "
                  "allocatable / 4 GPUs", "per": "node pod"}
    given = json.loads(runner.invoke(app, [*args, "--cpu", "2", "-o", "json"]).output)
    assert [r["cpu"] for r in given["worker_requests"]] == ["4", "2"]  # --cpu per worker
    assert given["worker_requests"][0]["memory"] == "460Gi"


def test_the_dry_run_shows_the_requests_and_their_source(cluster_file):
    result = runner.invoke(app, ["submit", "mpi", "--name", "d", "--workers", "3", "--gpus",
                                 "4", "--cluster", cluster_file,
                                 "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert ("worker requests (pod on small): cpu 28, memory 230Gi + --shm-size 4Gi in its "
            "limit (node small: CPU 0.9 x 32 allocatable / 4 GPUs") in result.output


def test_pods_on_different_nodes_take_their_own_share_and_operator_mode_the_smallest(
        cluster_file):
    spec = build_spec(name="s", workers=3, gpus_per_worker=4, image="img:1",
                      command=("python", "t.py"))
    cluster = load_cluster(cluster_file)
    decided = plan_job(spec, cluster).decisions
    pods = [c["resources"]["requests"] for c in workers_of(
        render(spec, decisions=decided, mode="pods", ssh=KEYS, placement=place(
            cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)))]
    assert [(r["cpu"], r["memory"]) for r in pods] == [("72", "460Gi"), ("28", "230Gi")]
    (template,) = workers_of(render(spec, decisions=decided, mode="operator"))
    # One template for pods of 4 GPUs on either node: the smaller node's share per GPU.
    assert (template["resources"]["requests"]["cpu"],
            template["resources"]["requests"]["memory"]) == ("28", "230Gi")


def test_the_share_is_capped_at_what_the_node_has_free_and_cpu_jobs_get_a_small_default(
        cluster_file):
    cluster = load_cluster(cluster_file)
    busy = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, free_cpu=10.0, free_memory=float(parse_quantity("100Gi")))
        if n.name == "big" else n for n in cluster.nodes))
    spec = build_spec(name="s", workers=1, gpus_per_worker=8, image="img:1")
    placement = place(busy, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
    cpu, memory, source = pod_defaults(plan_shares(busy, placement, 8), "big", 8)
    assert (cpu, memory) == ("10", "100Gi")
    assert "capped at the 10 free for its 8 GPUs" in source
    cpu_only = plan_shares(None, None, 0)
    assert pod_defaults(cpu_only, None, 2)[:2] == ("2", "4Gi")  # 1 CPU, 2Gi per rank
    assert pod_defaults(plan_shares(None, None, 1), None, 2)[:2] == ("2", "8Gi")  # per GPU
