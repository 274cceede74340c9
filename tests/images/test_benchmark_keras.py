"""The benchmark under TensorFlow >= 2.16: tf.keras is tf-keras (Keras 2) wherever that is
installed, since Horovod 0.28.1 cannot all-reduce Keras 3 variables (horovod/horovod#4290)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from tests.paths import ROOT

PROGRAM = ROOT / "images" / "benchmark" / "hvd_cnn_bench.py"


@pytest.fixture
def bench():
    spec = importlib.util.spec_from_file_location("hvd_cnn_bench_keras", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture
def legacy_keras_unset(monkeypatch):
    """Unset for the test and unset again after it. monkeypatch.delenv of a variable that is
    absent records nothing, so what prefer_keras_2 sets would outlive the test and make
    every later TensorFlow 2.15 import in this process (and its children) look for tf-keras."""
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS")


def _tf_keras_installed(monkeypatch, installed: bool) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if installed else None) if name == "tf_keras"
                        else real(name, *a))


def test_tf_keras_installed_selects_keras_2(bench, monkeypatch, legacy_keras_unset):
    _tf_keras_installed(monkeypatch, True)
    bench.prefer_keras_2()
    assert os.environ["TF_USE_LEGACY_KERAS"] == "1"


def test_without_tf_keras_tensorflows_own_keras_stays(bench, monkeypatch, legacy_keras_unset):
    """TensorFlow 2.15 (Keras 2 built in) has no tf-keras: nothing is set."""
    _tf_keras_installed(monkeypatch, False)
    bench.prefer_keras_2()
    assert "TF_USE_LEGACY_KERAS" not in os.environ


def test_a_setting_in_the_environment_wins(bench, monkeypatch):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    _tf_keras_installed(monkeypatch, True)
    bench.prefer_keras_2()
    assert os.environ["TF_USE_LEGACY_KERAS"] == "0"
