"""The test API server's model of Trainer's TrainJobStatus feature (kubesim/trainer_status.py)
against Trainer v2.3.0's sources: which pods get the endpoint, the CA ConfigMap, the
token check, the schema's refusals, and status.trainerStatus written. The poster the pods
ship (mpijob/k8s/podscripts/hvdk8s_trainer_status.py) is the client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kubesim import trainer_status
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj
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


def _as_in_the_pod(srv, pod: dict, tmp_path) -> dict[str, str]:
    """The pod's Trainer variables, its token volume's files written here as the kubelet
    writes them there."""
    env = _env(pod["spec"]["containers"][0])
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token")
    cm = srv.get("configmaps", volume["projected"]["sources"][1]["configMap"]["name"])
    (tmp_path / "ca.crt").write_text(cm["data"]["ca.crt"])
    (tmp_path / "token").write_text(srv.trainer.status_server.projected_token(pod) or "")
    return {**env, "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(tmp_path / "ca.crt"),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tmp_path / "token")}


def test_only_the_trainer_pods_get_the_endpoint_and_its_token(kube_server):
    _start(kube_server)
    node, launcher = _pods(kube_server, "m", "node")[0], _pods(kube_server, "m", "launcher")[0]
    env = _env(node["spec"]["containers"][0])
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].endswith(
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
