"""The in-pod entrypoints (launcher.sh, worker.sh), run outside any image with fake ssh/sshd."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mpijob.k8s.render import pod_script
from tests.slow_set import slow_fixture

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")


def _script(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text(pod_script(name))
    return path


def _fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@slow_fixture
def env(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "ssh-publickey").write_text("ssh-ed25519 AAAA test\n")
    (keys / "ssh-privatekey").write_text("PRIVATE\n")
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "HOME": str(home), "HVDK8S_SSH_DIR": str(keys),
            "HVDK8S_RUN_DIR": str(tmp_path / "run"), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}


def test_worker_serves_sshd_until_released_then_exits_zero(tmp_path, env):
    _fake(tmp_path / "bin", "sshd", f'echo "$@" > {tmp_path}/sshd.args\nexec sleep 30\n')
    proc = subprocess.Popen(["/bin/sh", str(_script(tmp_path, "worker.sh"))],
                            env={**env, "HVDK8S_SSHD": str(tmp_path / "bin/sshd")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = tmp_path / "run"
    deadline = time.time() + 10
    while not (tmp_path / "sshd.args").exists() and time.time() < deadline:
        time.sleep(0.05)
    config = (run / "sshd_config").read_text()
    assert "Port 2222" in config and "PasswordAuthentication no" in config
    authorized = Path(env["HOME"]) / ".ssh/authorized_keys"
    assert authorized.read_text() == "ssh-ed25519 AAAA test\n"
    assert oct(authorized.stat().st_mode & 0o777) == "0o600"
    assert proc.poll() is None  # still serving
    (run / "done").write_text("0\n")
    assert proc.wait(timeout=10) == 0
    assert "releasing this worker" in proc.stdout.read()


def test_worker_fails_when_sshd_dies(tmp_path, env):
    _fake(tmp_path / "bin", "sshd", "exit 3\n")
    rc = subprocess.run(["/bin/sh", str(_script(tmp_path, "worker.sh"))],
                        env={**env, "HVDK8S_SSHD": str(tmp_path / "bin/sshd")},
                        capture_output=True, timeout=20).returncode
    assert rc == 3


def _hostfile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostfile"
    path.write_text(text)
    return path


def _ssh_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "ssh.log"
    return log.read_text().splitlines() if log.exists() else []


def test_launcher_waits_runs_and_releases_workers(tmp_path, env):
    # w1 answers only on its third try: the launcher must keep polling.
    _fake(tmp_path / "bin", "ssh", f"""
# launcher.sh's ssh wrapper passes -F $HOME/.ssh/config first (ssh reads ~ from passwd)
[ "$1" = -F ] && [ "$2" = "$HOME/.ssh/config" ] && shift 2 && echo F >> {tmp_path}/ssh-F.log
echo "$*" >> {tmp_path}/ssh.log
if [ "$1" = w1 ] && [ "$2" = true ]; then
  n=$(grep -c '^w1 true' {tmp_path}/ssh.log); [ "$n" -ge 3 ] || exit 255
fi
# A worker is attached once its lease session has run (it runs in the background).
if [ "$2 $3 $4" = "test -e /tmp/hvdk8s/attached" ]; then
  grep -q "^-n $1 " {tmp_path}/ssh.log || exit 1
fi
exit 0
""")
    # Waits of at most a second: under load a backgrounded lease may take that to start.
    _fake(tmp_path / "bin", "sleep", "exec /bin/sleep 1\n")
    hostfile = _hostfile(tmp_path, "w0 slots=2\nw1 slots=2\n")
    result = subprocess.run(
        ["/bin/sh", str(_script(tmp_path, "launcher.sh")), "sh", "-c", "echo training; exit 5"],
        env={**env, "HVDK8S_HOSTFILE": str(hostfile)}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 5
    assert "training" in result.stdout
    calls = _ssh_calls(tmp_path)
    assert calls.count("w1 true") == 3
    # A lease per worker, held before the launch (they end the workers if this pod dies).
    assert sorted(c.split()[1] for c in calls if c.startswith("-n ")) == ["w0", "w1"]  # in parallel
    # Each worker asked, in order, until its lease has attached it (again where it had not yet).
    checked = [c.split()[0] for c in calls if "test -e /tmp/hvdk8s/attached" in c]
    assert checked == sorted(checked) and set(checked) == {"w0", "w1"}
    assert [c for c in calls if "/tmp/hvdk8s/done" in c] == [
        "w0 mkdir -p /tmp/hvdk8s && echo 5 > /tmp/hvdk8s/done",
        "w1 mkdir -p /tmp/hvdk8s && echo 5 > /tmp/hvdk8s/done",
    ]
    ssh_config = (Path(env["HOME"]) / ".ssh/config").read_text()
    assert "StrictHostKeyChecking no" in ssh_config and "Port 2222" in ssh_config
    # Every ssh was given that config: ssh itself would read the passwd entry's home.
    assert len((tmp_path / "ssh-F.log").read_text().split()) == len(calls)


def test_launcher_keeps_workers_with_clean_pod_policy_none(tmp_path, env):
    _fake(tmp_path / "bin", "ssh", f"""
# launcher.sh's ssh wrapper passes -F $HOME/.ssh/config first (ssh reads ~ from passwd)
[ "$1" = -F ] && [ "$2" = "$HOME/.ssh/config" ] && shift 2 && echo F >> {tmp_path}/ssh-F.log
echo "$*" >> {tmp_path}/ssh.log
""")
    hostfile = _hostfile(tmp_path, "w0:1\n")  # Hydra's format
    rc = subprocess.run(["/bin/sh", str(_script(tmp_path, "launcher.sh")), "true"],
                        env={**env, "HVDK8S_HOSTFILE": str(hostfile),
                             "HVDK8S_CLEAN_POD_POLICY": "None"},
                        capture_output=True, timeout=30).returncode
    assert rc == 0
    assert _ssh_calls(tmp_path) == ["w0 true"]


def test_launcher_gives_up_on_a_silent_worker(tmp_path, env):
    _fake(tmp_path / "bin", "ssh", f"""
# launcher.sh's ssh wrapper passes -F $HOME/.ssh/config first (ssh reads ~ from passwd)
[ "$1" = -F ] && [ "$2" = "$HOME/.ssh/config" ] && shift 2 && echo F >> {tmp_path}/ssh-F.log
echo "$*" >> {tmp_path}/ssh.log
exit 255
""")
    hostfile = _hostfile(tmp_path, "w0 slots=1\n")
    result = subprocess.run(
        ["/bin/sh", str(_script(tmp_path, "launcher.sh")), "touch", str(tmp_path / "ran")],
        env={**env, "HVDK8S_HOSTFILE": str(hostfile), "HVDK8S_WORKER_WAIT_SECONDS": "1"},
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "did not answer" in result.stderr
    assert not (tmp_path / "ran").exists()


# --- operator mode: the launcher waits for the operator's workers -------------------------------
def _operator_launch(tmp_path, env, *, attempts_before_up: int, limit: str):
    from mpijob.k8s.command import wait_then_launch

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("op-worker-0.op.default.svc slots=2\nop-worker-1.op.default.svc slots=2\n")
    # Each host refuses ssh `attempts_before_up` times (its pod not created or not up yet).
    _fake(tmp_path / "bin", "ssh", f"""
# launcher.sh's ssh wrapper passes -F $HOME/.ssh/config first (ssh reads ~ from passwd)
[ "$1" = -F ] && [ "$2" = "$HOME/.ssh/config" ] && shift 2 && echo F >> {tmp_path}/ssh-F.log
host=""
for a in "$@"; do case "$a" in -*|*=*|true) ;; *) [ -z "$host" ] && host="$a" ;; esac; done
n=$(cat "{tmp_path}/tries-$host" 2>/dev/null || echo 0)
echo $((n + 1)) > "{tmp_path}/tries-$host"
[ "$n" -ge {attempts_before_up} ]
""")
    argv = wait_then_launch(["echo", "mpirun", "started"])
    return subprocess.run(argv, env={**env, "HVDK8S_HOSTFILE": str(hostfile),
                                     "HVDK8S_WORKER_WAIT_SECONDS": limit,
                                     "HVDK8S_WAIT_INTERVAL": "0.05"},
                          capture_output=True, text=True, timeout=30)


def test_operator_launcher_waits_for_late_workers_then_runs_mpirun(tmp_path, env):
    done = _operator_launch(tmp_path, env, attempts_before_up=3, limit="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hvdk8s: worker op-worker-0.op.default.svc is ready",
                                        "hvdk8s: worker op-worker-1.op.default.svc is ready",
                                        "mpirun started"]
    assert (tmp_path / "tries-op-worker-0.op.default.svc").read_text().strip() == "4"


def test_operator_launcher_gives_up_after_its_limit(tmp_path, env):
    done = _operator_launch(tmp_path, env, attempts_before_up=10 ** 6, limit="1")
    assert done.returncode == 1
    assert "op-worker-0.op.default.svc did not answer on ssh within 1s" in done.stderr
    assert "mpirun started" not in done.stdout


# --- Open MPI 5: the image's mpirun decides which names the launch settings go by ----------
def _fake_mpirun(tmp_path: Path, version: str) -> None:
    """An image's mpirun: `--version` as Open MPI prints it; a launch records its environment."""
    _fake(tmp_path / "bin", "mpirun", f"""
if [ "$1" = --version ]; then echo "mpirun (Open MPI) {version}"; echo; exit 0; fi
env > {tmp_path}/mpirun.env
""")


def _mpirun_env(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "mpirun.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


ORTE_ENV = {"OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
            "OMPI_MCA_plm_rsh_no_tree_spawn": "true",
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"}
LINE = ["mpirun", "-np", "2", "-mca", "btl_vader_single_copy_mechanism", "none", "prog"]


@pytest.mark.parametrize("version", ["5.0.7", "4.1.4"])
def test_launcher_gives_open_mpi_5_its_prrte_names(tmp_path, env, version):
    """prterun ignores ORTE's names (kubeflow/trainer#4028: ranks on one node); Open MPI
    4.1 gets exactly what it got before."""
    _fake(tmp_path / "bin", "ssh", "exit 0\n")
    _fake_mpirun(tmp_path, version)
    hostfile = _hostfile(tmp_path, "w0 slots=1\n")
    done = subprocess.run(["/bin/sh", str(_script(tmp_path, "launcher.sh")), *LINE],
                          env={**env, **ORTE_ENV, "HVDK8S_HOSTFILE": str(hostfile),
                               "PRTE_MCA_plm_ssh_agent": "mine"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    got = _mpirun_env(tmp_path)
    prrte = {k: v for k, v in got.items() if k.startswith("PRTE_MCA_") or k == "OMPI_MCA_smsc"}
    if version.startswith("5"):
        assert prrte == {"PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
                         "PRTE_MCA_plm_ssh_no_tree_spawn": "true",
                         "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
                         "PRTE_MCA_plm_ssh_agent": "mine",  # set already: kept
                         "OMPI_MCA_smsc": "^cma"}  # single copy off, as vader's none
    else:
        assert prrte == {"PRTE_MCA_plm_ssh_agent": "mine"}
    assert {k: got[k] for k in ORTE_ENV} == ORTE_ENV


def test_operator_launcher_gives_open_mpi_5_its_prrte_names(tmp_path, env):
    """The MPI Operator sets ORTE's names only (its ompiEnvVars), and the wait script adds
    the job's ssh port and host-key options to them: prterun gets them under PRRTE's."""
    from mpijob.k8s.command import wait_then_launch

    _fake(tmp_path / "bin", "ssh", "exit 0\n")
    _fake_mpirun(tmp_path, "5.0.7")
    hostfile = _hostfile(tmp_path, "op-worker-0.op.default.svc slots=1\n")
    done = subprocess.run(wait_then_launch(LINE),
                          env={**env, **ORTE_ENV, "HVDK8S_HOSTFILE": str(hostfile),
                               "HVDK8S_SSH_PORT": "2222"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    got = _mpirun_env(tmp_path)
    assert got["PRTE_MCA_plm_ssh_args"] == got["OMPI_MCA_plm_rsh_args"]
    assert got["PRTE_MCA_plm_ssh_args"].startswith("-o ConnectionAttempts=10 -oPort=2222 ")
    assert "StrictHostKeyChecking=no" in got["PRTE_MCA_plm_ssh_args"]
    assert got["PRTE_MCA_prte_default_hostfile"] == "/etc/mpi/hostfile"
    assert got["OMPI_MCA_smsc"] == "^cma"
