"""`hvdk8s dev cluster`: the test API server as a user tries hvdk8s without a cluster, over
TLS, with a kubeconfig that kubectl and hvdk8s both read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubesim import devcluster
from tests.paths import ROOT

HVDK8S = [sys.executable, "-m", "launcher.cli.app"]


def _env(kubeconfig: Path | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


@pytest.fixture
def dev_cluster(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([*HVDK8S, "dev", "cluster", "--write-kubeconfig", str(kubeconfig)],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # printed once it serves
        assert first.startswith("test API server (two-nodes) at https://127.0.0.1:"), first
        yield kubeconfig
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_kubeconfig_speaks_tls_with_its_own_ca(dev_cluster):
    config = yaml.safe_load(dev_cluster.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://") and cluster["certificate-authority-data"]
    assert oct(dev_cluster.stat().st_mode & 0o777) == "0o600"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
def test_kubectl_and_hvdk8s_use_it_as_a_user_would(dev_cluster):
    nodes = subprocess.run(["kubectl", "get", "nodes", "-o", "name"], env=_env(dev_cluster),
                           capture_output=True, text=True, timeout=60)
    assert nodes.returncode == 0, nodes.stderr
    assert nodes.stdout.split() == ["node/gpu-node-0", "node/gpu-node-1"]
    claims = subprocess.run(["kubectl", "get", "pvc", "-o", "name"], env=_env(dev_cluster),
                            capture_output=True, text=True, timeout=60)
    assert sorted(claims.stdout.split()) == ["persistentvolumeclaim/data-rwo",
                                             "persistentvolumeclaim/data-rwx"]
    plan = subprocess.run([*HVDK8S, "submit", "mpi", "--name", "demo", "--workers", "4",
                           "--gpus", "1", "--image", "horovod/horovod:0.28.1", "--dry-run"],
                          cwd=ROOT, env=_env(dev_cluster), capture_output=True, text=True,
                          timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "placement: gpu-node-0 GPUs [0,1,2,3]" in plan.stderr


@pytest.mark.parametrize("shape", sorted(devcluster.SHAPES))
def test_every_shape_starts(shape, tmp_path):
    dev = devcluster.start(shape, tmp_path / "kc")
    try:
        assert dev.server.objects("nodes")
    finally:
        dev.stop()


def test_an_unknown_shape_is_one_line():
    result = subprocess.run([*HVDK8S, "dev", "cluster", "--shape", "huge"], cwd=ROOT,
                            env=_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("error: --shape: unknown shape 'huge'; choose one of ")


def test_the_printed_export_names_the_kubeconfig_under_hvdk8s_home(tmp_path):
    home = tmp_path / "my home"
    proc = subprocess.Popen([*HVDK8S, "dev", "cluster"], cwd=ROOT,
                            env={**_env(), "HVDK8S_HOME": str(home)}, stdout=subprocess.PIPE,
                            text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    written = home / "dev" / "kubeconfig"
    assert lines[1].strip() == f"export KUBECONFIG='{written}'"
    assert oct(written.stat().st_mode & 0o777) == "0o600"


def test_the_help_says_what_the_cluster_plays_and_names_no_fixed_kubeconfig():
    result = subprocess.run([*HVDK8S, "dev", "cluster", "--help"], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "~/.hvdk8s/dev/kubeconfig" not in text  # wrong wherever HVDK8S_HOME is set
    for convention in ("registry.invalid/nosuch:0", "HVDK8S_DEV_EXIT=N", "ImagePullBackOff",
                       "total images/sec"):
        assert convention in text
