"""kubectl and hvdk8s given the same kubeconfig reach the same API server as the same user,
or both refuse it: a table of kubeconfigs (tokens, token files, client certificates, exec
plugins v1 and v1beta1, impersonation, proxies) against the test API server over TLS, with
the kubectl installed here (skipped where there is none). Who each request ran as is what
the test server's authorizer was asked about."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.client import NODE, RetryPolicy, connect
from launcher.errors import UsageError
from tests.connect_proxy import ConnectProxy
from tests.launcher.backends.kubernetes.test_k8s_auth import _plugin
from tests.paths import ROOT
from tests.slow_set import run_script
from tests.tls_certs import Pki, make_pki

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
IN_CLUSTER_NAME = "kubernetes.default.svc"  # what other.crt is valid for


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("alice",))


@dataclass
class Case:
    """A kubeconfig's cluster and user entries, the environment both clients run in, and
    the user (and groups) the server must see; `refused` when both must refuse it."""

    cluster: dict
    user: dict
    env: dict = field(default_factory=dict)
    user_seen: tuple[str, tuple[str, ...]] | None = None
    server_cert: str = "server"
    server_url: str | None = None  # {port} filled in
    proxy: dict | None = None  # ConnectProxy's arguments


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _cases(pki: Pki, folder: Path) -> dict[str, Case]:
    ca = {"certificate-authority": str(pki.ca)}
    (folder / "token").write_text("file-token\n")
    plugin = _plugin(folder / "plugin")
    exec_v1 = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
               "interactiveMode": "Never"}
    exec_v1beta1 = {"apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": str(plugin),
                    "env": [{"name": "CERT", "value": str(pki.folder / "alice.crt")},
                            {"name": "KEY", "value": str(pki.folder / "alice.key")}]}
    authenticated = ("system:authenticated",)
    return {
        "token": Case(ca, {"token": "static-token"}, user_seen=("static", authenticated)),
        "tokenFile": Case({"certificate-authority-data": _b64(pki.ca)},
                          {"tokenFile": str(folder / "token")},
                          user_seen=("from-file", authenticated)),
        "client certificate files": Case(ca, {
            "client-certificate": str(pki.folder / "alice.crt"),
            "client-key": str(pki.folder / "alice.key")}, user_seen=("alice", authenticated)),
        "client certificate data": Case(ca, {
            "client-certificate-data": _b64(pki.folder / "alice.crt"),
            "client-key-data": _b64(pki.folder / "alice.key")},
            user_seen=("alice", authenticated)),
        "exec v1 token": Case(ca, {"exec": exec_v1}, user_seen=("exec-user", authenticated)),
        "exec v1beta1 client certificate": Case(ca, {"exec": exec_v1beta1},
                                                user_seen=("alice", authenticated)),
        "token beats exec": Case(ca, {"token": "static-token", "exec": exec_v1},
                                 user_seen=("static", authenticated)),
        "impersonation": Case(ca, {"token": "static-token", "as": "bob",
                                   "as-groups": ["ml-team", "readers"]},
                              user_seen=("bob", ("ml-team", "readers"))),
        "proxy-url with basic auth": Case(
            {**ca, "proxy-url": "http://me:s3cret@127.0.0.1:{proxy_port}"},
            {"token": "static-token"}, user_seen=("static", authenticated),
            proxy={"user": "me", "password": "s3cret"}),
        "HTTPS_PROXY without a scheme, a name only the proxy resolves": Case(
            ca, {"token": "static-token"}, user_seen=("static", authenticated),
            env={"HTTPS_PROXY": "127.0.0.1:{proxy_port}", "NO_PROXY": "*.example.com,10.0.0.0/8"},
            server_cert="other", server_url=f"https://{IN_CLUSTER_NAME}:{{port}}",
            proxy={"hosts": {IN_CLUSTER_NAME: "127.0.0.1"}}),
        "NO_PROXY *.svc: direct": Case(
            ca, {"token": "static-token"}, user_seen=None,
            env={"HTTPS_PROXY": "127.0.0.1:{proxy_port}", "NO_PROXY": "*.svc"},
            server_cert="other", server_url=f"https://{IN_CLUSTER_NAME}:{{port}}",
            proxy={"hosts": {IN_CLUSTER_NAME: "127.0.0.1"}}),
        "token and basic auth: refused": Case(ca, {"token": "static-token", "username": "u",
                                                   "password": "p"}),
        "insecure-skip-tls-verify with a CA: refused": Case(
            {**ca, "insecure-skip-tls-verify": True}, {"token": "static-token"}),
    }


def _kubeconfig(path: Path, server: str, cluster: dict, user: dict) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": server, **cluster}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _fill(value, **names):
    if isinstance(value, str):
        return value.format(**names) if "{" in value else value
    if isinstance(value, dict):
        return {k: _fill(v, **names) for k, v in value.items()}
    return value


CASES = ["token", "tokenFile", "client certificate files", "client certificate data",
         "exec v1 token", "exec v1beta1 client certificate", "token beats exec",
         "impersonation", "proxy-url with basic auth",
         "HTTPS_PROXY without a scheme, a name only the proxy resolves",
         "NO_PROXY *.svc: direct", "token and basic auth: refused",
         "insecure-skip-tls-verify with a CA: refused"]


@pytest.mark.parametrize("name", CASES)
def test_kubectl_and_hvdk8s_reach_the_server_as_the_same_user(name, pki, tmp_path,
                                                               monkeypatch):
    case = _cases(pki, tmp_path)[name]
    with KubeAPIServer(controllers=False, tls=pki.server_context(case.server_cert)) as srv, \
            ConnectProxy(**(case.proxy or {})) as proxy:
        srv.add_node("gpu-node-0", gpus=8)
        srv.add_token("static-token", "static")
        srv.add_token("file-token", "from-file")
        for n in range(1, 10):
            srv.add_token(f"exec-token-{n}", "exec-user")
        names = {"port": srv.port, "proxy_port": proxy.port}
        server = _fill(case.server_url or srv.url, **names)
        kc = _kubeconfig(tmp_path / "kubeconfig", server, _fill(case.cluster, **names),
                         case.user)
        env = _fill(case.env, **names)
        seen: list = []
        srv.policy.hook = lambda a: a.verb == "list" and seen.append((a.user, a.groups))

        done = subprocess.run(
            [KUBECTL, "--kubeconfig", kc, "get", "nodes", "-o", "name",
             "--request-timeout", "20s"],
            capture_output=True, text=True, timeout=60,
            env={**{k: v for k, v in os.environ.items()
                    if k.upper() not in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")},
                 "HOME": str(tmp_path), **env})
        by_kubectl = list(seen)
        seen.clear()

        for k in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy",
                  "no_proxy"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        refused = None  # hvdk8s's refusal of the kubeconfig (exit 2), before any request
        try:
            nodes = connect(kubeconfig=kc, retry=RetryPolicy(tries=1)).items(NODE)
            hvdk8s_error = None
        except UsageError as exc:
            nodes, hvdk8s_error, refused = [], str(exc), exc
        except Exception as exc:  # the server not reached, or an ApiError
            nodes, hvdk8s_error = [], f"{type(exc).__name__}: {exc}"
        by_hvdk8s = list(seen)

        if case.env.get("NO_PROXY") == "*.svc":
            # direct: the name does not resolve here, for kubectl and hvdk8s alike
            assert done.returncode != 0 and hvdk8s_error is not None
            assert proxy.seen == [] and by_kubectl == by_hvdk8s == []
            return
        if case.user_seen is None:  # both refuse it
            assert done.returncode != 0, done.stdout
            assert refused is not None, hvdk8s_error
            assert by_kubectl == by_hvdk8s == []
            return
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["node/gpu-node-0"]
        assert [n["metadata"]["name"] for n in nodes] == ["gpu-node-0"], hvdk8s_error
        assert set(by_kubectl) == set(by_hvdk8s) == {case.user_seen}
        if case.proxy:
            assert {s.target for s in proxy.seen} == {server.split("//")[1]}
            assert proxy.refused == 0


# --- in a pod: the service account at its fixed path, in a mount namespace of this test ------
IN_POD = """
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
cp "$SA"/* /run/secrets/kubernetes.io/serviceaccount/
# (no --request-timeout: any override makes kubectl skip its in-cluster configuration)
timeout 60 "$KUBECTL" get pods -o name > "$OUT/kubectl.txt"
"$PYTHON" -c '
from launcher.backends.kubernetes.client import POD, connect
client = connect()
print(client.namespace, [p["metadata"]["name"] for p in client.items(POD)])
' > "$OUT/hvdk8s.txt"
"""


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs root and unshare(1) for a private mount "
                    "namespace holding /var/run/secrets/kubernetes.io/serviceaccount")
@pytest.mark.parametrize("pod_namespace", [None, "from-downward-api"])
def test_in_a_pod_kubectl_and_hvdk8s_use_the_service_account_alike(pki, tmp_path,
                                                                   pod_namespace):
    import sys

    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_bytes(pki.ca.read_bytes())
    (sa / "namespace").write_text("team-b\n")
    with KubeAPIServer(controllers=False, tls=pki.server_context()) as srv:
        srv.add_token("sa-token", "system:serviceaccount:team-b:trainer")
        for ns in ("team-b", "from-downward-api"):
            srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            srv.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"pod-in-{ns}", "namespace": ns},
                        "spec": {"containers": [{"name": "c", "image": "x"}]}})
        seen: list = []
        srv.policy.hook = lambda a: a.verb == "list" and seen.append((a.user, a.namespace))
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
        env.update(HOME=str(tmp_path), KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=str(srv.port), SA=str(sa), OUT=str(tmp_path),
                   KUBECTL=str(KUBECTL), PYTHON=sys.executable,
                   PYTHONPATH=str(ROOT))
        if pod_namespace:
            env["POD_NAMESPACE"] = pod_namespace
        done = run_script(["unshare", "-m", "sh", "-c", IN_POD], env=env,
                            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    ns = pod_namespace or "team-b"
    assert (tmp_path / "kubectl.txt").read_text().split() == [f"pod/pod-in-{ns}"]
    assert (tmp_path / "hvdk8s.txt").read_text().strip() == f"{ns} ['pod-in-{ns}']"
    assert seen == [("system:serviceaccount:team-b:trainer", ns)] * 2
