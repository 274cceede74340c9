"""`--host-network` (issue 10 #9): two jobs on one node do not clash on a fixed sshd port,
and MPI/NCCL get a stated interface default without --network-interface. End to end
through the CLI against the test API server, whose scheduler models the NodePorts filter."""

from __future__ import annotations

import pytest

from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.jobspec.ssh_port import HOST_SSH_PORTS, derived_ssh_port, free_ssh_port
from mpijob.k8s.command import mpirun_argv
from mpijob.k8s.hostnet import NCCL_SOCKET_IFNAME_DEFAULT, OMPI_TCP_EXCLUDE
from tests.k8s_env import hvdk8s

NODE = "gpu-node-0"


@pytest.fixture(autouse=True)
def privileged_namespace(k8s):
    """hostNetwork is forbidden under Pod Security baseline, the test server's default:
    these jobs run where an admin allowed it (test_pod_security.py checks the refusal)."""
    if k8s.srv is not None:
        k8s.srv.set_pod_security(k8s.namespace, enforce="privileged")


def submit(k8s, name):
    return hvdk8s(k8s, "submit", "mpi", "--name", name, "--workers", "1", "--gpus", "2",
                  "--host-network", "--selector", f"kubernetes.io/hostname={NODE}",
                  "--schedule-timeout", "5", "--image", "img:1", "python", "train.py")


def worker_port(srv, job):
    pod = srv.get("pods", names.worker(job, 0))
    return pod["spec"]["containers"][0]["ports"][0]["containerPort"], pod["spec"].get("nodeName")


def test_two_host_network_jobs_share_a_node(k8s):
    srv = k8s.server()
    srv.script_pod(r"(hn1|hn2)-(launcher-\w{5}|worker-\d+)", exit_code=None)
    for job in ("hn1", "hn2"):
        result = submit(k8s, job)
        assert result.exit_code == 0, result.output
        assert "all workers scheduled" in result.output
    (p1, n1), (p2, n2) = worker_port(srv, "hn1"), worker_port(srv, "hn2")
    assert n1 == n2 == NODE and p1 != p2
    assert p1 in HOST_SSH_PORTS and p2 in HOST_SSH_PORTS
    launcher = srv.objects("jobs", "default")
    env = {j["metadata"]["name"]: {e["name"]: e.get("value") for e in
                                   j["spec"]["template"]["spec"]["containers"][0]["env"]}
           for j in launcher}
    assert env["hn1-launcher"]["HVDK8S_SSH_PORT"] == str(p1)


def test_a_port_in_use_on_the_node_is_skipped(k8s):
    srv = k8s.server()
    srv.script_pod(r"hn3-(launcher-\w{5}|worker-\d+)", exit_code=None)
    srv.script_pod("squatter", exit_code=None)
    port = derived_ssh_port("default", "hn3")
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "squatter"},
                "spec": {"nodeName": NODE, "hostNetwork": True, "containers": [{
                    "name": "c", "image": "x", "ports": [{"containerPort": port}]}]}})
    result = submit(k8s, "hn3")
    assert result.exit_code == 0, result.output
    assert f"sshd port {port} is in use on the job's nodes" in result.output
    assert worker_port(srv, "hn3") == (free_ssh_port("default", "hn3", {port}), NODE)


def test_derived_port_is_stable_and_moves_past_taken_ones():
    a = derived_ssh_port("default", "x")
    assert a == derived_ssh_port("default", "x") != derived_ssh_port("other", "x")
    assert free_ssh_port("default", "x", {a}) == (a + 1 if a + 1 in HOST_SSH_PORTS
                                                  else HOST_SSH_PORTS.start)
    spec = build_spec(name="x", host_network=True, command=("python", "t.py"))
    assert spec.ssh_port == a
    assert build_spec(name="x", command=("python", "t.py")).ssh_port == 2222


def test_default_interfaces_without_network_interface():
    argv = mpirun_argv(build_spec(name="x", host_network=True, command=("t",)), "/h")
    assert ["-mca", "btl_tcp_if_exclude", OMPI_TCP_EXCLUDE] == argv[argv.index("btl_tcp_if_exclude") - 1:
                                                                    argv.index("btl_tcp_if_exclude") + 2]
    assert OMPI_TCP_EXCLUDE.split(",")[:2] == ["lo", "docker0"]
    assert f"NCCL_SOCKET_IFNAME={NCCL_SOCKET_IFNAME_DEFAULT}" in argv
    assert NCCL_SOCKET_IFNAME_DEFAULT.startswith("^")
    hydra = mpirun_argv(build_spec(name="x", host_network=True, command=("t",),
                                   mpi_implementation="MPICH"), "/h")
    assert hydra[hydra.index("NCCL_SOCKET_IFNAME") + 1] == NCCL_SOCKET_IFNAME_DEFAULT
    named = mpirun_argv(build_spec(name="x", host_network=True, network_interface="ib0",
                                   command=("t",)), "/h")
    assert "btl_tcp_if_exclude" not in named and "NCCL_SOCKET_IFNAME=ib0" in named
    # Pod networks have one interface: nothing added.
    assert "btl_tcp_if_exclude" not in mpirun_argv(build_spec(name="x", command=("t",)), "/h")


def test_operator_mode_on_the_host_network_uses_the_jobs_port(k8s):
    """The operator's worker runs sshd: on the host network port 22 is the node's own."""
    srv = k8s.server()
    srv.install_mpi_operator()
    srv.script_pod(r"(op1|op2)-worker-\d+", exit_code=None)
    for job in ("op1", "op2"):
        result = hvdk8s(k8s, "submit", "mpi", "--name", job, "--workers", "1", "--gpus", "2",
                        "--host-network", "--mode", "operator", "--selector",
                        f"kubernetes.io/hostname={NODE}", "--image", "img:1",
                        "python", "train.py")
        assert result.exit_code == 0, result.output
    ports = []
    for job in ("op1", "op2"):
        mpijob = srv.get("mpijobs.kubeflow.org", job)
        specs = mpijob["spec"]["mpiReplicaSpecs"]
        worker = specs["Worker"]["template"]["spec"]["containers"][0]
        port = worker["ports"][0]["containerPort"]
        assert worker["command"][-2:] == ["-p", str(port)]  # sshd's args
        assert "exec /usr/sbin/sshd -De" in worker["command"][2]
        launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
        argv = launcher["command"]
        assert argv[argv.index("plm_rsh_args") + 1].startswith(f"-p {port} ")
        assert {"name": "HVDK8S_SSH_PORT", "value": str(port)} in launcher["env"]
        ports.append(port)
    assert ports[0] != ports[1]
    # Both jobs' workers run on the one node.
    srv.wait_for(lambda: all((srv.get("pods", f"{j}-worker-0") or {}).get("spec", {})
                             .get("nodeName") == NODE for j in ("op1", "op2")))


def test_operator_mode_on_the_host_network_refuses_hydra(k8s):
    k8s.server().install_mpi_operator()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "hy", "--workers", "1", "--gpus", "1",
                    "--host-network", "--mode", "operator", "--mpi", "mpich", "--image", "i:1",
                    "python", "t.py")
    assert result.exit_code == 2
    assert "--host-network with --mode operator needs --mpi openmpi" in result.output
