"""hvdk8s's own transport against the test API server over real TLS: kubeconfig certificate
authorities, client certificates, tls-server-name, insecure-skip-tls-verify, exec plugins,
rotated token files, auth-provider entries, proxies, the pod's service account; and that none
of it loads the official client."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes import kubeconfig as kubeconfig_module
from launcher.backends.kubernetes.client import NODE, POD, ApiError, RetryPolicy, connect
from launcher.backends.kubernetes.exec_credential import ExecPlugin
from launcher.backends.kubernetes.httpproxy import proxy_for
from launcher.errors import UserError
from tests.paths import ROOT
from tests.tls_certs import Pki, make_pki

REPO = ROOT


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("alice", "bob"))


@pytest.fixture
def tls_server(pki):
    with KubeAPIServer(controllers=False, tls=pki.server_context()) as srv:
        srv.add_node("gpu-node-0", gpus=8)
        yield srv


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _write(path: Path, server: str, cluster: dict, user: dict) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": server, **cluster}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _no_retry() -> RetryPolicy:
    return RetryPolicy(tries=1)


def _node_names(client) -> set[str]:
    return {n["metadata"]["name"] for n in client.items(NODE)}


# --- TLS --------------------------------------------------------------------------------------
def test_a_client_certificate_authenticates_over_tls_as_its_common_name(tls_server, pki,
                                                                       tmp_path):
    kc = _write(tmp_path / "kc", tls_server.url,
                {"certificate-authority-data": _b64(pki.ca)},
                {"client-certificate-data": _b64(pki.folder / "alice.crt"),
                 "client-key-data": _b64(pki.folder / "alice.key")})
    tls_server.forbid("list", "pods", user="alice")
    client = connect(kubeconfig=kc)
    assert client.host.startswith("https://127.0.0.1:")
    assert _node_names(client) == {"gpu-node-0"}
    with pytest.raises(ApiError) as err:  # the server saw alice, not an anonymous caller
        client.items(POD)
    assert err.value.status == 403


def test_relative_certificate_paths_are_relative_to_the_kubeconfig(tls_server, pki, tmp_path):
    folder = tmp_path / "conf"
    (folder / "certs").mkdir(parents=True)
    for name in ("ca.crt", "bob.crt", "bob.key"):
        (folder / "certs" / name).write_bytes((pki.folder / name).read_bytes())
    kc = _write(folder / "config", tls_server.url, {"certificate-authority": "certs/ca.crt"},
                {"client-certificate": "certs/bob.crt", "client-key": "certs/bob.key"})
    tls_server.forbid("list", "nodes", user="bob")
    with pytest.raises(ApiError) as err:  # run from elsewhere: the paths still resolve
        connect(kubeconfig=kc).items(NODE)
    assert err.value.status == 403


def test_an_untrusted_server_certificate_is_refused_in_one_line(tls_server, tmp_path):
    kc = _write(tmp_path / "kc", tls_server.url, {}, {"token": tls_server.token})
    with pytest.raises(ApiError) as err:
        connect(kubeconfig=kc, retry=_no_retry()).items(NODE)
    message = str(err.value.user_error())
    assert message.startswith("cannot reach the Kubernetes API server: https://127.0.0.1:")
    assert "certificate verify failed" in message and "\n" not in message


def test_insecure_skip_tls_verify_trusts_any_certificate(tls_server, tmp_path):
    kc = _write(tmp_path / "kc", tls_server.url, {"insecure-skip-tls-verify": True},
                {"token": tls_server.token})
    assert _node_names(connect(kubeconfig=kc)) == {"gpu-node-0"}


def test_tls_server_name_checks_the_certificate_against_that_name(pki, tmp_path):
    with KubeAPIServer(controllers=False, tls=pki.server_context("other")) as srv:
        base = {"certificate-authority": str(pki.ca)}
        plain = _write(tmp_path / "plain", srv.url, base, {"token": srv.token})
        with pytest.raises(ApiError) as err:  # other.crt is for kubernetes.default.svc only
            connect(kubeconfig=plain, retry=_no_retry()).items(NODE)
        assert "127.0.0.1" in str(err.value) and err.value.status == 0
        named = _write(tmp_path / "named", srv.url,
                       {**base, "tls-server-name": "kubernetes.default.svc"}, {"token": srv.token})
        assert _node_names(connect(kubeconfig=named)) == set()


def test_a_bad_certificate_authority_is_named(tls_server, tmp_path):
    kc = _write(tmp_path / "kc", tls_server.url, {"certificate-authority-data": "%%%"},
                {"token": "t"})
    with pytest.raises(UserError, match="certificate-authority-data is not base64"):
        connect(kubeconfig=kc).items(NODE)
    kc = _write(tmp_path / "kc2", tls_server.url,
                {"certificate-authority": str(tmp_path / "missing.crt")}, {"token": "t"})
    with pytest.raises(UserError, match=r"cannot read certificate-authority .*missing\.crt"):
        connect(kubeconfig=kc).items(NODE)


def test_the_pods_service_account_over_tls(tls_server, pki, tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token-1\n")
    (sa / "ca.crt").write_bytes(pki.ca.read_bytes())
    (sa / "namespace").write_text("team-b\n")
    tls_server.add_token("sa-token-1", "system:serviceaccount:team-b:trainer")
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", str(sa))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(tls_server.port))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    client = connect()
    assert (client.context, client.namespace) == ("in-cluster", "team-b")
    assert _node_names(client) == {"gpu-node-0"}
    # The kubelet rotates the projected token: a 401 re-reads the file at once.
    (sa / "token").write_text("sa-token-2\n")
    tls_server.tokens.revoke("sa-token-1")
    tls_server.add_token("sa-token-2", "system:serviceaccount:team-b:trainer")
    assert _node_names(client) == {"gpu-node-0"}


# --- tokens -----------------------------------------------------------------------------------
def test_a_rotated_token_file_is_read_again_after_a_401(kube_server, tmp_path):
    (tmp_path / "token").write_text("first\n")
    kube_server.add_token("first", "ci")
    kc = _write(tmp_path / "kc", kube_server.url, {}, {"tokenFile": "token"})
    client = connect(kubeconfig=kc)
    assert len(_node_names(client)) == 2
    (tmp_path / "token").write_text("second\n")
    kube_server.tokens.revoke("first")
    kube_server.add_token("second", "ci")
    assert len(_node_names(client)) == 2
    kube_server.tokens.revoke("second")  # a token nobody can renew stays a 401
    with pytest.raises(ApiError) as err:
        client.items(NODE)
    assert err.value.status == 401


def test_an_auth_provider_entry_is_read_by_the_official_loader(kube_server, tmp_path):
    # An OIDC id-token that has not expired is sent as it is (no refresh, no network).
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 4102444800, "sub": "carol"}).encode())
    jwt = "eyJhbGciOiJub25lIn0." + claims.decode().rstrip("=") + ".sig"
    kube_server.add_token(jwt, "carol")
    kc = _write(tmp_path / "kc", kube_server.url, {}, {"auth-provider": {
        "name": "oidc", "config": {"client-id": "k8s", "id-token": jwt,
                                   "idp-issuer-url": "https://idp.invalid"}}})
    kube_server.forbid("list", "pods", user="carol")
    client = connect(kubeconfig=kc)
    assert len(_node_names(client)) == 2
    with pytest.raises(ApiError) as err:
        client.items(POD)
    assert err.value.status == 403


# --- exec plugins -----------------------------------------------------------------------------
PLUGIN = """\
#!{python}
# A stand-in for gke-gcloud-auth-plugin: logs what it was given, answers token N on run N.
import json, os, sys
state = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.jsonl")
runs = sum(1 for _ in open(state)) if os.path.exists(state) else 0
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
with open(state, "a") as f:
    f.write(json.dumps({{"info": info, "argv": sys.argv[1:], "team": os.environ.get("TEAM")}}) + "\\n")
status = {{"token": "exec-token-%d" % (runs + 1)}}
if os.environ.get("CERT"):
    status = {{"clientCertificateData": open(os.environ["CERT"]).read(),
              "clientKeyData": open(os.environ["KEY"]).read()}}
if os.environ.get("EXPIRES"):
    status["expirationTimestamp"] = os.environ["EXPIRES"]
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}}))
"""


def _plugin(folder: Path) -> Path:
    path = folder / "bin" / "auth-plugin"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PLUGIN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _runs(plugin: Path) -> list[dict]:
    state = plugin.parent / "runs.jsonl"
    return [json.loads(line) for line in state.read_text().splitlines()] if state.exists() else []


def _exec(command: str, **extra) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command,
                     "args": ["get-token", "--cluster", "k"], "interactiveMode": "Never",
                     "env": [{"name": "TEAM", "value": "vision"}], **extra}}


def test_an_exec_plugin_token_is_cached_and_renewed_after_a_401(kube_server, tmp_path):
    plugin = _plugin(tmp_path / "conf")
    kc = _write(tmp_path / "conf" / "config", kube_server.url, {},
                _exec("./bin/auth-plugin", provideClusterInfo=True))  # relative to the file
    kube_server.add_token("exec-token-1", "dev")
    client = connect(kubeconfig=kc)
    assert _runs(plugin) == [], "the plugin runs at the first request, not at connect"
    for _ in range(3):
        assert len(_node_names(client)) == 2
    runs = _runs(plugin)
    assert len(runs) == 1
    assert runs[0]["argv"] == ["get-token", "--cluster", "k"] and runs[0]["team"] == "vision"
    assert runs[0]["info"]["spec"] == {"interactive": False,
                                       "cluster": {"server": kube_server.url}}
    # The token was revoked early: the 401 runs the plugin again and the request is retried.
    kube_server.tokens.revoke("exec-token-1")
    kube_server.add_token("exec-token-2", "dev")
    assert len(_node_names(client)) == 2
    assert len(_runs(plugin)) == 2


def test_an_exec_plugin_token_is_renewed_when_it_expires(tmp_path, monkeypatch):
    plugin = _plugin(tmp_path)
    monkeypatch.setenv("EXPIRES", "2030-01-01T00:00:00Z")
    now = [time.mktime((2029, 12, 31, 0, 0, 0, 0, 0, 0))]
    exec_plugin = ExecPlugin(_exec(str(plugin))["exec"], user_name="u", cluster={},
                             server="https://x", clock=lambda: now[0])
    first = exec_plugin.credential()
    assert exec_plugin.credential() is first and first.token == "exec-token-1"
    now[0] += 2 * 86400  # past the expirationTimestamp
    assert exec_plugin.credential().token == "exec-token-2"


def test_an_exec_plugin_client_certificate_is_used_for_tls(tls_server, pki, tmp_path,
                                                          monkeypatch):
    plugin = _plugin(tmp_path)
    monkeypatch.setenv("CERT", str(pki.folder / "alice.crt"))
    monkeypatch.setenv("KEY", str(pki.folder / "alice.key"))
    kc = _write(tmp_path / "kc", tls_server.url, {"certificate-authority": str(pki.ca)},
                _exec(str(plugin)))
    tls_server.forbid("list", "nodes", user="alice")
    with pytest.raises(ApiError) as err:
        connect(kubeconfig=kc).items(NODE)
    assert err.value.status == 403 and len(_runs(plugin)) == 1


@pytest.mark.parametrize("user, expected, code", [
    (_exec("gke-gcloud-auth-plugin-missing",
           installHint="Install gke-gcloud-auth-plugin:\n  gcloud components install"),
     "kubeconfig user 'u': exec plugin 'gke-gcloud-auth-plugin-missing' not found; Install "
     "gke-gcloud-auth-plugin: gcloud components install", 1),
    (_exec("false"), "kubeconfig user 'u': exec plugin 'false' failed with exit code 1 (its "
                     "message is above); log in again or fix the plugin", 1),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}},
     "kubeconfig user 'u': exec plugin 'true': interactiveMode must be set for "
     "client.authentication.k8s.io/v1 (Never, IfAvailable or Always)", 2),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "true"}},
     "kubeconfig user 'u': exec plugin 'true': apiVersion "
     "'client.authentication.k8s.io/v1alpha1' is not supported; use "
     "client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1", 2),
    (_exec("true"), "kubeconfig user 'u': exec plugin 'true' printed no ExecCredential JSON",
     1),
])
def test_a_failing_exec_plugin_is_one_line_from_the_cli(kube_server, tmp_path, user, expected,
                                                        code):
    kc = _write(tmp_path / "kc", kube_server.url, {}, user)
    done = subprocess.run([sys.executable, "-m", "launcher.cli.app", "list", "--kubeconfig", kc],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"})
    assert done.returncode == code, done.stderr  # 2: the kubeconfig is wrong, refused first
    assert done.stderr.strip().splitlines()[-1] == f"error: {expected}"
    assert "Traceback" not in done.stderr


# --- proxies and imports ----------------------------------------------------------------------
def test_proxies_follow_the_cluster_then_the_environment_as_go_does(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "corp-proxy:3128")  # no scheme: http, as Go reads it
    monkeypatch.setenv("NO_PROXY", ".internal, 10.0.0.0/8,registry.corp:5000,*.corp.example")
    assert proxy_for("https://api.example.com:6443", {}) == "http://corp-proxy:3128"
    assert proxy_for("https://k8s.internal:6443", {}) is None
    assert proxy_for("https://internal:6443", {}) == "http://corp-proxy:3128"  # subdomains only
    assert proxy_for("https://10.1.2.3:6443", {}) is None
    assert proxy_for("https://11.1.2.3:6443", {}) == "http://corp-proxy:3128"
    assert proxy_for("https://registry.corp:5000", {}) is None
    assert proxy_for("https://registry.corp:6443", {}) == "http://corp-proxy:3128"  # the port
    assert proxy_for("https://api.corp.example", {}) is None
    assert proxy_for("https://corp.example", {}) == "http://corp-proxy:3128"
    assert proxy_for("https://127.0.0.1:6443", {}) is None
    assert proxy_for("https://localhost:6443", {}) is None
    assert proxy_for("https://[::1]:6443", {}) is None
    assert proxy_for("https://k8s.internal", {"proxy-url": "socks5://jump:1080"}) == \
        "socks5://jump:1080"
    monkeypatch.delenv("HTTPS_PROXY")
    assert proxy_for("https://api.example.com:6443", {}) is None


def test_list_talks_to_the_api_without_the_official_client_or_the_spec_models(kube_server,
                                                                             kubeconfig):
    # `kubernetes` (with google-auth and oauthlib) costs ~0.2 s to import, the spec's
    # pydantic models ~0.05 s to build, and pydantic itself (which typer's option
    # conversion would import) ~0.06 s: `hvdk8s list` needs none of them.
    code = ("import sys\n"
            "from launcher.cli.app import main\n"
            "try:\n"
            "    main(['list', '-A', '--backend', 'kubernetes'])\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, exc.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('kubernetes', 'google', 'oauthlib', 'pydantic') or m.startswith('mpijob.jobspec.spec') "
            "or m == 'mpijob.jobspec.volumes'), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "KUBECONFIG": kubeconfig})
    assert done.returncode == 0, done.stderr
    assert "No jobs found." in done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
