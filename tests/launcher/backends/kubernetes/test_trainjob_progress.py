"""A TrainJob's progress from Trainer's own status (status.trainerStatus, the TrainJobStatus
feature gate on): what a trainer pod posts reaches `get`, `list` and `list -o wide` with the
TrainJob they read anyway, no log read; the launcher, which reads the ranks' reports, gets
the endpoint from submit where Trainer's config turns the gate on, and posts there. Against
the test API server's Trainer (kubesim/trainer_status.py)."""

from __future__ import annotations

import json
import re

import yaml

from kubesim.lives import script_exports
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


SUBMIT = ("submit", "mpi", "--name", "bench", "--workers", "2", "--gpus", "1", "--mode",
          "trainjob", "--image", IMAGE)
COMMAND = ("python", "t.py")
STATUS_URL = ("https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
              "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/bench/status")


def _trainer(k8s, *, gate: bool):
    srv = k8s.server()
    srv.install_trainer(trainjob_status=gate)
    srv.create(tj.horovod_runtime(build_spec(name="t", workers=2, gpus_per_worker=1,
                                             image=IMAGE, command=("python", "t.py"))))
    return srv


def _launcher_patch(trainjob: dict) -> dict:
    rjobs = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"]
    return next(r for r in rjobs if r["name"] == "launcher")["template"]["spec"]["template"][
        "spec"]


def test_the_launcher_posts_with_the_endpoint_submit_gave_it_and_get_shows_it(k8s, tmp_path):
    srv = _trainer(k8s, gate=True)
    srv.script_pod(r"bench-node-0-\d+-\w{5}", exit_code=None)
    srv.script_pod(r"bench-launcher-0-0-\w{5}", logs=["training"], exit_code=None)
    result = hvdk8s(k8s, *SUBMIT, *COMMAND)
    assert result.exit_code == 0, result.output
    assert "Trainer progress is off" not in result.output
    script = srv.get("configmaps", "bench-config")["data"][tj.LAUNCH_SCRIPT]
    assert script_exports(script)["KUBEFLOW_TRAINER_SERVER_URL"] == STATUS_URL
    launcher = srv.wait_for(lambda: next((p for p in srv.objects("pods")
                                          if p["metadata"]["name"].startswith("bench-launcher-")),
                                         None))
    # the launcher pod as Trainer's JobSet made it, run on what it holds
    poster = poster_module.from_environ(_as_in_the_pod(srv, launcher, tmp_path,
                                                       script_exports(script)))
    poster.post(90, 120, 640.0, 30.0)
    assert poster.sent == 1
    srv.wait_for(lambda: any(r.role == "launcher" and r.phase == "Running"
                             for r in k8s.backend().get("bench").replicas))
    got = hvdk8s(k8s, "get", "bench")
    assert re.search(r"step 90/120  images/sec 640\.0 .*ETA 30s", got.stdout), got.stdout


def test_dry_run_shows_the_launchers_endpoint(k8s):
    _trainer(k8s, gate=True)
    shown = hvdk8s(k8s, *SUBMIT, "--dry-run", *COMMAND)
    assert shown.exit_code == 0, shown.output
    trainjob, config = list(yaml.safe_load_all(shown.stdout))[:2]
    pod = _launcher_patch(trainjob)
    volume = next(v for v in pod["volumes"] if v["name"] == "hvdk8s-trainer-status")
    token = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert token["audience"] == ("trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/"
                                 "bench/status")
    assert script_exports(config["data"][tj.LAUNCH_SCRIPT])[
        "KUBEFLOW_TRAINER_SERVER_URL"] == STATUS_URL


def _nothing_for_trainer(k8s) -> str:
    shown = hvdk8s(k8s, *SUBMIT, "--dry-run", *COMMAND)
    assert shown.exit_code == 0, shown.output
    trainjob, config = list(yaml.safe_load_all(shown.stdout))[:2]
    assert not any(v["name"] == "hvdk8s-trainer-status"
                   for v in _launcher_patch(trainjob)["volumes"])
    assert "KUBEFLOW_TRAINER" not in config["data"][tj.LAUNCH_SCRIPT]
    (line,) = [x for x in shown.output.splitlines() if "Trainer progress is off" in x]
    return line


def test_where_the_gate_is_off_submit_says_so_in_one_line_and_renders_nothing(k8s):
    _trainer(k8s, gate=False)
    assert _nothing_for_trainer(k8s) == (
        "note: Kubeflow Trainer progress is off for this job: its TrainJobStatus feature gate "
        "is off (configmap kubeflow-system/kubeflow-trainer-config); hvdk8s get reads progress "
        "from the launcher's log")


def test_where_the_config_cannot_be_read_nothing_is_rendered_and_submit_says_why(k8s):
    srv = _trainer(k8s, gate=True)
    srv.forbid("get", "configmaps", "kubeflow-system")
    assert "hvdk8s may not read Trainer's config" in _nothing_for_trainer(k8s)
