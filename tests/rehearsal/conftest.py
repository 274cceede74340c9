"""Fixtures of the pod rehearsal: a fresh one-machine cluster per test, always torn down."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rehearsal.cluster import Cluster
from tests.rehearsal.kubelet import IMAGE_ENV

NEEDED = ("ip", "unshare", "mount", "sshd", "dnsmasq", "mpirun", "mpiexec.hydra")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the pod rehearsal needs root (network, UTS, IPC, mount and PID namespaces)"
    missing = [p for p in NEEDED if not shutil.which(p, path=os.environ.get("PATH", "")
                                                      + ":/usr/sbin:/sbin")]
    if missing:
        return f"the pod rehearsal needs {', '.join(missing)} (scripts/setup.sh installs them)"
    probe = subprocess.run(["unshare", "--net", "--uts", "--ipc", "--mount", "--pid", "--fork", "true"],
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


# The MPICH flavour of the "image", made by scripts/setup.sh: a venv whose bin has mpirun ->
# mpiexec.hydra and hydra_pmi_proxy, whose site-packages has a Horovod linked with libmpich
# ahead of the main venv's packages. Under the main venv, so it is seen where that is.
MPICH_IMAGE = Path(sys.prefix) / "image-mpich"


@pytest.fixture
def mpich_image() -> dict:
    """The environment of a pod of the MPICH image: its PATH, as an image's ENV sets it."""
    if not (MPICH_IMAGE / "bin" / "mpirun").exists():
        pytest.skip(f"no MPICH image at {MPICH_IMAGE} (scripts/setup.sh makes it)")
    return {"PATH": f"{MPICH_IMAGE / 'bin'}:{IMAGE_ENV['PATH']}"}
