"""A job named on the command line is checked before any path or URL is made of it: `..`
in a name or namespace is one line, exit 2, on both backends, and nothing outside the
local state directory is read or removed."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from launcher.backends.kubernetes.client import POD
from launcher.backends.local import state
from launcher.cli.app import app
from launcher.errors import UserError

runner = CliRunner()


@pytest.fixture
def local_home(tmp_path, monkeypatch):
    home = tmp_path / "x" / "h"
    monkeypatch.setenv("HVDK8S_HOME", str(home))
    (home / "jobs" / "default").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    return home, victim


@pytest.mark.parametrize("args", [
    ["delete", "../../../victim"], ["get", "../../../victim"], ["logs", "../../../victim"],
    ["wait", "../../../victim", "--timeout", "1"], ["scale", "../../../victim", "--workers", "2"],
    ["delete", "victim", "-n", "../../.."], ["list", "-n", ".."], ["get", "x", "-n", ".."]])
def test_local_commands_refuse_names_that_leave_the_state_directory(local_home, args):
    _, victim = local_home
    result = runner.invoke(app, [*args, "--backend", "local"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(("error: NAME: ", "error: -n/--namespace: "))
    assert (victim / "keep").read_text() == "mine"


def test_a_job_directory_that_resolves_outside_is_refused(local_home, tmp_path):
    home, victim = local_home
    (home / "jobs" / "default" / "demo").symlink_to(victim)
    with pytest.raises(UserError, match="outside the state directory"):
        state.job_paths("demo", "default")
    result = runner.invoke(app, ["delete", "demo", "--backend", "local"])
    assert result.exit_code == 1 and (victim / "keep").exists()


@pytest.mark.parametrize("args", [["get", "x", "-n", ".."], ["delete", "x", "-n", ".."],
                                  ["logs", "..", "-n", "default"], ["list", "-n", "a/b"],
                                  ["wait", "x", "-n", "..", "--timeout", "1"]])
def test_kubernetes_commands_refuse_them_before_any_request(k8s, args):
    srv = k8s.server()
    srv.clear_requests()
    result = CliRunner().invoke(app, [*args, "--backend", "kubernetes", "--context", "test"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(("error: NAME: ", "error: -n/--namespace: "))
    assert [r for r in srv.request_log if "/namespaces/" in r.path or r.path.endswith("/pods")] == []


def test_the_client_makes_no_url_of_dot_segments():
    for ns, name in (("..", "x"), ("default", ".."), (".", None)):
        with pytest.raises(UserError):
            POD.path(ns, name)
    assert POD.path("default", "x") == "/api/v1/namespaces/default/pods/x"
