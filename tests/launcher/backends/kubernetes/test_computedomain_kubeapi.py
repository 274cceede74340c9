"""ComputeDomains end to end against the test API server: GB200 trays in two NVLink
partitions, NVIDIA's DRA driver serving ComputeDomain (its controller modelled in
kubesim/compute_domain.py). A job across two trays of one partition
creates its ComputeDomain, the driver creates the channel template, every worker pod gets
an IMEX channel, and deleting the job deletes the domain and the template."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kubesim.compute_domain import CHANNEL_CLASS, install_compute_domains
from kubesim.dra import install_dra
from kubesim.server import KubeAPIServer
from launcher.cli.app import app

CLIQUE = "3f9d2c1e-7b4a-4e8f-9c6d-2a1b0e5f4d3c"
TRAYS = {"a-1": "0", "a-2": "0", "b-1": "1", "b-2": "1", "b-3": "1"}


@pytest.fixture
def nvl_server(tmp_path, monkeypatch):
    with KubeAPIServer() as srv:
        for name, clique in TRAYS.items():
            srv.add_node(name, gpus=4, labels={"nvidia.com/gpu.product": "NVIDIA-GB200",
                                               "nvidia.com/gpu.count": "4",
                                               "nvidia.com/gpu.clique": f"{CLIQUE}.{clique}"})
        install_dra(srv, {})
        install_compute_domains(srv, list(TRAYS))
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        yield srv


def test_a_job_in_one_partition_gets_its_compute_domain_and_channels(nvl_server):
    srv = nvl_server
    srv.script_pod(r"nv-launcher-.*", logs=[(0.1, "total images/sec: 100.0")], exit_code=0)
    result = CliRunner().invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--name", "nv",
                                      "--workers", "8", "--gpus", "1", "--image", "img",
                                      "--schedule-timeout", "20", "python", "train.py"])
    assert result.exit_code == 0, result.output
    (cd,) = srv.objects("computedomains", "default")
    job = srv.get("jobs", "nv-launcher")
    assert cd["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert cd["spec"]["numNodes"] == 2
    # The driver's controller made the template the pods name, for this domain.
    (template,) = srv.objects("resourceclaimtemplates", "default")
    assert template["metadata"]["name"] == cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert template["metadata"]["labels"]["resource.nvidia.com/computeDomain"] == cd["metadata"]["uid"]
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == CHANNEL_CLASS
    workers = [p for p in srv.objects("pods", "default") if "-worker-" in p["metadata"]["name"]]
    assert len(workers) == 2
    # Both partitions hold it on two trays; partition 0 is the tighter fit (partition 1 stays
    # whole for the next job).
    assert {p["spec"]["nodeName"] for p in workers} == {"a-1", "a-2"}
    for pod in workers:
        (status,) = [s for s in pod["status"]["resourceClaimStatuses"] if s["name"] == "imex-channel"]
        claim = srv.get("resourceclaims", status["resourceClaimName"])
        (got,) = claim["status"]["allocation"]["devices"]["results"]
        assert got["driver"] == "compute-domain.nvidia.com" and got["pool"] == pod["spec"]["nodeName"]
    assert CliRunner().invoke(app, ["delete", "nv", "--backend", "kubernetes"]).exit_code == 0
    srv.wait_for(lambda: not srv.objects("computedomains", "default")
                 and not srv.objects("resourceclaimtemplates", "default"))
