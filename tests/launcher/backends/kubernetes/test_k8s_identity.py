"""What a kubectl user's kubeconfig says, honoured as kubectl honours it or refused in one
line naming the field: impersonation (kubeconfig and --as flags, as the test API server's
impersonation filter sees and authorizes them), proxies with credentials, redirects,
credential precedence (client-go's), TLS verification, compression, the pod's namespace,
and an oidc token that expires while a command runs."""

from __future__ import annotations

import base64
import gzip
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kubesim.auth import Attributes
from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes import kubeconfig as kubeconfig_module
from launcher.backends.kubernetes.client import NODE, POD, ApiError, RetryPolicy, connect
from launcher.errors import UsageError
from tests.connect_proxy import ConnectProxy
from tests.launcher.backends.contract_calls import create_job
from tests.launcher.backends.kubernetes.test_k8s_auth import _b64, _plugin, _runs, _write
from tests.paths import ROOT as REPO
from tests.tls_certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("alice",))


@pytest.fixture
def tls_server(pki):
    with KubeAPIServer(controllers=False, tls=pki.server_context()) as srv:
        srv.add_node("gpu-node-0", gpus=8)
        yield srv


def _seen(srv) -> list[Attributes]:
    """Every authorization the test server decides, as its authorizer sees it."""
    seen: list[Attributes] = []
    srv.policy.hook = lambda a: seen.append(a) and False
    return seen


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.cli.app", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300", **(env or {})})


# --- impersonation -----------------------------------------------------------------------------
def test_kubeconfig_impersonation_reaches_the_server_and_its_authorizer(kube_server, tmp_path):
    kube_server.add_token("admin-token", "admin")
    kc = _write(tmp_path / "kc", kube_server.url, {}, {
        "token": "admin-token", "as": "bob", "as-groups": ["ml-team", "readers"],
        "as-uid": "1234", "as-user-extra": {"reason": ["debugging"], "scopes/x": ["a", "b"]}})
    seen = _seen(kube_server)
    kube_server.forbid("list", "pods", group="ml-team")
    client = connect(kubeconfig=kc)
    assert len(client.items(NODE)) == 2
    with pytest.raises(ApiError) as err:  # the impersonated groups are what is authorized
        client.items(POD)
    assert err.value.status == 403 and 'User "bob" cannot list resource "pods"' in err.value.message
    checks = {(a.resource, a.subresource, a.name) for a in seen if a.verb == "impersonate"}
    assert checks == {("users", "", "bob"), ("groups", "", "ml-team"), ("groups", "", "readers"),
                      ("uids", "", "1234"), ("userextras", "reason", "debugging"),
                      ("userextras", "scopes/x", "a"), ("userextras", "scopes/x", "b")}
    assert all(a.user == "admin" for a in seen if a.verb == "impersonate")
    listed = [a for a in seen if a.verb == "list"]
    assert {(a.user, a.groups, a.acting_for) for a in listed} == {
        ("bob", ("ml-team", "readers"), "admin")}
    headers = kube_server.request_log[-1].headers
    assert headers.get_all("Impersonate-Group") == ["ml-team", "readers"]
    assert headers["Impersonate-Extra-scopes%2Fx"] == "a" or \
        headers.get_all("Impersonate-Extra-scopes%2Fx") == ["a", "b"]


def test_impersonation_the_caller_may_not_do_is_a_403_naming_it(kube_server, tmp_path):
    kube_server.add_token("dev-token", "dev")
    kube_server.forbid("impersonate", "users", user="dev")
    kc = _write(tmp_path / "kc", kube_server.url, {}, {"token": "dev-token", "as": "root"})
    with pytest.raises(ApiError) as err:
        connect(kubeconfig=kc).items(NODE)
    assert err.value.status == 403
    assert err.value.message == ('users "root" is forbidden: User "dev" cannot impersonate '
                                 'resource "users" in API group "" at the cluster scope')


def test_as_flags_replace_the_kubeconfigs_and_work_before_or_after_the_command(kube_server,
                                                                             tmp_path):
    kube_server.add_token("admin-token", "admin")
    kc = _write(tmp_path / "kc", kube_server.url, {}, {"token": "admin-token", "as": "bob"})
    seen = _seen(kube_server)
    for args in (["--as", "carol", "--as-group", "g1", "--as-group", "g2", "list", "-A"],
                 ["list", "-A", "--as", "carol", "--as-group", "g1", "--as-group", "g2"]):
        seen.clear()
        done = _cli(*args, "--kubeconfig", kc, "--backend", "kubernetes")
        assert done.returncode == 0, done.stderr
        assert {(a.user, a.groups) for a in seen if a.verb == "list"} == {("carol", ("g1", "g2"))}
    done = _cli("list", "-A", "--kubeconfig", kc, "--backend", "kubernetes")
    assert done.returncode == 0, done.stderr


def test_groups_without_a_user_to_act_as_are_refused_before_any_request(kube_server, tmp_path):
    kc = _write(tmp_path / "kc", kube_server.url, {}, {"token": "t", "as-groups": ["g"]})
    with pytest.raises(UsageError, match=r"as-groups/as-uid/as-user-extra without a user"):
        connect(kubeconfig=kc)
    done = _cli("list", "-A", "--as-group", "g", "--kubeconfig",
                _write(tmp_path / "kc2", kube_server.url, {}, {"token": "t"}),
                "--backend", "kubernetes")
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: --as-group/--as-uid without a user to act as: set "
                                   "--as (or users[].user.as)")


# --- proxies and redirects ---------------------------------------------------------------------
def test_a_connect_proxy_with_basic_auth_tunnels_tls_to_the_api(tls_server, pki, tmp_path):
    with ConnectProxy(user="me@corp", password="s3cret:!") as proxy:
        url = proxy.url(user="me%40corp", password="s3cret%3A%21")
        kc = _write(tmp_path / "kc", tls_server.url,
                    {"certificate-authority": str(pki.ca), "proxy-url": url},
                    {"token": tls_server.token})
        assert {n["metadata"]["name"] for n in connect(kubeconfig=kc).items(NODE)} == {
            "gpu-node-0"}
        assert proxy.refused == 0
        assert proxy.seen[0].target == f"127.0.0.1:{tls_server.port}"
        # without the credentials the proxy answers 407, and that is what the user reads
        bare = _write(tmp_path / "bare", tls_server.url,
                      {"certificate-authority": str(pki.ca), "proxy-url": proxy.url()},
                      {"token": tls_server.token})
        with pytest.raises(ApiError) as err:
            connect(kubeconfig=bare, retry=RetryPolicy(tries=1)).items(NODE)
        assert "407" in str(err.value.user_error()) and proxy.refused == 1


def test_https_proxy_without_a_scheme_reaches_a_name_only_the_proxy_resolves(
        tls_server, pki, tmp_path, monkeypatch):
    # `other.crt` is valid for kubernetes.default.svc: the name goes through the CONNECT
    with KubeAPIServer(controllers=False, tls=pki.server_context("other")) as srv, \
            ConnectProxy(hosts={"kubernetes.default.svc": "127.0.0.1"}) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "example.com")
        kc = _write(tmp_path / "kc", f"https://kubernetes.default.svc:{srv.port}",
                    {"certificate-authority": str(pki.ca)}, {"token": srv.token})
        assert connect(kubeconfig=kc).items(NODE) == []
        assert proxy.seen[0].target == f"kubernetes.default.svc:{srv.port}"


class _Handler(BaseHTTPRequestHandler):
    """A loopback server's handler that answers in one call and logs nothing to stderr."""

    def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None):
        self.send_response(status)
        for key, value in {**(headers or {}), "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Recorder(_Handler):
    """Answers a redirect (the first server) or an empty list, recording the headers."""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.server.seen.append(dict(self.headers))
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.redirect_to:
            self.reply(307, headers={"Location": self.server.redirect_to + self.path})
            return
        body = json.dumps({"kind": "NodeList", "metadata": {}, "items": []}).encode()
        headers = {"Content-Type": "application/json"}
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        self.reply(200, body, headers)

    do_POST = do_GET


def _recorder(redirect_to: str | None = None) -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    srv.seen, srv.redirect_to = [], redirect_to  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_a_redirect_to_another_host_drops_the_authorization_and_impersonation(tmp_path):
    other = _recorder()
    first = _recorder(redirect_to=f"http://localhost:{other.server_address[1]}")
    try:
        kc = _write(tmp_path / "kc", f"http://127.0.0.1:{first.server_address[1]}", {},
                    {"token": "secret-token", "as": "bob", "as-groups": ["admins"],
                     "as-user-extra": {"scopes": ["all"]}})
        assert connect(kubeconfig=kc).items(NODE) == []
        assert first.seen[0]["Authorization"] == "Bearer secret-token"
        assert first.seen[0]["Impersonate-User"] == "bob"
        assert not [h for h in other.seen[0] if h.lower().startswith(("authorization",
                                                                      "impersonate-"))]
    finally:
        first.shutdown()
        other.shutdown()


def test_a_request_with_a_body_follows_no_redirect(tmp_path):
    other = _recorder()
    first = _recorder(redirect_to=f"http://localhost:{other.server_address[1]}")
    try:
        kc = _write(tmp_path / "kc", f"http://127.0.0.1:{first.server_address[1]}", {},
                    {"token": "secret-token"})
        secret = {"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": "demo-ssh", "namespace": "default"},
                  "stringData": {"id_rsa": "PRIVATE"}}
        with pytest.raises(ApiError) as err:
            connect(kubeconfig=kc).create(secret)
        assert err.value.status == 307 and "does not follow" in err.value.message
        assert len(first.seen) == 1 and other.seen == []
    finally:
        first.shutdown()
        other.shutdown()


def test_answers_are_asked_gzip_compressed_unless_the_cluster_disables_it(tmp_path):
    srv = _recorder()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        assert connect(kubeconfig=_write(tmp_path / "kc", url, {}, {})).items(NODE) == []
        assert srv.seen[-1].get("Accept-Encoding") == "gzip"
        kc = _write(tmp_path / "kc2", url, {"disable-compression": True}, {})
        assert connect(kubeconfig=kc).items(NODE) == []
        assert "Accept-Encoding" not in srv.seen[-1] or srv.seen[-1]["Accept-Encoding"] == \
            "identity"
    finally:
        srv.shutdown()


# --- precedence and validation (client-go's) ---------------------------------------------------
def test_a_static_token_or_client_certificate_beats_an_exec_plugin(tls_server, pki, tmp_path):
    plugin = _plugin(tmp_path)
    exec_spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                 "interactiveMode": "Never"}
    base = {"certificate-authority": str(pki.ca)}
    kc = _write(tmp_path / "token", tls_server.url, base,
                {"token": tls_server.token, "exec": exec_spec})
    assert len(connect(kubeconfig=kc).items(NODE)) == 1
    seen = _seen(tls_server)
    kc = _write(tmp_path / "cert", tls_server.url, base, {
        "client-certificate": str(pki.folder / "alice.crt"),
        "client-key": str(pki.folder / "alice.key"), "exec": exec_spec})
    assert len(connect(kubeconfig=kc).items(NODE)) == 1
    assert {a.user for a in seen} == {"alice"}
    assert _runs(plugin) == [], "the exec plugin never runs"


def test_an_unreadable_token_file_falls_back_to_the_token(kube_server, tmp_path):
    kc = _write(tmp_path / "kc", kube_server.url, {},
                {"token": kube_server.token, "tokenFile": str(tmp_path / "missing")})
    assert len(connect(kubeconfig=kc).items(NODE)) == 2


@pytest.mark.parametrize("cluster, user, expected", [
    ({"insecure-skip-tls-verify": True, "certificate-authority-data": "eA=="}, {"token": "t"},
     "kubeconfig cluster 'k': insecure-skip-tls-verify: true together with "
     "certificate-authority(-data) is refused (as kubectl does); remove one of them"),
    ({}, {"token": "t", "username": "u", "password": "p"},
     "kubeconfig user 'u': username/password and token(File) may not both be set (kubectl "
     "refuses it); remove one of them"),
    ({}, {"auth-provider": {"name": "gcp"}},
     "kubeconfig user 'u': auth-provider 'gcp' was removed from kubectl and client-go (1.26); "
     "use the exec plugin gke-gcloud-auth-plugin"),
    ({}, {"auth-provider": {"name": "oidc"}, "exec": {"command": "x"}},
     "kubeconfig user 'u': exec and auth-provider may not both be set (kubectl refuses it); "
     "remove one of them"),
    ({"proxy-url": "ftp://proxy:21"}, {},
     "kubeconfig cluster 'k': proxy-url 'ftp://proxy:21' is not an http, https or socks5 URL"),
])
def test_what_client_go_refuses_is_refused_in_one_line_exit_2(tmp_path, cluster, user,
                                                              expected):
    kc = _write(tmp_path / "kc", "https://127.0.0.1:1", cluster, user)
    done = _cli("list", "-A", "--kubeconfig", kc, "--backend", "kubernetes")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {expected}"


def test_base64_data_with_line_breaks_is_read_as_go_reads_it(tls_server, pki, tmp_path):
    wrapped = "\n".join(_b64(pki.ca)[i:i + 76] for i in range(0, len(_b64(pki.ca)), 76))
    kc = _write(tmp_path / "kc", tls_server.url, {"certificate-authority-data": wrapped + "\n"},
                {"token": tls_server.token})
    assert len(connect(kubeconfig=kc).items(NODE)) == 1


# --- TLS ----------------------------------------------------------------------------------------
def test_a_hostname_mismatch_fails_for_that_reason(pki, tmp_path):
    with KubeAPIServer(controllers=False, tls=pki.server_context("other")) as srv:
        kc = _write(tmp_path / "kc", srv.url, {"certificate-authority": str(pki.ca),
                                               "insecure-skip-tls-verify": False},
                    {"token": srv.token})
        with pytest.raises(ApiError) as err:
            connect(kubeconfig=kc, retry=RetryPolicy(tries=1)).items(NODE)
        message = str(err.value.user_error())
        assert "IP address mismatch, certificate is not valid for '127.0.0.1'" in message
        assert "\n" not in message


def test_insecure_skip_tls_verify_false_still_verifies(tls_server, tmp_path):
    kc = _write(tmp_path / "kc", tls_server.url, {"insecure-skip-tls-verify": False},
                {"token": tls_server.token})
    with pytest.raises(ApiError) as err:  # no CA given: the system's, which lacks the test CA
        connect(kubeconfig=kc, retry=RetryPolicy(tries=1)).items(NODE)
    assert "certificate verify failed: self-signed certificate in certificate chain" in str(
        err.value.user_error())


def test_a_given_ca_is_the_only_trust_store_loaded(tls_server, pki, tmp_path, monkeypatch):
    def no_system_store(self, *args, **kwargs):
        raise AssertionError("the system trust store was loaded beside the kubeconfig's CA")

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", no_system_store)
    kc = _write(tmp_path / "kc", tls_server.url, {"certificate-authority": str(pki.ca)},
                {"token": tls_server.token})
    assert len(connect(kubeconfig=kc).items(NODE)) == 1


# --- in-cluster ---------------------------------------------------------------------------------
def test_pod_namespace_comes_before_the_service_accounts(tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    (sa / "namespace").write_text("team-b\n")
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", str(sa))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("POD_NAMESPACE", "from-downward-api")
    assert kubeconfig_module.resolve().namespace == "from-downward-api"
    monkeypatch.delenv("POD_NAMESPACE")
    assert kubeconfig_module.resolve().namespace == "team-b"


# --- an oidc token that expires while the command runs -----------------------------------------
def _jwt(sub: str, exp: float) -> str:
    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': int(exp)})}.sig"


class _Issuer(_Handler):
    """An OpenID provider's discovery document and token endpoint (refresh_token grant)."""

    def do_GET(self):  # noqa: N802
        doc = {"issuer": self.server.url, "token_endpoint": f"{self.server.url}/token"}
        self._json(doc)

    def do_POST(self):  # noqa: N802
        form = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.server.refreshes.append(form)
        token = self.server.next_token()
        self._json({"access_token": "at", "token_type": "Bearer", "id_token": token,
                    "refresh_token": f"refresh-{len(self.server.refreshes) + 1}",
                    "expires_in": 3600})

    def _json(self, doc: dict) -> None:
        self.reply(200, json.dumps(doc).encode(), {"Content-Type": "application/json"})


@pytest.fixture
def issuer(pki):
    """An OpenID provider on loopback over TLS, handing out `fresh` at each refresh."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Issuer)
    srv.socket = pki.server_context(client_ca=False).wrap_socket(srv.socket, server_side=True)
    srv.url = f"https://127.0.0.1:{srv.server_address[1]}"  # type: ignore[attr-defined]
    srv.refreshes = []  # type: ignore[attr-defined]
    srv.fresh = _jwt("carol", time.time() + 3600)  # type: ignore[attr-defined]
    srv.next_token = lambda: srv.fresh  # type: ignore[attr-defined]
    # shutdown() below waits for the loop's next wake-up (0.5 s by default)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01},
                     daemon=True).start()
    yield srv
    srv.shutdown()


def _oidc_user(issuer, pki, id_token: str) -> dict:
    return {"auth-provider": {"name": "oidc", "config": {
        "client-id": "k8s", "client-secret": "s", "id-token": id_token,
        "refresh-token": "refresh-1", "idp-issuer-url": issuer.url,
        "idp-certificate-authority": str(pki.ca)}}}


# Real time, as the one below: the token's expiry is read by the client's own clock.
@pytest.mark.slow
def test_an_oidc_token_that_expires_mid_command_is_refreshed_at_the_issuer(kube_server, pki,
                                                                          issuer, tmp_path):
    # valid for 2 more seconds: the official loader refreshes 5 minutes before `exp`
    first = _jwt("carol", time.time() + 300 + 2)
    kube_server.add_token(first, "carol")
    kc = _write(tmp_path / "kc", kube_server.url, {}, _oidc_user(issuer, pki, first))
    client = connect(kubeconfig=kc)
    assert len(client.items(NODE)) == 2
    assert issuer.refreshes == []
    time.sleep(2.5)
    kube_server.tokens.revoke(first)  # expired: the API server refuses it now
    kube_server.add_token(issuer.fresh, "carol")
    # a watch, as `wait` keeps open: its 401 reads the provider again, which refreshes
    assert [e for e, _ in client.watch(NODE, timeout_seconds=1)
            if e != "BOOKMARK"] == ["ADDED", "ADDED"]
    assert len(client.items(NODE)) == 2
    assert len(issuer.refreshes) == 1 and "refresh_token=refresh-1" in issuer.refreshes[0]
    # written back to the kubeconfig, as kubectl does: the refresh token was used up
    assert issuer.fresh in Path(kc).read_text() and "refresh-2" in Path(kc).read_text()


@pytest.mark.slow
def test_wait_goes_on_past_an_oidc_tokens_expiry(k8s, pki, issuer, tmp_path):
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from mpijob.jobspec.spec import build_spec

    srv = k8s.server()
    first = _jwt("carol", time.time() + 300 + 3)  # expires 3 s into the wait
    srv.add_token(first, "carol")
    kc = _write(tmp_path / "kc", srv.url, {}, _oidc_user(issuer, pki, first))
    k8s.script_launcher("vgg16", logs=[(8.0, "done")], exit_code=0)
    spec = build_spec(name="vgg16", namespace="default", image=k8s.image, workers=1,
                      command=("python", "train.py"))
    create_job(k8s.backend(), spec, None, schedule_timeout=20)

    def expire() -> None:
        srv.tokens.revoke(first)
        srv.add_token(issuer.fresh, "carol")

    threading.Timer(4.0, expire).start()
    carol = KubernetesBackend("c", "default", kubeconfig=kc)
    carol.watch_timeout = 1  # its watches end every second: each one asks again
    status = carol.wait("vgg16", timeout=60)
    assert status.phase == "Succeeded"
    assert len(issuer.refreshes) == 1


def test_a_401_reads_an_oidc_token_again(kube_server, tmp_path):
    # Another process (kubectl, kubelogin) refreshed the kubeconfig's token meanwhile.
    old, new = _jwt("dana", time.time() + 7200), _jwt("dana", time.time() + 9000)
    kube_server.add_token(old, "dana")

    def user(token: str) -> dict:
        return {"auth-provider": {"name": "oidc", "config": {
            "client-id": "k8s", "id-token": token, "idp-issuer-url": "https://idp.invalid"}}}

    kc = _write(tmp_path / "kc", kube_server.url, {}, user(old))
    client = connect(kubeconfig=kc)
    assert len(client.items(NODE)) == 2
    _write(tmp_path / "kc", kube_server.url, {}, user(new))
    kube_server.tokens.revoke(old)
    kube_server.add_token(new, "dana")
    assert len(client.items(NODE)) == 2
