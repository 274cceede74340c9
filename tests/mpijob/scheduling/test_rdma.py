"""RDMA for NCCL: which devices the nodes offer, --rdma auto|on|off, what the worker pods
request (device, IPC_LOCK, NCCL's environment), and a prediction that follows the request."""

from __future__ import annotations

import json

import pytest

from launcher.backends.kubernetes.rendering import render
from launcher.errors import UsageError
from launcher.formats.clusterfile import cluster_from_data
from launcher.preparing import network_plan
from launcher.preparing.planning import plan_job
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render import SSHKeys
from mpijob.scheduling import rdma
from tests.cluster_cli import docs_of, invoke, write
from tests.schemas import validate_core

SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
              "ssh-ed25519 AAAA x")
SHARED = "rdma/rdma_shared_device_a"
VF_POOL = "nvidia.com/mlnx_sriov_rdma"


def two_nodes(resources=None, **node_keys) -> dict:
    """Two 8-GPU V100 nodes on 10 GbE, each advertising `resources` (default: a shared HCA)."""
    defaults = {"topology": "dgx1-v100", "gpu_model": "Tesla-V100-SXM2-16GB",
                "resources": {SHARED: 63} if resources is None else resources, **node_keys}
    return {"defaults": defaults, "nodes": [{"name": "gpu-a"}, {"name": "gpu-b"}]}


def worker_containers(docs):
    return [d["spec"]["containers"][0] for d in docs
            if d["kind"] == "Pod" and d["metadata"]["labels"].get("hvdk8s.io/role") == "worker"]


def env_of(container) -> dict:
    return {e["name"]: e["value"] for e in container["env"]}


# --- the Done-when case -----------------------------------------------------------------------
def test_dry_run_requests_the_shared_hca_ipc_lock_and_nccl_ib_hca(tmp_path):
    cluster = write(tmp_path, two_nodes())
    result = invoke("submit", "mpi", "--name", "r", "--workers", "16", "--gpus", "1",
                    "--dry-run", "--cluster", cluster)
    assert result.exit_code == 0, result.output
    docs = docs_of(result)
    workers = worker_containers(docs)
    assert len(workers) == 2  # one pod per node, 8 GPUs each
    for c in workers:
        assert c["resources"]["limits"][SHARED] == "1" == c["resources"]["requests"][SHARED]
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert env_of(c)["NCCL_IB_HCA"] == "mlx5"
    launcher = next(d for d in docs if d["kind"] == "Job")["spec"]["template"]["spec"]
    assert SHARED not in json.dumps(launcher["containers"])  # the launcher only runs mpirun
    assert "network: RDMA" in result.stderr and SHARED in result.stderr
    for d in docs:
        if d["kind"] in ("Pod", "Job"):
            validate_core(d)


def test_plan_predicts_the_rdma_figure_and_off_predicts_tcp_and_says_what_rdma_gives(tmp_path):
    cluster = write(tmp_path, two_nodes())
    args = ("plan", "--workers", "16", "--gpus", "1", "--model", "vgg16", "--cluster", cluster,
            "-o", "json")
    on = invoke(*args)
    off = invoke(*args, "--rdma", "off")
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    on, off = json.loads(on.stdout), json.loads(off.stdout)
    assert on["network"]["transport"] == "rdma" and off["network"]["transport"] == "tcp"
    assert "RDMA" in on["prediction"]["bottleneck"] and "TCP" in off["prediction"]["bottleneck"]
    rdma_ips, tcp_ips = on["prediction"]["images_per_sec"], off["prediction"]["images_per_sec"]
    assert rdma_ips > 1.3 * tcp_ips  # VGG16 over 10 GbE: sockets at 0.6, RDMA at 0.92
    assert off["network"]["rdma_images_per_sec"] == pytest.approx(rdma_ips)
    warning = next(line for line in off["explanation"] if line.startswith("warning:"))
    assert f"{tcp_ips:,.0f}" in warning and f"{rdma_ips:,.0f}" in warning
    assert "--rdma auto or on" in warning


def test_plan_table_names_the_network(tmp_path):
    result = invoke("plan", "--workers", "16", "--gpus", "1", "--cluster",
                    write(tmp_path, two_nodes()), "--rdma", "off")
    assert result.exit_code == 0, result.output
    assert "network: TCP over the pod network" in result.stdout
    assert "warning: the nodes offer RDMA (rdma/rdma_shared_device_a)" in result.stdout


# --- auto, on, off -----------------------------------------------------------------------------
def test_auto_leaves_a_one_node_job_on_its_node_and_a_job_without_rdma_nodes_on_tcp(tmp_path):
    spec = build_spec(name="j", workers=4, gpus_per_worker=1)
    plan = plan_job(spec, cluster_from_data(two_nodes()))
    assert plan.decisions.rdma_request is None and plan.network.decision.transport == "tcp"
    assert "one node" in plan.network.lines[0] and plan.network.warning is None
    bare = plan_job(build_spec(name="j", workers=16, gpus_per_worker=1),
                    cluster_from_data(two_nodes(resources={})))
    assert bare.decisions.rdma_request is None and bare.network.warning is None
    assert "TCP over the pod network" in bare.network.lines[0]


def test_auto_needs_every_planned_node_to_offer_it():
    data = two_nodes()
    data["nodes"][1]["resources"] = {}
    plan = plan_job(build_spec(name="j", workers=16, gpus_per_worker=1), cluster_from_data(data))
    assert plan.decisions.rdma_request is None
    assert "gpu-b offers no rdma/rdma_shared_device_a" in plan.network.decision.reason


def test_on_refuses_with_the_reason_and_nothing_is_rendered(tmp_path):
    result = invoke("submit", "mpi", "--name", "r", "--workers", "16", "--gpus", "1",
                    "--rdma", "on", "--dry-run", "--cluster", write(tmp_path, two_nodes(resources={})))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--rdma on: node gpu-a offers no RDMA device resource" in result.stderr
    assert "Traceback" not in result.output


def test_on_requests_rdma_even_on_one_node():
    plan = plan_job(build_spec(name="j", workers=2, gpus_per_worker=1, rdma="on"),
                    cluster_from_data(two_nodes()))
    assert plan.decisions.rdma_request.resource == SHARED


def test_on_refuses_when_a_node_has_too_few_vfs_free():
    data = two_nodes(resources={VF_POOL: 4})
    with pytest.raises(UsageError, match="has 4 nvidia.com/mlnx_sriov_rdma free, the job's pods there need 8"):
        plan_job(build_spec(name="j", workers=16, gpus_per_worker=1, rdma="on"),
                 cluster_from_data(data))


def test_restricted_pod_security_refuses_on_and_keeps_auto_on_tcp():
    cluster = cluster_from_data(two_nodes())
    on = build_spec(name="j", workers=16, gpus_per_worker=1, rdma="on")
    with pytest.raises(UsageError, match="Pod Security 'restricted'.*IPC_LOCK"):
        plan_job(on, cluster, pod_security="restricted")
    auto = plan_job(build_spec(name="j", workers=16, gpus_per_worker=1), cluster,
                    pod_security="restricted")
    assert auto.decisions.rdma_request is None
    assert "Pod Security" in auto.network.warning and "(privileged)" in auto.network.warning
    with pytest.raises(UsageError, match="Pod Security 'baseline'"):  # baseline forbids it too
        plan_job(on, cluster, pod_security="baseline")
    assert plan_job(on, cluster, pod_security="privileged").decisions.rdma_request is not None


# --- SR-IOV: one VF per GPU; RoCE ----------------------------------------------------------
def test_sriov_pool_takes_one_vf_per_gpu_and_roce_sets_gid_and_bootstrap_interface():
    data = two_nodes(resources={VF_POOL: 8}, rdma_link="roce", rdma_hcas=["mlx5_2", "mlx5_3"])
    spec = build_spec(name="j", workers=12, gpus_per_worker=1)
    plan = plan_job(spec, cluster_from_data(data))
    objects = render(plan.spec, decisions=plan.decisions, placement=plan.placement, ssh=SSH, benchmark_source="x")
    workers = worker_containers(objects)
    counts = sorted(int(c["resources"]["limits"][VF_POOL]) for c in workers)
    assert counts == sorted(len(a.gpus) for a in plan.placement.assignments)
    env = env_of(workers[0])
    assert env["NCCL_IB_HCA"] == "mlx5_2,mlx5_3"
    assert env["NCCL_IB_GID_INDEX"] == "3" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    for o in objects:
        if o["kind"] in ("Pod", "Job"):
            validate_core(o)


def test_the_users_own_nccl_settings_win():
    spec = build_spec(name="j", workers=16, gpus_per_worker=1, env={"NCCL_IB_HCA": "=mlx5_7"})
    plan = plan_job(spec, cluster_from_data(two_nodes()))
    objects = render(plan.spec, decisions=plan.decisions, placement=plan.placement, ssh=SSH, benchmark_source="x")
    assert {env_of(c)["NCCL_IB_HCA"] for c in worker_containers(objects)} == {"=mlx5_7"}


def test_operator_mode_worker_template_gets_the_device_and_ipc_lock():
    plan = plan_job(build_spec(name="j", workers=16, gpus_per_worker=1),
                    cluster_from_data(two_nodes(resources={VF_POOL: 8})))
    (mpijob,) = [o for o in render(plan.spec, decisions=plan.decisions, mode="operator", placement=plan.placement,
                                   benchmark_source="x") if o["kind"] == "MPIJob"]
    worker = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"][VF_POOL] == str(mpijob["spec"]["slotsPerWorker"])
    assert "IPC_LOCK" in worker["securityContext"]["capabilities"]["add"]
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "securityContext" not in launcher


# --- --extra-resource ------------------------------------------------------------------------
def test_extra_resource_goes_on_every_worker_pod_only(tmp_path):
    result = invoke("submit", "mpi", "--name", "x", "--workers", "2", "--gpus", "1",
                    "--extra-resource", "example.com/fpga=2", "--dry-run")
    assert result.exit_code == 0, result.output
    docs = docs_of(result)
    for c in worker_containers(docs):
        assert c["resources"]["limits"]["example.com/fpga"] == "2"
        assert "securityContext" not in c  # no RDMA: no IPC_LOCK
    launcher = next(d for d in docs if d["kind"] == "Job")["spec"]["template"]["spec"]
    assert "example.com/fpga" not in json.dumps(launcher["containers"])


@pytest.mark.parametrize("value, message", [
    ("example.com/fpga", "expected KEY=VALUE"),
    ("example.com/fpga=two", "expected NAME=N with a whole number N"),
    ("fpga=1", "is not an extended resource name"),
    ("nvidia.com/gpu=1", "is what --gpus sets"),
    ("example.com/fpga=0", "at least 1"),
])
def test_bad_extra_resource_is_one_line_naming_the_option(value, message):
    result = invoke("submit", "mpi", "--name", "x", "--workers", "2", "--extra-resource", value,
                    "--dry-run")
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "--extra-resource" in result.stderr and "Traceback" not in result.output


# --- what counts as an RDMA resource ---------------------------------------------------------
@pytest.mark.parametrize("name, kind", [
    ("rdma/rdma_shared_device_a", "shared"), ("rdma/hca_shared_devices_a", "shared"),
    ("nvidia.com/mlnx_sriov_rdma", "vf"), ("openshift.io/mlx5_vf", "vf"),
    ("intel.com/intel_sriov_netdevice", "vf"), ("nvidia.com/gpu", None),
    ("nvidia.com/mig-1g.10gb", None), ("nvidia.com/gpu.shared", None), ("cpu", None),
    ("example.com/fpga", None),
])
def test_resource_kinds(name, kind):
    assert rdma.kind_of(name) == kind


def test_snapshot_subtracts_what_pods_hold():
    found = rdma.from_allocatable({"cpu": "64", SHARED: "63", "nvidia.com/gpu": "8"},
                                  {SHARED: 3})
    assert [(r.name, r.allocatable, r.free) for r in found] == [(SHARED, 63, 60)]


def test_cluster_file_rdma_link_without_a_resource_is_refused():
    with pytest.raises(UsageError, match="rdma_link/rdma_hcas: the node lists no RDMA resource"):
        cluster_from_data(two_nodes(resources={}, rdma_link="roce"))


# --- the prediction follows the request ---------------------------------------------------
def test_prediction_changes_with_the_transport_and_tcp_efficiency_is_a_cluster_parameter():
    cluster = cluster_from_data(two_nodes())
    placement = plan_job(build_spec(name="j", workers=16, gpus_per_worker=1),
                         cluster).placement
    kw = dict(model="vgg16", batch_size=64, precision="fp32", placement=placement,
              cluster=cluster)
    auto = network_plan.plan_network("auto", **kw)
    off = network_plan.plan_network("off", **kw)
    assert auto.prediction.images_per_sec > off.prediction.images_per_sec
    assert off.alternative.images_per_sec == pytest.approx(auto.prediction.images_per_sec)
    measured = cluster_from_data(two_nodes(tcp_efficiency=0.3))
    slower = network_plan.plan_network("off", **{**kw, "cluster": measured})
    assert slower.prediction.images_per_sec < off.prediction.images_per_sec
    assert "(0.75 GB/s effective)" in off.prediction.bottleneck  # 10 Gb/s x 0.6


# --- doctor and top node ------------------------------------------------------------------
def test_doctor_lists_rdma_resources_per_node_and_the_network_operators():
    from mpijob.scheduling.doctor import Facts, assess

    def node(name, **alloc):
        return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": "8", **alloc}}}

    def rdma_finding(**kw):
        findings = assess(Facts(server="s", namespace="default", version="v1.34.0", **kw))
        return next(f for f in findings if f.check == "rdma")

    none = rdma_finding(nodes=[node("a")])
    assert none.status == "info" and "TCP over the pod network" in none.effect and none.fix
    ok = rdma_finding(nodes=[node("a", **{SHARED: "63"}), node("b")],
                      groups={"mellanox.com", "k8s.cni.cncf.io"})
    assert ok.status == "ok"
    assert "a: rdma/rdma_shared_device_a 63" in ok.finding
    assert "NVIDIA Network Operator" in ok.finding and "Multus" in ok.finding


def test_top_node_shows_free_rdma_devices(tmp_path):
    result = invoke("top", "node", "--cluster", write(tmp_path, two_nodes()), "-o", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["nodes"]
    assert rows[0]["rdma"] == [{"resource": SHARED, "kind": "shared", "allocatable": 63, "free": 63}]
    table = invoke("top", "node", "--cluster", write(tmp_path, two_nodes()))
    assert "FREE RDMA" in table.stdout and f"{SHARED} 63/63" in table.stdout
