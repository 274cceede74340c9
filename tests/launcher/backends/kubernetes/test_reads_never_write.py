"""Reading a job never writes: `get`, `get --watch`, `list`, `wait`, `logs`, `logs -f` and
`top` send only GET requests (lists, watches and log reads included) on the test API
server's request log, for any user; a state that calls for a write is named in one line for
`hvdk8s tidy`, which takes it (test_k8s_backend.py, test_start_gate.py, and the start
guard's sweep: tests/launcher/agent/test_start_guard_rights.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from launcher.backends.kubernetes import start_guard
from mpijob.jobspec import names
from tests.k8s_env import hvdk8s

READS = (("get", "vgg16"), ("get", "vgg16", "-o", "json"), ("get", "vgg16", "--watch"),
         ("list",), ("list", "-o", "wide"), ("wait", "vgg16"), ("logs", "vgg16"),
         ("logs", "-f", "vgg16"), ("top", "job"))
LEFT = ("note: job vgg16 has finished, and vgg16-worker-0 outlived its launcher "
        "(cleanPodPolicy Running): `hvdk8s tidy vgg16 -n default` removes them (so does the "
        "start guard, where installed: hvdk8s install agent)")


@pytest.fixture
def finished(k8s, monkeypatch):
    """A job whose launcher succeeded and whose worker (never released by this fake) is
    still running, read past the time its lease would have ended it."""
    srv = k8s.server()
    k8s.script_launcher("vgg16", ["total images/sec: 50.0"])
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "vgg16", "--workers", "1", "--gpus",
                       "1", "--image", k8s.image, "python", "train.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: any(p["status"].get("phase") == "Succeeded"
                             for p in srv.objects("pods", "default")
                             if "launcher" in p["metadata"]["name"]))
    later = start_guard.utc_now() + timedelta(minutes=5)
    monkeypatch.setattr(start_guard, "utc_now", lambda: later)
    return srv


def _read_all(k8s) -> dict[tuple[str, ...], tuple[int, str]]:
    """Each read's exit status and output, its ages left out (the clock moves)."""
    return {args: ((r := hvdk8s(k8s, *args)).exit_code, re.sub(r"\bage \S+", "age", r.output))
            for args in READS}


def test_every_read_command_sends_only_gets_and_names_tidy(k8s, finished):
    srv = finished
    srv.clear_requests()
    said = _read_all(k8s)
    assert {args: code for args, (code, _) in said.items()} == dict.fromkeys(READS, 0), said
    assert sorted({r.method for r in srv.request_log}) == ["GET"]
    for args in (("get", "vgg16"), ("get", "vgg16", "-o", "json"), ("wait", "vgg16"),
                 ("get", "vgg16", "--watch"), ("logs", "-f", "vgg16")):
        assert said[args][1].count(LEFT) == 1, (args, said[args][1])
    assert any(names.worker("vgg16", 0) == p["metadata"]["name"]
               for p in srv.objects("pods", "default"))  # nothing removed it
    done = hvdk8s(k8s, "tidy", "vgg16")
    assert done.stdout.splitlines() == [
        "job vgg16: recorded its 50 images/sec on Job vgg16-launcher",
        "job vgg16: removed vgg16-worker-0 (cleanPodPolicy Running)"]
    assert LEFT not in hvdk8s(k8s, "get", "vgg16").output


def test_a_read_only_user_reads_the_same_with_no_403(k8s, finished, tmp_path, monkeypatch):
    """A ServiceAccount whose RBAC role allows only get, list and watch, everywhere (`top`
    lists nodes; the test API server's RBAC authorizer, kubesim/rbac.py), reads what the
    admin reads."""
    from kubesim.rbac import RBACAuthorizer

    srv = finished
    admin = _read_all(k8s)
    srv.policy.rbac = RBACAuthorizer(srv.store)  # from here, RBAC for all but the admin
    srv.create({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "viewer", "namespace": "default"}})
    srv.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "read-all"},
                "rules": [{"apiGroups": ["*"], "resources": ["*"],
                           "verbs": ["get", "list", "watch"]}]})
    srv.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "viewer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "read-all"},
                "subjects": [{"kind": "ServiceAccount", "name": "viewer",
                              "namespace": "default"}]})
    viewer = srv.write_kubeconfig(tmp_path / "viewer.kubeconfig", user="viewer",
                                  token=srv.service_account_token("default", "viewer"))
    monkeypatch.setenv("KUBECONFIG", viewer)
    srv.clear_requests()
    read_only = _read_all(k8s)
    assert sorted({r.method for r in srv.request_log}) == ["GET"]
    for args in READS:
        if args[0] in ("get", "wait", "logs"):  # the very same output
            assert read_only[args] == admin[args], args
        assert read_only[args][0] == 0, (args, read_only[args])
        assert not any(word in read_only[args][1] for word in ("forbidden", "RBAC", "403")), \
            read_only[args][1]
    refused = hvdk8s(k8s, "tidy", "vgg16")  # the write is the explicit step's, and it says so
    assert refused.exit_code == 1 and "forbidden" in refused.output, refused.output


def test_a_job_past_its_start_timeout_is_named_not_failed(k8s, monkeypatch):
    srv = k8s.server()
    srv.unpullable_image("gone:1")
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "unp", "--workers", "1", "--gpus",
                       "1", "--image", "gone:1", "--start-timeout", "30", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: any(p["metadata"]["name"] == "unp-worker-0"
                             for p in srv.objects("pods", "default")))
    later = start_guard.utc_now() + timedelta(seconds=31)
    monkeypatch.setattr(start_guard, "utc_now", lambda: later)
    srv.clear_requests()
    waited = hvdk8s(k8s, "wait", "unp", "--timeout", "30")
    watched = hvdk8s(k8s, "get", "unp", "-w")
    assert sorted({r.method for r in srv.request_log}) == ["GET"]
    assert waited.exit_code == 1, waited.output
    note = ("note: job unp missed its start timeout and has not been failed: `hvdk8s tidy "
            "unp -n default` fails it and frees its GPUs (so does the start guard, where "
            "installed: hvdk8s install agent)")
    assert waited.output.count(note) == 1 and watched.output.count(note) == 1, waited.output
    assert watched.exit_code == 0
    assert not srv.get("jobs", "unp-launcher")["spec"].get("suspend")
    tidied = hvdk8s(k8s, "tidy")  # every job of the namespace
    assert tidied.stdout.startswith("job unp: failed (StartTimeout: not running 30s after it "
                                    "was scheduled: unp-worker-0: "), tidied.output
    assert srv.get("jobs", "unp-launcher")["spec"]["suspend"] is True
    assert "Failed" in hvdk8s(k8s, "get", "unp").output


@pytest.mark.parametrize("mode", ["pods", "operator", "trainjob"])
def test_no_read_writes_in_any_mode_for_a_job_past_its_start_timeout(k8s, monkeypatch, mode):
    """What reads used to fail in every mode: a job whose pods do not pull their image."""
    srv = k8s.server()
    srv.unpullable_image("gone:1")
    if mode == "operator":
        srv.install_mpi_operator()
    if mode == "trainjob":
        from mpijob.jobspec.spec import build_spec
        from mpijob.k8s import render_trainjob as tj

        srv.install_trainer()
        srv.create(tj.horovod_runtime(build_spec(name="t", workers=2, gpus_per_worker=1,
                                                 image="gone:1", command=("python", "t.py"))))
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "vgg16", "--workers", "2", "--gpus",
                       "1", "--image", "gone:1", "--mode", mode, "--start-timeout", "30",
                       "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: any(p["spec"].get("nodeName") for p in srv.objects("pods", "default")
                             if "vgg16" in p["metadata"]["name"]))
    later = start_guard.utc_now() + timedelta(seconds=31)
    monkeypatch.setattr(start_guard, "utc_now", lambda: later)
    srv.clear_requests()
    said = _read_all(k8s)
    assert sorted({r.method for r in srv.request_log}) == ["GET"]
    assert said[("wait", "vgg16")][0] == 1 and said[("logs", "-f", "vgg16")][0] == 1, said
    assert "`hvdk8s tidy vgg16 -n default` fails it" in said[("get", "vgg16")][1]
