"""Fixtures of the pod rehearsal: a fresh one-machine cluster per test, always torn down."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rehearsal.cluster import Cluster
from tests.rehearsal.image import MountedImage
from tests.rehearsal.kubelet import IMAGE_ENV
from tests.slow_set import slow_fixture

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


@slow_fixture
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


@slow_fixture
def mpich_image() -> dict:
    """The environment of a pod of the MPICH image: its PATH, as an image's ENV sets it."""
    if not (MPICH_IMAGE / "bin" / "mpirun").exists():
        pytest.skip(f"no MPICH image at {MPICH_IMAGE} (scripts/setup.sh makes it)")
    return {"PATH": f"{MPICH_IMAGE / 'bin'}:{IMAGE_ENV['PATH']}"}


# --- the built training image (images/build.sh) ----------------------------------------------
REPO = Path(__file__).resolve().parents[2]


def _image_why_not() -> str | None:
    why = _why_not()
    if why:
        return why
    if not shutil.which("buildah"):
        return ("the image rehearsal builds and mounts images/train with buildah "
                "(scripts/build-images.sh installs it)")
    return None


# The flavours rehearsed: Debian 12's (Open MPI 4.1, Python 3.11, TensorFlow 2.15) always;
# Debian 13's (Open MPI 5, Python 3.13, TensorFlow 2.20) where HVDK8S_REHEARSE_TRIXIE=1 asks,
# since building it takes as long again (scripts/build-images.sh builds it with that set).
FLAVOURS = ("cpu", "cpu-trixie")
TRIXIE_OPT_IN = "HVDK8S_REHEARSE_TRIXIE"


def _built_image(flavour: str, run_as: str):
    why = _image_why_not()
    if why:
        pytest.skip(why)
    if flavour == "cpu-trixie" and os.environ.get(TRIXIE_OPT_IN) != "1":
        pytest.skip(f"the Debian 13 image's rehearsal is opt-in: {TRIXIE_OPT_IN}=1 "
                    "(bash images/build.sh train cpu-trixie builds it)")
    # Seconds when the tag exists (as after scripts/build-images.sh); a full build otherwise.
    done = subprocess.run(["bash", str(REPO / "images" / "build.sh"), "train", flavour],
                          env={**os.environ, "RUN_AS": run_as}, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"images/build.sh train {flavour} (RUN_AS={run_as}) failed:\n"
                    f"{done.stderr[-4000:]}")
    mounted = MountedImage(done.stdout.strip().splitlines()[-1])
    try:
        yield mounted.image
    finally:
        mounted.close()


@pytest.fixture(scope="session", params=FLAVOURS)
def flavour(request) -> str:
    """Which CPU training image: every test of the image runs once per flavour."""
    return request.param


@slow_fixture(scope="session")
def train_image(flavour):
    """The CPU training image, RUN_AS=root: its root filesystem and configuration."""
    yield from _built_image(flavour, "root")


@slow_fixture(scope="session")
def train_image_nonroot(flavour):
    """The CPU training image's non-root variant (RUN_AS=mpiuser, uid 1000)."""
    yield from _built_image(flavour, "mpiuser")
