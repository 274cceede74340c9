"""What users install: the wheel `pip wheel .` builds holds the product, not the test cluster."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_has_the_cli_and_no_test_api_server(tmp_path):
    # Built without isolation, with this interpreter's setuptools: pyproject's build-system
    # asks for 68 (the min-versions venv has an older one; the wheel is the same there).
    pytest.importorskip("setuptools", minversion="68")
    # From a copy: setuptools leaves build/ in the tree it builds, and an old build/ would
    # be packed again.
    source = tmp_path / "src"
    for part in ("launcher", "mpijob", "kubesim"):
        shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("hvdk8s-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "launcher/cli/app.py" in names
    assert "launcher/backends/kubernetes/backend.py" in names
    assert "mpijob/k8s/podscripts/launcher.sh" in names
    # The help's `--cluster example:two-dgx1` works from the wheel, not only the checkout.
    assert "launcher/formats/example_clusters/two-dgx1.yaml" in names
    assert "mpijob/k8s/podscripts/hvdk8s_preflight.py" in names  # the preflight, run in pods
    assert "mpijob/k8s/podscripts/hvdk8s_monitor.py" in names  # the launcher's monitor
    assert "mpijob/k8s/podscripts/hvdk8s_trainer_status.py" in names  # a TrainJob's poster
    assert "kubesim/devcluster.py" in names  # `hvdk8s dev cluster` works from the wheel
