"""Operator mode: the launcher's ssh (its wait for the workers, then mpirun's) goes to the
port the worker's sshd listens on, with hvdk8s' own image (sshd_config `Port 2222`) and with
any other (issue 20, defect 1). The rehearsal in the built image proves it for real
(tests/rehearsal/test_image.py); this is the same check without root or an image."""

from __future__ import annotations

import os
import re
import sys

import pytest

from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.monitor import MONITOR_FILE
from tests.paths import ROOT
from tests.slow_set import run_script

IMAGE_SSHD_CONFIG = ROOT / "images" / "train" / "sshd_config"


def _containers(**fields):
    spec = build_spec(name="op", workers=2, gpus_per_worker=0, command=("hostname",), **fields)
    mpijob = next(o for o in render(spec, mode="operator") if o["kind"] == "MPIJob")
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    return (replicas["Launcher"]["template"]["spec"]["containers"][0],
            replicas["Worker"]["template"]["spec"]["containers"][0])


def _sshd_port(worker: dict, image_default: int) -> int:
    """Where `sshd` listens: its last `-p` (sshd(8): a command-line port replaces the config
    file's Port lines), else the image's sshd_config."""
    argv = worker["command"] + worker.get("args", [])
    ports = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-p"]
    return int(ports[-1]) if ports else image_default


def _ssh_port(args: list[str]) -> int | None:
    """ssh(1): the first -p / -o Port= wins over ssh_config."""
    for i, a in enumerate(args):
        if a == "-p":
            return int(args[i + 1])
        m = re.fullmatch(r"-oPort=(\d+)|Port=(\d+)", a)
        if m and (a.startswith("-o") or (i and args[i - 1] == "-o")):
            return int(m.group(1) or m.group(2))
    return None


@pytest.mark.parametrize("image_port", [2222, 22], ids=["hvdk8s-image", "stock-image"])
def test_operator_launcher_ssh_reaches_the_workers_sshd_port(tmp_path, image_port):
    """Fails on the old wait script: it ran `ssh -o Port=${HVDK8S_SSH_PORT:-22}`, while
    HVDK8S_SSH_PORT was set only with --host-network, so against hvdk8s' image (sshd on
    2222) every probe was refused until the 600 s limit."""
    if image_port == 2222:  # the image's own file says so
        assert re.search(r"^Port 2222$", IMAGE_SSHD_CONFIG.read_text(), re.M)
    launcher, worker = _containers()
    listen = _sshd_port(worker, image_port)
    env = {e["name"]: e["value"] for e in launcher.get("env", []) if "value" in e}
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("op-worker-0.op.default.svc slots=1\n")
    calls = tmp_path / "calls"
    # The fake ssh answers only on the worker's port (from the args, else ssh_config's,
    # which is the image's: the same number as its sshd_config).
    ssh = tmp_path / "bin" / "ssh"
    ssh.parent.mkdir()
    # The test's own interpreter and checkout: the module's imports need the project.
    ssh.write_text(f"""#!{sys.executable}
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.mpijob.k8s.test_operator_ssh_port import _ssh_port
port = _ssh_port(sys.argv[1:]) or {image_port}
open({str(calls)!r}, "a").write(str(port) + "\\n")
sys.exit(0 if port == {listen} else 255)
""")
    ssh.chmod(0o755)
    argv = launcher["command"] + launcher.get("args", [])
    # The launcher's program: print what mpirun's rsh launcher would pass to ssh.
    argv = argv[:argv.index("hvdk8s-launcher") + 1] + ["sh", "-c", 'echo "$OMPI_MCA_plm_rsh_args"']
    done = run_script(argv, capture_output=True, text=True, timeout=30, env={
        **os.environ, **env, "PATH": f"{ssh.parent}:{os.environ['PATH']}",
        "HVDK8S_HOSTFILE": str(hostfile), "HVDK8S_WORKER_WAIT_SECONDS": "2",
        "HVDK8S_WAIT_INTERVAL": "0.1",
        # the monitor from this checkout, where the pod has it from the job's ConfigMap
        "HVDK8S_MONITOR": str(ROOT / "mpijob/k8s/podscripts" / MONITOR_FILE),
        "HVDK8S_MONITOR_DIR": str(tmp_path / "monitor")})
    assert done.returncode == 0, (done.stderr, calls.read_text())
    assert "worker op-worker-0.op.default.svc is ready" in done.stdout
    rsh_args = done.stdout.splitlines()[-1].split()
    assert (_ssh_port(rsh_args) or image_port) == listen, rsh_args


def test_operator_port_is_the_jobs_on_both_ends():
    launcher, worker = _containers(ssh_port=2345)
    env = {e["name"]: e.get("value") for e in launcher.get("env", [])}
    assert env["HVDK8S_SSH_PORT"] == "2345"
    assert _sshd_port(worker, 0) == 2345
