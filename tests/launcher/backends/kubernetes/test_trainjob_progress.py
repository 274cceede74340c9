"""A TrainJob's progress from Trainer's own status (status.trainerStatus, the TrainJobStatus
feature gate on): what a trainer pod posts reaches `get`, `list` and `list -o wide` with the
TrainJob they read anyway, no log read. Against the test API server's Trainer
(kubesim/trainer_status.py)."""

from __future__ import annotations

import json
import re

from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj
from tests.k8s_env import hvdk8s
from tests.kubesim.test_trainer_status_model import _as_in_the_pod
from tests.mpijob.k8s.test_trainer_status_poster import poster_module

IMAGE = "img:1"


def _running_trainjob_that_posted(k8s, tmp_path):
    srv = k8s.server()
    srv.install_trainer(trainjob_status=True)
    srv.create(tj.horovod_runtime(build_spec(name="t", workers=2, gpus_per_worker=1,
                                             image=IMAGE, command=("python", "t.py"))))
    srv.script_pod(r"bench-node-0-\d+-\w{5}", exit_code=None)
    # a launcher whose log holds no report: the figures can only come from Trainer
    srv.script_pod(r"bench-launcher-0-0-\w{5}", logs=["training"], exit_code=None)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "bench", "--workers", "2", "--gpus", "1",
                    "--mode", "trainjob", "--image", IMAGE, "python", "t.py")
    assert result.exit_code == 0, result.output
    node = srv.wait_for(lambda: next((p for p in srv.objects("pods")
                                      if p["metadata"]["name"].startswith("bench-node-")), None))
    poster = poster_module.from_environ(_as_in_the_pod(srv, node, tmp_path))
    poster.post(30, 120, 412.5, 80.0)
    assert poster.sent == 1
    srv.wait_for(lambda: any(r.role == "launcher" and r.phase == "Running"
                             for r in k8s.backend().get("bench").replicas))
    return srv


def test_get_shows_what_the_trainer_pods_posted(k8s, tmp_path):
    _running_trainjob_that_posted(k8s, tmp_path)
    got = hvdk8s(k8s, "get", "bench")
    assert got.exit_code == 0, got.output
    assert re.search(r"step 30/120  images/sec 412\.5 .*ETA 1m20s", got.stdout), got.stdout
    progress = json.loads(hvdk8s(k8s, "get", "bench", "-o", "json").stdout)["progress"]
    assert (progress["step"], progress["source"]) == (30, "trainerStatus")


def test_list_shows_it_with_no_log_read(k8s, tmp_path):
    srv = _running_trainjob_that_posted(k8s, tmp_path)
    srv.clear_requests()
    listed = hvdk8s(k8s, "list", "-o", "wide")
    header, row = listed.stdout.splitlines()[:2]
    cells = dict(zip(re.split(r"\s{2,}", header), re.split(r"\s{2,}", row), strict=True))
    assert (cells["IMAGES/SEC"], cells["STEP"], cells["ETA"]) == ("412.5", "30/120", "1m20s")
    assert srv.count_requests("GET", r"/log$") == 0


def _gate_findings(kubeconfig: str) -> list[str]:
    from typer.testing import CliRunner

    from launcher.cli.app import app

    result = CliRunner().invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json"])
    return [f["finding"] for f in json.loads(result.stdout)["findings"]
            if f["check"] == "trainer status"]


def test_doctor_says_whether_trainers_config_turns_the_gate_on(kube_server, kubeconfig):
    kube_server.install_trainer()
    assert _gate_findings(kubeconfig) == [
        "Kubeflow Trainer's TrainJobStatus feature gate is off (its config)"]
    # reinstalled with the gate on: a new config
    kube_server.delete("configmaps", "kubeflow-trainer-config", "kubeflow-system")
    kube_server.install_trainer(trainjob_status=True)
    assert _gate_findings(kubeconfig) == [
        "Kubeflow Trainer's TrainJobStatus feature gate is on in its config"]


def test_doctor_says_nothing_of_the_gate_where_the_config_cannot_be_read(kube_server,
                                                                        kubeconfig):
    kube_server.install_trainer(trainjob_status=True)
    kube_server.forbid("get", "configmaps", "kubeflow-system")
    assert _gate_findings(kubeconfig) == []
