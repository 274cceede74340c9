"""The test API server's model of Trainer's TrainJobStatus feature (kubesim/trainer_status.py)
against Trainer v2.3.0's sources: which pods get the endpoint, the CA ConfigMap, the
token check, the schema's refusals, and status.trainerStatus written. The poster the pods
ship (mpijob/k8s/podscripts/hvdk8s_trainer_status.py) is the client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kubesim import podview, trainer_status
from kubesim.lives import script_exports
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj
from mpijob.k8s.trainer_progress import StatusEndpoint
from tests.mpijob.k8s.test_trainer_status_poster import poster_module

TRAINJOBS = "trainjobs.trainer.kubeflow.org"


def _start(srv, name: str = "m", *, gate: bool = True) -> None:
    srv.install_trainer(trainjob_status=gate)
    spec = build_spec(name=name, workers=2, gpus_per_worker=1, image="img:1",
                      command=("python", "t.py"))
    if srv.get("clustertrainingruntimes", tj.runtime_name(spec), "") is None:
        srv.create(tj.horovod_runtime(spec))
    trainjob, config = render(spec, mode="trainjob")
    srv.script_pod(rf"{name}-.*", exit_code=None)
    srv.create(config)
    srv.create(trainjob)


def _pods(srv, name: str, role: str) -> list[dict]:
    return srv.wait_for(lambda: [p for p in srv.objects("pods")
                                 if p["metadata"]["name"].startswith(f"{name}-{role}-")])


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def _as_in_the_pod(srv, pod: dict, tmp_path, exported: dict[str, str] | None = None
                   ) -> dict[str, str]:
    """The container's variables (with what its script `exported`) as its program sees
    them: its projected volumes' files written here as the kubelet writes them there, and
    Trainer's Service reached where the model serves it (kubesim/podview.py)."""
    container = pod["spec"]["containers"][0]
    server = srv.trainer.status_server
    # without the gate the kubelet still gets a token: nothing here would take it
    issue = server.issue if server else trainer_status.Tokens().issue
    return podview.container_view(srv.store, pod, container,
                                  {**_env(container), **(exported or {})}, tmp_path, issue,
                                  server.resolve if server else lambda url: url)


def test_only_the_trainer_pods_get_the_endpoint_and_its_token(kube_server):
    _start(kube_server)
    node, launcher = _pods(kube_server, "m", "node")[0], _pods(kube_server, "m", "launcher")[0]
    env = _env(node["spec"]["containers"][0])
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/m/status")
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    volume = next(v for v in node["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token")
    token = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert token["audience"] == "trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/m/status"
    # hvdk8s's launcher is not the trainer: Trainer gives it nothing
    assert not any(k.startswith("KUBEFLOW_TRAINER") for k in _env(launcher["spec"]["containers"][0]))
    assert kube_server.trainer.status_server.projected_token(launcher) is None
    cm = kube_server.get("configmaps", "m-tls-config")
    assert cm["data"]["ca.crt"] == kube_server.trainer.status_server.ca_pem
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


def test_without_the_gate_nothing_is_injected_and_the_config_says_so(kube_server):
    _start(kube_server, gate=False)
    node = _pods(kube_server, "m", "node")[0]
    assert not any(k.startswith("KUBEFLOW_TRAINER") for k in _env(node["spec"]["containers"][0]))
    assert kube_server.get("configmaps", "m-tls-config") is None
    config = kube_server.get("configmaps", "kubeflow-trainer-config", "kubeflow-system")
    assert "TrainJobStatus" not in config["data"]["controller_manager_config.yaml"]


def test_a_trainer_pod_posts_and_the_trainjob_carries_it(kube_server, tmp_path):
    _start(kube_server)
    node = _pods(kube_server, "m", "node")[0]
    poster = poster_module.from_environ(_as_in_the_pod(kube_server, node, tmp_path))
    poster.post(30, 120, 412.5, 80.0)
    assert poster.sent == 1
    status = kube_server.get(TRAINJOBS, "m")["status"]["trainerStatus"]
    assert status["progressPercentage"] == 25 and status["estimatedRemainingSeconds"] == 80
    assert {"name": "images_per_sec", "value": "412.5"} in status["metrics"]
    kube_server.step(3)  # Trainer's own status writes leave it alone
    assert kube_server.get(TRAINJOBS, "m")["status"]["trainerStatus"] == status


def _post(url: str, token: str, body: dict, ca: str) -> tuple[int, dict]:
    import ssl

    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10,
                                    context=ssl.create_default_context(cadata=ca)) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_token_for_another_trainjob_or_expired_is_forbidden(kube_server, monkeypatch):
    _start(kube_server, "m")
    _start(kube_server, "n")
    server = kube_server.trainer.status_server
    other = server.projected_token(_pods(kube_server, "n", "node")[0])
    url = server.base_url + trainer_status.status_path("default", "m")
    body = {"trainerStatus": {"progressPercentage": 5, "lastUpdatedTime": "2026-11-28T00:00:00Z"}}
    code, answer = _post(url, other, body, server.ca_pem)
    assert (code, answer["reason"], answer["message"]) == (403, "Forbidden", "Forbidden")
    token = server.projected_token(_pods(kube_server, "m", "node")[0])
    now = server.tokens.clock()
    monkeypatch.setattr(server.tokens, "clock", lambda: now + 3601)
    assert _post(url, token, body, server.ca_pem)[0] == 403
    assert "trainerStatus" not in kube_server.get(TRAINJOBS, "m").get("status", {})


def test_what_the_crd_refuses_is_422_with_the_field(kube_server):
    _start(kube_server)
    server = kube_server.trainer.status_server
    token = server.projected_token(_pods(kube_server, "m", "node")[0])
    url = server.base_url + trainer_status.status_path("default", "m")
    code, answer = _post(url, token, {"trainerStatus": {
        "progressPercentage": 101, "lastUpdatedTime": "2026-11-28T00:00:00Z"}}, server.ca_pem)
    assert code == 422 and answer["reason"] == "Invalid"
    assert "progressPercentage in body should be less than or equal to 100" in answer["message"]
    code, answer = _post(url, token, {"trainerStatus": {"progressPercentage": 1}}, server.ca_pem)
    assert code == 422 and "lastUpdatedTime is required" in answer["message"]


@pytest.mark.parametrize("path", ["/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/"
                                  "trainjobs/m", "/healthz"])
def test_another_path_is_not_found(kube_server, path):
    _start(kube_server)
    server = kube_server.trainer.status_server
    token = server.projected_token(_pods(kube_server, "m", "node")[0])
    code, answer = _post(server.base_url + path, token, {}, server.ca_pem)
    assert (code, answer["reason"]) == (404, "NotFound")


def test_a_token_of_the_right_audience_from_another_namespace_is_forbidden(kube_server):
    _start(kube_server)
    server = kube_server.trainer.status_server
    token = server.tokens.issue("intruders", "p", trainer_status.audience("default", "m"), 3600)
    code, _ = _post(server.base_url + trainer_status.status_path("default", "m"), token,
                    {"trainerStatus": {"progressPercentage": 5,
                                       "lastUpdatedTime": "2026-11-28T00:00:00Z"}},
                    server.ca_pem)
    assert code == 403


def _start_with_launcher_endpoint(srv, name: str = "m", *, gate: bool = True,
                                  ca_optional: bool = True) -> None:
    """As hvdk8s submits where it read the gate on in Trainer's config: the launcher
    carries the endpoint (mpijob.k8s.trainer_progress)."""
    srv.install_trainer(trainjob_status=gate)
    spec = build_spec(name=name, workers=2, gpus_per_worker=1, image="img:1",
                      command=("python", "t.py"))
    if srv.get("clustertrainingruntimes", tj.runtime_name(spec), "") is None:
        srv.create(tj.horovod_runtime(spec))
    trainjob, config = render(spec, mode="trainjob", trainer_status=StatusEndpoint())
    if not ca_optional:
        rjobs = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"][
            "spec"]["replicatedJobs"]
        launcher = next(r for r in rjobs if r["name"] == "launcher")
        volume = launcher["template"]["spec"]["template"]["spec"]["volumes"][-1]
        del volume["projected"]["sources"][1]["configMap"]["optional"]
    srv.script_pod(rf"{name}-.*", exit_code=None)
    srv.create(config)
    srv.create(trainjob)


def _launcher_view(srv, name: str, tmp_path) -> dict[str, str]:
    """The launcher's variables as its program sees them, with what its launch script
    exports (the ConfigMap's launch.sh)."""
    launcher = _pods(srv, name, "launcher")[0]
    script = srv.get("configmaps", f"{name}-config")["data"][tj.LAUNCH_SCRIPT]
    return _as_in_the_pod(srv, launcher, tmp_path, script_exports(script))


def test_the_launcher_posts_with_its_own_token_and_the_trainjob_carries_it(kube_server,
                                                                        tmp_path):
    """Trainer's server takes the launcher's token, projected by another pod than the
    trainer's, as its Authorize does (the TrainJob's audience and namespace, no pod)."""
    _start_with_launcher_endpoint(kube_server)
    environ = _launcher_view(kube_server, "m", tmp_path)
    assert environ["KUBEFLOW_TRAINER_SERVER_URL"].startswith(
        kube_server.trainer.status_server.base_url)
    poster = poster_module.from_environ(environ)
    poster.post(60, 120, 800.0, 40.0)
    assert poster.sent == 1
    status = kube_server.get(TRAINJOBS, "m")["status"]["trainerStatus"]
    assert status["progressPercentage"] == 50 and status["estimatedRemainingSeconds"] == 40


def test_where_the_gate_is_off_the_launcher_starts_without_the_ca(kube_server, tmp_path):
    """The CA's ConfigMap is optional: Trainer makes none without the gate, and the
    launcher starts all the same; its poster then fails once, quietly, and never raises."""
    _start_with_launcher_endpoint(kube_server, gate=False)
    launcher = kube_server.wait_for(lambda: next(
        (p for p in _pods(kube_server, "m", "launcher")
         if (p.get("status") or {}).get("phase") == "Running"), None))
    assert kube_server.get("configmaps", "m-tls-config") is None
    said: list[str] = []
    environ = _as_in_the_pod(kube_server, launcher, tmp_path, script_exports(
        kube_server.get("configmaps", "m-config")["data"][tj.LAUNCH_SCRIPT]))
    poster = poster_module.from_environ(environ, log=said.append)
    poster.post(1, 10, 1.0, 9.0)
    assert poster.sent == 0 and len(said) == 1 and "ca.crt" in said[0]


def test_a_required_ca_would_hold_the_launcher_where_the_gate_is_off(kube_server):
    """Why the CA's source is optional: the kubelet does not mount a projected volume whose
    ConfigMap is missing, and the pod never starts."""
    _start_with_launcher_endpoint(kube_server, gate=False, ca_optional=False)
    launcher = _pods(kube_server, "m", "launcher")[0]
    said = kube_server.wait_for(lambda: [
        e for e in kube_server.objects("events") if e["reason"] == "FailedMount"])
    assert said[0]["message"] == ('MountVolume.SetUp failed for volume "hvdk8s-trainer-status" '
                                  ': configmap "m-tls-config" not found')
    assert said[0]["involvedObject"]["name"] == launcher["metadata"]["name"]
    kube_server.step(3)
    launcher = kube_server.get("pods", launcher["metadata"]["name"])
    assert launcher["status"]["phase"] == "Pending"
