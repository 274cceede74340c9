"""`hvdk8s dev cluster` enforces RBAC (kubesim/rbac.py) as a real cluster does: its admin
kubeconfig may do everything, the restricted one runs jobs in `default` only, and an
impersonated user with no binding may do nothing, which `doctor --as` reports. Both
kubeconfigs are 0600 from the moment they exist."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubesim import devcluster
from launcher.backends.kubernetes.client import NODE, POD, ApiError, connect
from launcher.cli.app import app


@pytest.fixture
def dev(tmp_path):
    cluster = devcluster.start("two-nodes", tmp_path / "kubeconfig")
    yield cluster
    cluster.server.stop()


def test_the_restricted_user_runs_jobs_in_default_and_reads_nothing_cluster_wide(dev):
    admin = connect(kubeconfig=str(dev.kubeconfig))
    assert len(admin.items(NODE)) == 2
    tenant = connect(kubeconfig=str(dev.restricted_kubeconfig))
    assert tenant.items(POD, "default") == []
    with pytest.raises(ApiError) as err:
        tenant.items(NODE)
    assert err.value.status == 403 and 'User "dev-user" cannot list resource "nodes"' in \
        err.value.message
    with pytest.raises(ApiError):
        tenant.items(POD, "kube-system")


def test_doctor_as_a_user_without_bindings_reports_what_is_missing(dev):
    result = CliRunner().invoke(app, ["doctor", "--as", "nobody", "--kubeconfig",
                                      str(dev.kubeconfig)], env={"COLUMNS": "250"})
    assert result.exit_code == 1, result.output
    assert "a job cannot be submitted" in result.output
    assert "nodes cannot be listed" in result.output
    admin = CliRunner().invoke(app, ["doctor", "--kubeconfig", str(dev.kubeconfig)],
                               env={"COLUMNS": "250"})
    assert "a job can be submitted" in admin.output and "nodes cannot be listed" not in \
        admin.output


def test_kubeconfigs_are_never_readable_by_others(tmp_path, monkeypatch):
    """Created 0600, not chmod-ed after the token is written (a reader in between, or a
    chmod that never runs, would see it): with chmod doing nothing they are still 0600."""
    monkeypatch.setattr(Path, "chmod", lambda self, mode: None)
    old = os.umask(0o022)
    try:
        (tmp_path / "kubeconfig").write_text("old")
        os.chmod(tmp_path / "kubeconfig", 0o644)  # one left by an earlier run
        cluster = devcluster.start("two-nodes", tmp_path / "kubeconfig")
    finally:
        os.umask(old)
    try:
        for path in (cluster.kubeconfig, cluster.restricted_kubeconfig):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    finally:
        cluster.server.stop()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
def test_kubectl_auth_can_i_answers_from_the_same_rules(dev):
    def can_i(*args: str, kubeconfig: Path = dev.kubeconfig) -> tuple[int, str]:
        done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                              capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout.strip()

    assert can_i("auth", "can-i", "create", "pods") == (0, "yes")
    assert can_i("--as", "alice", "auth", "can-i", "create", "pods") == (1, "no")
    restricted = dev.restricted_kubeconfig
    assert can_i("auth", "can-i", "create", "pods", kubeconfig=restricted) == (0, "yes")
    assert can_i("auth", "can-i", "create", "pods", "-n", "kube-system",
                 kubeconfig=restricted) == (1, "no")
