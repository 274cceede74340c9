"""The poster the pods run (mpijob/k8s/podscripts/hvdk8s_trainer_status.py) against a real
HTTPS server on loopback, its certificate from a CA made here: what it sends, its
throttle, and a refused token said once and never raised."""

from __future__ import annotations

import datetime
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kubesim.pki import make_pki
from tests.podscripts import PODSCRIPTS, load_podscript

PROGRAM = PODSCRIPTS / "hvdk8s_trainer_status.py"
PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/j/status"


poster_module = load_podscript(PROGRAM.name)


class Endpoint:
    """An HTTPS endpoint on 127.0.0.1 that takes the bearer token `token` on PATH."""

    def __init__(self, folder: Path, token: str):
        pki = make_pki()
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = folder / "ca.crt"
        self.ca.write_bytes(pki.ca_pem)
        self.token, self.received = token, []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.received.append((self.path, self.headers.get("Authorization"), body))
                ok = (self.path == PATH
                      and self.headers.get("Authorization") == f"Bearer {endpoint.token}")
                answer = body if ok else json.dumps({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "Forbidden", "reason": "Forbidden", "code": 403}).encode()
                self.send_response(200 if ok else 403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        context = pki.server_context(folder)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}{PATH}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def endpoint(tmp_path):
    e = Endpoint(tmp_path / "tls", "good-token")
    yield e
    e.close()


def _environ(endpoint: Endpoint, tmp_path: Path, token: str) -> dict[str, str]:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    return {"KUBEFLOW_TRAINER_SERVER_URL": endpoint.url,
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(endpoint.ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token_file)}


def test_without_trainers_environment_there_is_no_poster(endpoint, tmp_path):
    assert poster_module.from_environ({}) is None
    partial = _environ(endpoint, tmp_path, "good-token")
    del partial["KUBEFLOW_TRAINER_SERVER_TOKEN"]
    assert poster_module.from_environ(partial) is None


def test_it_posts_trainers_shape_with_the_token_over_verified_tls(endpoint, tmp_path):
    said: list[str] = []
    poster = poster_module.from_environ(_environ(endpoint, tmp_path, "good-token"),
                                        clock=Clock(), log=said.append)
    poster.post(30, 120, 412.25, 95.4)
    assert poster.sent == 1 and said == []
    path, auth, body = endpoint.received[0]
    assert (path, auth) == (PATH, "Bearer good-token")
    status = json.loads(body)["trainerStatus"]
    assert status["progressPercentage"] == 25
    assert status["estimatedRemainingSeconds"] == 95
    assert status["metrics"] == [{"name": "step", "value": "30"},
                                 {"name": "total_steps", "value": "120"},
                                 {"name": "images_per_sec", "value": "412.25"}]
    when = datetime.datetime.strptime(status["lastUpdatedTime"], "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - when).total_seconds()) < 600


def test_unknown_figures_are_left_out_not_invented():
    status = poster_module.status_body(7, None, None, float("nan"))["trainerStatus"]
    assert "progressPercentage" not in status and "estimatedRemainingSeconds" not in status
    assert status["metrics"] == [{"name": "step", "value": "7"}]


def test_it_sends_at_most_one_post_per_interval_and_the_last_step_always(endpoint, tmp_path):
    clock = Clock()
    poster = poster_module.from_environ(_environ(endpoint, tmp_path, "good-token"), clock=clock)
    for step in range(1, 11):  # ten steps within one interval: the first one goes
        poster.post(step, 100, 50.0, 10.0)
        clock.now += poster_module.MIN_INTERVAL / 20
    assert len(endpoint.received) == 1
    clock.now += poster_module.MIN_INTERVAL
    poster.post(11, 100, 50.0, 9.0)
    assert len(endpoint.received) == 2
    poster.post(100, 100, 50.0, 0.0)  # within the interval, but the job's last step
    assert len(endpoint.received) == 3
    assert json.loads(endpoint.received[-1][2])["trainerStatus"]["progressPercentage"] == 100


def test_a_refused_token_is_said_once_and_never_raised(endpoint, tmp_path):
    said: list[str] = []
    clock = Clock()
    poster = poster_module.from_environ(_environ(endpoint, tmp_path, "stolen"), clock=clock,
                                        log=said.append)
    for step in range(5):
        poster.post(step, 10, 1.0, 1.0)
        clock.now += poster_module.MAX_BACKOFF
    assert poster.sent == 0 and len(endpoint.received) == 5
    assert len(said) == 1 and "HTTP 403: Forbidden" in said[0]


def test_after_a_failure_it_waits_longer_and_a_rotated_token_is_read_again(endpoint, tmp_path):
    clock = Clock()
    environ = _environ(endpoint, tmp_path, "expired")
    poster = poster_module.from_environ(environ, clock=clock, log=lambda _: None)
    poster.post(1, 10, 1.0, 1.0)
    clock.now += poster_module.MIN_INTERVAL  # a plain interval is not enough after a failure
    poster.post(2, 10, 1.0, 1.0)
    assert len(endpoint.received) == 1
    Path(environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).write_text("good-token")  # the kubelet's
    clock.now += poster_module.MAX_BACKOFF
    poster.post(3, 10, 1.0, 1.0)
    assert poster.sent == 1 and endpoint.received[-1][1] == "Bearer good-token"


def test_an_endpoint_of_another_ca_is_refused_quietly(tmp_path):
    other = Endpoint(tmp_path / "other", "good-token")
    try:
        environ = _environ(other, tmp_path, "good-token")
        environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"] = str(tmp_path / "wrong-ca.crt")
        (tmp_path / "wrong-ca.crt").write_bytes(make_pki().ca_pem)
        said: list[str] = []
        poster = poster_module.from_environ(environ, clock=Clock(), log=said.append)
        poster.post(1, 10, 1.0, 1.0)
        assert poster.sent == 0 and other.received == []
        assert len(said) == 1 and "CERTIFICATE_VERIFY_FAILED" in said[0]
    finally:
        other.close()


def test_a_missing_ca_file_is_a_failure_not_an_exception(endpoint, tmp_path):
    environ = _environ(endpoint, tmp_path, "good-token")
    environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"] = str(tmp_path / "absent.crt")
    said: list[str] = []
    poster = poster_module.from_environ(environ, clock=Clock(), log=said.append)
    poster.post(1, 10, 1.0, 1.0)
    assert poster.sent == 0 and endpoint.received == []
    assert len(said) == 1 and "absent.crt" in said[0]


def test_it_runs_on_the_oldest_python_images_have_and_imports_only_the_standard_library():
    import ast
    import sys

    tree = ast.parse(PROGRAM.read_text(), feature_version=(3, 8))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names)


def test_a_trainjob_ships_it_in_its_configmap_and_the_other_modes_do_not():
    from launcher.backends.kubernetes.rendering import render
    from mpijob.jobspec.spec import build_spec
    from tests.render_cases import FIXED_KEYS

    spec = build_spec(name="j", workers=2, gpus_per_worker=1, image="img:1",
                      command=("python", "t.py"))
    config = render(spec, mode="trainjob")[1]
    assert config["data"]["hvdk8s_trainer_status.py"] == PROGRAM.read_text()
    for mode in ("operator", "pods"):
        objects = render(spec, mode=mode, ssh=FIXED_KEYS)
        assert not any("hvdk8s_trainer_status.py" in (o.get("data") or {}) for o in objects)
