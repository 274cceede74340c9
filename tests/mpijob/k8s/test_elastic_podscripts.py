"""The elastic launcher's in-pod scripts, run for real by /bin/sh: the host discovery reads
the ready-only Service from DNS, elastic.sh waits for the minimum, hands launcher.sh the
workers ready at the start, and releases the ones that joined later."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from tests.paths import ROOT
from tests.slow_set import run_script

SCRIPTS = ROOT / "mpijob" / "k8s" / "podscripts"


@pytest.mark.skipif(not shutil.which("getent"), reason="needs getent")
def test_discovery_prints_each_address_of_the_service_once_with_the_slots():
    out = run_script(["/bin/sh", str(SCRIPTS / "discover_hosts.sh")], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "HVDK8S_READY_SERVICE": "localhost",
                              "HVDK8S_SLOTS": "2"}).stdout
    assert out.splitlines() == ["127.0.0.1:2"]
    none = run_script(["/bin/sh", str(SCRIPTS / "discover_hosts.sh")], check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "HVDK8S_READY_SERVICE": "nothing.invalid"})
    assert none.stdout == ""  # no worker ready yet: no host, and exit 0 as Horovod wants


def test_elastic_launcher_waits_for_the_minimum_and_releases_late_joiners(tmp_path):
    d = tmp_path / "elastic"
    d.mkdir()
    shutil.copy(SCRIPTS / "elastic.sh", d / "elastic.sh")
    hosts = tmp_path / "hosts"
    hosts.write_text("w0.invalid:1\n")
    (d / "discover_hosts.sh").write_text(f"#!/bin/sh\ncat {hosts}\n")
    seen = tmp_path / "seen"
    launcher = tmp_path / "launcher.sh"
    # launcher.sh's part: it got the workers ready at the start; one joins while it runs.
    launcher.write_text(f'#!/bin/sh\ncp "$HVDK8S_HOSTFILE" {seen}\necho "$@" >> {seen}\n'
                        f'echo w2.invalid:1 >> {hosts}\nexit 3\n')
    env = {**os.environ, "HOME": str(tmp_path), "HVDK8S_MIN_WORKERS": "2",
           "HVDK8S_LAUNCHER_SCRIPT": str(launcher)}
    later = threading.Timer(2.0, lambda: hosts.write_text("w0.invalid:1\nw1.invalid:1\n"))
    later.start()
    began = time.monotonic()
    run = run_script(["/bin/sh", str(d / "elastic.sh"), "horovodrun", "-np", "2"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - began >= 2.0  # it waited for the second worker
    assert run.returncode == 3  # the launch line's status
    assert seen.read_text().splitlines() == ["w0.invalid", "w1.invalid", "horovodrun -np 2"]
    assert "elastic: 2 worker(s) ready (minimum 2)" in run.stdout
    # Only the worker that joined later is released here (launcher.sh released the others).
    assert "could not release worker w2.invalid" in run.stderr
    assert "w0.invalid" not in run.stderr and "w1.invalid" not in run.stderr
