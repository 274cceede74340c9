"""Fixtures of the pod rehearsal: a fresh one-machine cluster per test, always torn down."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.rehearsal.cluster import Cluster

NEEDED = ("ip", "unshare", "mount", "sshd", "dnsmasq", "mpirun", "mpiexec.hydra")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the pod rehearsal needs root (network, UTS, mount and PID namespaces)"
    missing = [p for p in NEEDED if not shutil.which(p, path=os.environ.get("PATH", "")
                                                      + ":/usr/sbin:/sbin")]
    if missing:
        return f"the pod rehearsal needs {', '.join(missing)} (scripts/setup.sh installs them)"
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "--pid", "--fork", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"namespaces are not permitted here: {probe.stderr.strip()}"
    return None


@pytest.fixture
def cluster():
    why = _why_not()
    if why:
        pytest.skip(why)
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.close()
