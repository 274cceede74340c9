"""The API connection: kubeconfig/in-cluster configuration, retries, refusals, discovery."""

from __future__ import annotations

import pytest
import yaml

from launcher.backends.kubernetes import client as k8s_client
from launcher.backends.kubernetes import kubeconfig as kubeconfig_module
from launcher.backends.kubernetes.client import (
    JOB,
    MPIJOB,
    POD,
    ApiError,
    RetryPolicy,
    connect,
)
from launcher.backends.kubernetes.kubeconfig import kubeconfig_usable
from launcher.errors import UserError


def _no_in_cluster(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def _retry(sleeps: list) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps.append, rand=lambda: 1.0)


# --- configuration ------------------------------------------------------------------------------
def test_context_and_namespace_come_from_the_kubeconfig_list(kube_server, kubeconfig, tmp_path,
                                                             monkeypatch):
    other = kube_server.write_kubeconfig(tmp_path / "other", context="team", namespace="team-a")
    monkeypatch.setenv("KUBECONFIG", f"{kubeconfig}:{other}")
    default = connect()
    assert (default.context, default.namespace) == ("test", "default")
    team = connect(context="team")
    assert (team.context, team.namespace, team.host) == ("team", "team-a", kube_server.url)
    assert connect(context="team", namespace="ns-x").namespace == "ns-x"
    # It really talks to the server with the context's credentials.
    assert {n["metadata"]["name"] for n in team.items(k8s_client.NODE)} == {"gpu-node-0",
                                                                           "gpu-node-1"}


def test_unknown_context_names_the_files(kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    with pytest.raises(UserError, match="context 'nope' not found in .*kubeconfig"):
        connect(context="nope")


def test_no_kubeconfig_at_all_says_where_it_looked_and_what_to_pass(tmp_path, monkeypatch):
    _no_in_cluster(monkeypatch)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube
    nothing = "no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config) and not running in a pod"
    with pytest.raises(UserError) as err:
        connect()
    assert str(err.value) == f"{nothing}; pass --kubeconfig FILE or set $KUBECONFIG"
    # A named context: the file that has it is what is missing (not "pass --context").
    with pytest.raises(UserError) as err:
        connect(context="prod")
    assert str(err.value) == (f"--context prod: {nothing}; pass --kubeconfig FILE (the "
                              "kubeconfig that has this context) or set $KUBECONFIG")
    # A file that was named is named back.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    with pytest.raises(UserError) as err:
        connect()
    assert str(err.value) == (f"$KUBECONFIG={tmp_path / 'gone'}: no such file; point "
                              "--kubeconfig/$KUBECONFIG at a kubeconfig")


def test_a_kubeconfig_without_a_current_context_is_named(tmp_path, monkeypatch):
    _no_in_cluster(monkeypatch)
    empty = tmp_path / "config"
    empty.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": []}))
    monkeypatch.setenv("KUBECONFIG", str(empty))
    with pytest.raises(UserError, match=rf"^no Kubernetes context: \$KUBECONFIG={empty} sets "
                                        "no current-context; pass --context NAME"):
        connect()
    empty.write_text("- not\n- a kubeconfig\n")
    with pytest.raises(UserError, match=rf"^\$KUBECONFIG={empty}: not a usable kubeconfig "
                                        rf"\({empty} cannot be read or is not a kubeconfig\)"):
        connect()


def test_kubeconfig_usable_is_a_cheap_file_check(kubeconfig, tmp_path, monkeypatch):
    _no_in_cluster(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert kubeconfig_usable()
    assert kubeconfig_usable("test")
    assert not kubeconfig_usable("missing")
    empty = tmp_path / "empty"
    empty.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": []}))
    monkeypatch.setenv("KUBECONFIG", str(empty))
    assert not kubeconfig_usable()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "does-not-exist"))
    assert not kubeconfig_usable()


def test_in_cluster_config_when_run_in_a_pod(tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("pod-token")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    (sa / "namespace").write_text("team-b\n")
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", str(sa))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    assert kubeconfig_usable()
    client = connect()
    assert (client.context, client.namespace, client.host) == ("in-cluster", "team-b",
                                                               "https://10.96.0.1:443")
    # An explicit context means a kubeconfig, even inside a pod.
    with pytest.raises(UserError, match="context 'x' not found: no kubeconfig found .*leave "
                                        "out --context"):
        connect(context="x")


# --- retries ----------------------------------------------------------------------------------
def test_transient_503_is_retried_with_backoff(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    sleeps: list[float] = []
    client = connect(retry=_retry(sleeps))
    kube_server.fail_next(2, 503, path_regex=r"/pods$")
    kube_server.clear_requests()
    assert client.items(POD) == []
    assert kube_server.count_requests("GET", r"/namespaces/default/pods$") == 3
    assert len(sleeps) == 2 and sleeps[0] < sleeps[1], "exponential backoff"


def test_429_honours_retry_after(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    sleeps: list[float] = []
    client = connect(retry=RetryPolicy(sleep=sleeps.append, rand=lambda: 0.0))
    # 1 s: the rate limiter holds every request for it in real time
    kube_server.fail_next(1, 429, retry_after=1)
    client.items(JOB)
    assert sleeps == [1.0]  # the server's delay, not the backoff (0 here)


def test_dropped_connection_is_retried(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    sleeps: list[float] = []
    client = connect(retry=_retry(sleeps))
    kube_server.fail_next(1, drop=True, path_regex=r"/nodes$")
    assert len(client.items(k8s_client.NODE)) == 2
    assert len(sleeps) == 1


def test_retries_are_bounded(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    sleeps: list[float] = []
    client = connect(retry=_retry(sleeps))
    kube_server.fail_next(50, 503)
    kube_server.clear_requests()
    with pytest.raises(ApiError) as err:
        client.items(POD)
    assert err.value.status == 503
    assert kube_server.count_requests() == 5 and len(sleeps) == 4
    assert "cannot list pods in namespace default" in str(err.value.user_error())


def test_unreachable_server_is_one_clear_error(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    sleeps: list[float] = []
    client = connect(retry=_retry(sleeps))
    with pytest.raises(ApiError) as err:
        client.items(POD)
    assert len(sleeps) == 4
    assert str(err.value.user_error()).startswith("cannot reach the Kubernetes API server")


# --- refusals ---------------------------------------------------------------------------------
def test_403_names_verb_resource_and_namespace(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    kube_server.forbid("create", "jobs.batch", "default")
    client = connect()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x", "namespace": "default"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "i"}]}}}}
    with pytest.raises(ApiError) as err:
        client.create(job)
    assert err.value.status == 403
    message = str(err.value.user_error())
    assert message.startswith("forbidden: cannot create jobs.batch in namespace default (RBAC)")
    assert "'create' on 'jobs.batch'" in message


def test_401_says_the_credentials_were_rejected(kube_server, tmp_path, monkeypatch):
    path = kube_server.write_kubeconfig(tmp_path / "bad", token="wrong-token")
    monkeypatch.setenv("KUBECONFIG", path)
    with pytest.raises(ApiError) as err:
        connect().items(POD)
    assert err.value.status == 401
    assert str(err.value.user_error()).startswith("unauthorized:")


# --- discovery --------------------------------------------------------------------------------
def test_discovery_sees_installed_crds(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert not connect().serves(MPIJOB)
    kube_server.install_crd("mpijob")
    kube_server.install_group("volcano")
    client = connect()
    assert client.serves(MPIJOB)
    assert "scheduling.volcano.sh" in client.api_groups()
    kube_server.clear_requests()
    client.serves(MPIJOB)
    client.api_groups()
    assert kube_server.count_requests() == 0, "discovery answers are cached per client"
