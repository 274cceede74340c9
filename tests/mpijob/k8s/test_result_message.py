"""The launcher leaves the launch line's result in its termination message, run for real by
/bin/sh: the operator- and trainjob-mode wait script, which carries launcher.sh's own result
block (so pods mode runs the same lines). Each test runs both filters: the monitor
(hvdk8s_monitor.py, where the image has python3) and awk (where it has not)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from launcher.formats.benchmark_result import parse_benchmark_output
from mpijob.k8s.command import wait_then_launch
from mpijob.k8s.podscripts import __file__ as podscripts
from mpijob.progress import rules_env

pytestmark = pytest.mark.slow
MONITOR = Path(podscripts).with_name("hvdk8s_monitor.py")


@pytest.fixture(params=["monitor", "awk"])
def filter_env(request, tmp_path) -> dict[str, str]:
    """The launcher's environment for each filter: the rendered monitor's, or none."""
    if request.param == "awk":
        return {}
    return {"HVDK8S_MONITOR": str(MONITOR), "HVDK8S_MONITOR_DIR": str(tmp_path / "monitor"),
            **rules_env()}


@pytest.fixture
def launch(tmp_path, filter_env):
    def run(program: str) -> tuple[subprocess.CompletedProcess, str]:
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("")  # no worker to wait for
        message = tmp_path / "termination-log"
        env = {**os.environ, "HVDK8S_HOSTFILE": str(hostfile),
               "HVDK8S_TERMINATION_LOG": str(message), **filter_env}
        done = subprocess.run(wait_then_launch(["/bin/sh", "-c", program]), env=env,
                              capture_output=True, text=True, timeout=60)
        return done, message.read_text() if message.exists() else ""
    return run


def test_the_result_reaches_the_termination_message_and_the_log_is_untouched(launch):
    result = {"total_images_per_sec": 812.5, "model": "resnet50"}
    program = ("echo '[1,0]<stdout>:step 1'; "
               f"echo '[1,0]<stdout>:HVDK8S_RESULT {json.dumps(result)}'; "
               "echo '[1,0]<stdout>:total images/sec: 812.5'; echo after")
    done, message = launch(program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == [
        "[1,0]<stdout>:step 1", f"[1,0]<stdout>:HVDK8S_RESULT {json.dumps(result)}",
        "[1,0]<stdout>:total images/sec: 812.5", "after"]
    assert parse_benchmark_output(message) == (812.5, result)
    assert len(message.encode()) < 4096


def test_a_result_too_long_keeps_the_rate(launch):
    big = json.dumps({"pad": "x" * 5000})
    done, message = launch(f"echo 'HVDK8S_RESULT {big}'; "
                                     "echo 'total images/sec: 9.5'")
    assert done.returncode == 0
    assert message == "total images/sec: 9.5\n"


def test_a_failed_launch_keeps_its_exit_status_and_leaves_the_message_to_the_failure(launch):
    done, message = launch("echo 'total images/sec: 9.5'; exit 3")
    assert (done.returncode, message) == (3, "")
    assert done.stdout.splitlines()[-1] == "total images/sec: 9.5"


def test_no_result_leaves_no_message(launch):
    done, message = launch("echo hello")
    assert (done.returncode, done.stdout.splitlines()[-1], message) == (0, "hello", "")


def test_sigterm_reaches_the_launch_line(tmp_path, filter_env):
    """mpirun is the wait script's child now, not exec'd: a deletion's SIGTERM is passed on
    (through the monitor too)."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("")
    started = tmp_path / "started"
    env = {**os.environ, "HVDK8S_HOSTFILE": str(hostfile),
           "HVDK8S_TERMINATION_LOG": str(tmp_path / "termination-log"), **filter_env}
    proc = subprocess.Popen(wait_then_launch(["/bin/sh", "-c", f"touch {started}; exec sleep 60"]),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=10) == 143
    finally:
        proc.kill()


def test_without_python3_the_awk_filter_runs_and_says_so_once(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with every tool the script uses but python3
    bin_dir.mkdir()
    for tool in ("sh", "awk", "mktemp", "mkfifo", "mkdir", "sed", "dirname", "rm", "cat", "date",
                 "printenv", "mpirun", "ssh", "sleep"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("")
    message = tmp_path / "termination-log"
    env = {"PATH": str(bin_dir), "HVDK8S_HOSTFILE": str(hostfile),
           "HVDK8S_TERMINATION_LOG": str(message), "HVDK8S_MONITOR": str(MONITOR),
           "HVDK8S_MONITOR_DIR": str(tmp_path / "monitor"), **rules_env()}
    done = subprocess.run(wait_then_launch(["/bin/sh", "-c", "echo 'total images/sec: 9.5'"]),
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert message.read_text() == "total images/sec: 9.5\n"
    said = "hvdk8s: no python3 (3.8 or later) in the image"
    assert done.stderr.count(said) == 1
    # the readiness probe says it too (mpijob.k8s.monitor.PROBE_FILES)
    assert (tmp_path / "monitor" / "unwatched").read_text().startswith(said)
