"""Whether Horovod's Gloo controller starts on this machine, which elastic Horovod needs.

Horovod 0.28.1 built against TensorFlow 2.20 (Python 3.13, Debian 13) crashes in
GlooContext::InitializeForProcessSet (SIGSEGV) as soon as `hvd.init()` runs under
`horovodrun --gloo`, elastic or not; under MPI the same build runs. The tests of elastic
runs skip there, saying so, rather than fail on what hvdk8s cannot change."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slow_set import slow_helper

HOROVODRUN = Path(sys.executable).with_name("horovodrun")
_INIT = "import horovod.tensorflow as hvd; hvd.init(); print('gloo ok', hvd.size())"


@functools.cache
def gloo_failure() -> str | None:
    """None where a 1-rank `horovodrun --gloo` starts Horovod, else why not."""
    if not HOROVODRUN.exists():
        return "needs horovodrun (scripts/setup.sh)"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if importlib.util.find_spec("tf_keras") is not None:  # as the benchmark chooses
        env.setdefault("TF_USE_LEGACY_KERAS", "1")
    try:
        out = subprocess.run([str(HOROVODRUN), "--gloo", "-np", "1", "-H", "localhost:1",
                              "--network-interface", "lo", sys.executable, "-c", _INIT],
                             capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return "horovodrun --gloo did not start one rank in 300 s"
    if "gloo ok 1" in out.stdout:
        return None
    crashed = "exit code: 139" in (out.stdout + out.stderr).lower()
    return ("Horovod's Gloo controller crashes at start on this machine (SIGSEGV; Horovod "
            "0.28.1 built against TensorFlow 2.20 does)" if crashed else
            f"horovodrun --gloo fails here: {(out.stderr or out.stdout).strip()[-200:]}")


@slow_helper
def needs_gloo() -> None:
    """Skip unless Gloo starts here (a 1-rank horovodrun): a test that calls it runs elastic
    Horovod, and is in the slow set."""
    reason = gloo_failure()
    if reason:
        pytest.skip(reason)
