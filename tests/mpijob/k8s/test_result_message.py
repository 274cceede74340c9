"""The launcher leaves the launch line's result in its termination message, run for real by
/bin/sh: the operator- and trainjob-mode wait script, which carries launcher.sh's own result
block (so pods mode runs the same lines)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from launcher.formats.benchmark_result import parse_benchmark_output
from mpijob.k8s.command import wait_then_launch

pytestmark = pytest.mark.slow


def launch(tmp_path, program: str) -> tuple[subprocess.CompletedProcess, str]:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("")  # no worker to wait for
    message = tmp_path / "termination-log"
    env = {**os.environ, "HVDK8S_HOSTFILE": str(hostfile),
           "HVDK8S_TERMINATION_LOG": str(message)}
    done = subprocess.run(wait_then_launch(["/bin/sh", "-c", program]), env=env,
                          capture_output=True, text=True, timeout=60)
    return done, message.read_text() if message.exists() else ""


def test_the_result_reaches_the_termination_message_and_the_log_is_untouched(tmp_path):
    result = {"total_images_per_sec": 812.5, "model": "resnet50"}
    program = ("echo '[1,0]<stdout>:step 1'; "
               f"echo '[1,0]<stdout>:HVDK8S_RESULT {json.dumps(result)}'; "
               "echo '[1,0]<stdout>:total images/sec: 812.5'; echo after")
    done, message = launch(tmp_path, program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == [
        "[1,0]<stdout>:step 1", f"[1,0]<stdout>:HVDK8S_RESULT {json.dumps(result)}",
        "[1,0]<stdout>:total images/sec: 812.5", "after"]
    assert parse_benchmark_output(message) == (812.5, result)
    assert len(message.encode()) < 4096


def test_a_result_too_long_keeps_the_rate(tmp_path):
    big = json.dumps({"pad": "x" * 5000})
    done, message = launch(tmp_path, f"echo 'HVDK8S_RESULT {big}'; "
                                     "echo 'total images/sec: 9.5'")
    assert done.returncode == 0
    assert message == "total images/sec: 9.5\n"


def test_a_failed_launch_keeps_its_exit_status_and_leaves_the_message_to_the_failure(tmp_path):
    done, message = launch(tmp_path, "echo 'total images/sec: 9.5'; exit 3")
    assert (done.returncode, message) == (3, "")
    assert done.stdout.splitlines()[-1] == "total images/sec: 9.5"


def test_no_result_leaves_no_message(tmp_path):
    done, message = launch(tmp_path, "echo hello")
    assert (done.returncode, done.stdout.splitlines()[-1], message) == (0, "hello", "")


def test_sigterm_reaches_the_launch_line(tmp_path):
    """mpirun is the wait script's child now, not exec'd: a deletion's SIGTERM is passed on."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("")
    started = tmp_path / "started"
    env = {**os.environ, "HVDK8S_HOSTFILE": str(hostfile),
           "HVDK8S_TERMINATION_LOG": str(tmp_path / "termination-log")}
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
