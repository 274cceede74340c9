"""`--network NAD` (Multus): the worker pods' networks annotation and the resource each
NetworkAttachmentDefinition names, checked against the test API server's NAD CRD and its
network-resources-injector-like admission; doctor lists the NADs and NIC DRA drivers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kubesim.multus import install_multus, nad
from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from mpijob.errors import SpecError
from mpijob.jobspec import names
from mpijob.jobspec.spec import Network, build_spec
from mpijob.k8s.render import SSHKeys
from tests.kubeapi_fixtures import GPU_NODE_LABELS
from tests.schemas import K8S_VERSION_DRA, validate_core

SSH = SSHKeys("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
              "ssh-ed25519 AAAA x")
VF = "nvidia.com/sriov_rdma_vf"
ANNOTATION = "k8s.v1.cni.cncf.io/networks"


def workers(objects):
    return [o for o in objects if o["kind"] == "Pod"
            and o["metadata"]["labels"].get(names.LABEL_ROLE) == "worker"]


def test_worker_pods_name_the_networks_and_request_their_resources():
    spec = build_spec(name="j", workers=2, gpus_per_worker=1,
                      networks=[Network(name="rdma-a", resource=VF),
                                Network(name="other/rdma-b", resource=VF),
                                Network(name="macvlan")])
    objects = render(spec, mode="pods", ssh=SSH, benchmark_source="x")
    (pod,) = workers(objects)[:1]
    assert pod["metadata"]["annotations"][ANNOTATION] == "rdma-a,other/rdma-b,macvlan"
    res = pod["spec"]["containers"][0]["resources"]
    assert res["limits"][VF] == "2" == res["requests"][VF]  # one per network naming it
    launcher = next(o for o in objects if o["kind"] == "Job")
    assert ANNOTATION not in json.dumps(launcher)
    for o in objects:
        if o["kind"] in ("Pod", "Job"):
            validate_core(o, K8S_VERSION_DRA)
    op = render(spec, mode="operator", benchmark_source="x")[0]
    template = op["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert template["metadata"]["annotations"][ANNOTATION] == "rdma-a,other/rdma-b,macvlan"
    assert template["spec"]["containers"][0]["resources"]["limits"][VF] == "2"


def test_a_bad_network_name_is_refused():
    with pytest.raises((SpecError, ValueError), match="NetworkAttachmentDefinition name"):
        build_spec(name="j", workers=1, gpus_per_worker=1, networks=[Network(name="Bad_Name")])


def test_doctor_lists_nads_and_nic_dra_drivers():
    from mpijob.scheduling.doctor import Facts, assess

    def finding(check, **kw):
        found = assess(Facts(server="s", namespace="ml", version="v1.34.0", nodes=[], **kw))
        return next((f for f in found if f.check == check), None)

    assert "Multus is not installed" in finding("networks").finding
    nads = [nad("rdma-net", "ml", VF), nad("macvlan", "ml")]
    ok = finding("networks", groups={"k8s.cni.cncf.io"}, nads=nads)
    assert ok.status == "ok"
    assert f"macvlan (no resource), rdma-net ({VF})" in ok.finding
    assert finding("nic dra") is None
    nic = finding("nic dra", nic_slices={"dra.net": (16, 2)}, nic_classes={"dranet": "dra.net"})
    assert nic.status == "ok" and "dra.net: 16 NIC(s) on 2 node(s), DeviceClass dranet" in nic.finding


def test_admission_refuses_a_pod_naming_a_network_without_its_resource():
    from kubesim.errors import ApiError

    with KubeAPIServer() as srv:
        install_multus(srv)
        srv.create(nad("rdma-net", "default", VF))

        def pod(name, annotation, amount=None):
            res = {"limits": {VF: amount}, "requests": {VF: amount}} if amount else {}
            return {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default",
                                 "annotations": {ANNOTATION: annotation}},
                    "spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}}

        with pytest.raises(ApiError, match="requests 0 of it"):
            srv.create(pod("a", "rdma-net"))
        with pytest.raises(ApiError, match="could not find network attachment definition 'default/nope'"):
            srv.create(pod("b", "nope"))
        with pytest.raises(ApiError, match="names 2 network"):
            srv.create(pod("c", "rdma-net,default/rdma-net@net2", "1"))
        assert srv.create(pod("d", "rdma-net", "1"))["metadata"]["name"] == "d"


@pytest.fixture
def multus_server(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        for n in range(2):
            srv.add_node(f"n{n}", gpus=8, labels=dict(GPU_NODE_LABELS), resources={VF: 8})
        install_multus(srv)
        srv.create(nad("rdma-net", "default", VF))
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        yield srv


def submit(*args):
    return CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--image", "img",
                                    "--rdma", "off", *args, "python", "t.py"])


def test_a_missing_nad_is_one_line_before_anything_is_created(multus_server):
    srv = multus_server
    result = submit("--name", "m", "--workers", "2", "--gpus", "1", "--network", "rdma-net,nope")
    assert result.exit_code == 2
    assert ("--network nope: no NetworkAttachmentDefinition nope in namespace default; list "
            "them with `kubectl get network-attachment-definitions -n default`") in result.output
    assert "Traceback" not in result.output
    assert not srv.objects("pods", "default") and not srv.objects("jobs", "default")


def test_workers_join_the_network_and_admission_accepts_them(multus_server):
    srv = multus_server
    srv.script_pod(r"m-launcher-.*", logs=[(0.1, "total images/sec: 100.0")], exit_code=0)
    result = submit("--name", "m", "--workers", "2", "--gpus", "1", "--network", "rdma-net",
                    "--schedule-timeout", "20")
    assert result.exit_code == 0, result.output
    pods = [p for p in srv.objects("pods", "default")
            if p["metadata"]["labels"].get(names.LABEL_ROLE) == "worker"]
    assert pods
    for p in pods:
        assert p["metadata"]["annotations"][ANNOTATION] == "rdma-net"
        assert p["spec"]["containers"][0]["resources"]["limits"][VF] == "1"
    # The server dry run shows the resource read from the NAD, as submit sends it.
    dry = submit("--name", "m2", "--workers", "2", "--gpus", "1", "--network", "rdma-net",
                 "--dry-run=server", "-o", "json")
    assert dry.exit_code == 0, dry.output
    assert VF in dry.stdout


def test_without_multus_network_is_refused(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        srv.add_node("n0", gpus=8, labels=dict(GPU_NODE_LABELS))
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        result = submit("--name", "m", "--workers", "1", "--gpus", "1", "--network", "x")
        assert result.exit_code == 2 and "Multus is not installed" in result.output


def test_doctor_reads_the_nads_and_nic_drivers_from_the_cluster(multus_server):
    from kubesim.dra import install_dra

    install_dra(multus_server, {"n0": ["GPU-0"]}, nics={"n0": [("ib0", "pci0000:00")],
                                                        "n1": [("ib0", "pci0000:00")]})
    result = CliRunner().invoke(app, ["doctor", "-o", "json"])
    found = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
    assert f"rdma-net ({VF})" in found["networks"]["finding"]
    assert "dra.net: 2 NIC(s) on 2 node(s), DeviceClass dranet" in found["nic dra"]["finding"]
