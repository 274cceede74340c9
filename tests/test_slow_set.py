"""The two speeds (tests/slow_set.py): a test that starts mpirun, TensorFlow or a shell script
joins the slow set through the fixture or helper it uses, and one outside it that starts them
fails. Checked on a small suite run by pytest in a subprocess, with this suite's hooks."""

from __future__ import annotations

import sys

import pytest

from tests.paths import ROOT
from tests.slow_set import what_makes_it_slow

pytest_plugins = ["pytester"]

CONFTEST = """
from tests.conftest import (  # noqa: F401  this suite's hooks
    pytest_collection_modifyitems,
    pytest_runtest_makereport,
    pytest_runtest_setup,
)
"""

TESTS = """
import subprocess
import sys
import types

import pytest

from tests.slow_set import slow_fixture, slow_helper


@slow_fixture
def shell():
    return "sh"


@slow_helper
def run_a_script():
    return subprocess.run(["sh", "-c", "exit 0"], check=True)


def test_starts_a_shell_script():
    subprocess.run(["sh", "-c", "exit 0"], check=True)


def test_starts_mpirun_through_a_local_job():
    # The local backend's supervisor runs the job's mpirun line (without a job folder, it
    # prints its usage and exits).
    subprocess.run([sys.executable, "-m", "launcher.backends.local.supervisor"])


def test_imports_tensorflow():
    sys.modules["tensorflow"] = types.ModuleType("tensorflow")  # as `import tensorflow` would


def test_reads_a_script_without_running_it():
    subprocess.run(["sh", "-n", "/dev/null"], check=True)


def test_starts_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_marked_by_hand():
    subprocess.run(["sh", "-c", "exit 0"], check=True)


def test_through_a_slow_fixture(shell):
    subprocess.run([shell, "-c", "exit 0"], check=True)


def test_through_a_slow_helper():
    run_a_script()
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_speeds=TESTS)
    return pytester


def test_the_fast_set_fails_a_test_that_starts_a_slow_thing(suite):
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-m", "not slow")
    result.assert_outcomes(passed=2, failed=3, deselected=3)
    result.stdout.fnmatch_lines([
        "*test_starts_a_shell_script is in the fast set but starts*",
        "*sh: sh -c exit 0*",
        "*test_starts_mpirun_through_a_local_job is in the fast set*",
        "*a local job's supervisor (mpirun)*",
        "*test_imports_tensorflow is in the fast set*",
        "*imports TensorFlow in this process*",
    ])
    result.stdout.fnmatch_lines(["*slow_set.slow_fixture*slow_set.slow_helper*mark.slow*"])


def test_fixtures_helpers_and_marks_put_tests_in_the_slow_set(suite):
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-m", "slow", "-v")
    result.assert_outcomes(passed=3, deselected=5)
    result.stdout.fnmatch_lines_random(["*test_marked_by_hand PASSED*",
                                        "*test_through_a_slow_fixture PASSED*",
                                        "*test_through_a_slow_helper PASSED*"])


@pytest.mark.parametrize("argv,slow", [
    (["mpirun", "-np", "2", "python", "train.py"], "mpirun"),
    (["/usr/lib64/openmpi/bin/mpirun", "--version"], None),
    (["mpiexec.hydra", "-n", "2", "true"], "mpiexec.hydra"),
    (["horovodrun", "-np", "2", "python", "t.py"], "horovodrun"),
    (["/bin/bash", "scripts/setup.sh"], "bash"),
    (["sh", "-n", "launcher.sh"], None),
    (["buildah", "bud", "."], "buildah"),
    ([sys.executable, "-m", "launcher.backends.local.supervisor", "/tmp/j"],
     "a local job's supervisor (mpirun)"),
    ([sys.executable, "images/benchmark/hvd_cnn_bench.py", "--model=trivial"],
     "a Python running TensorFlow"),
    ([sys.executable, "-c", "import tensorflow as tf"], "a Python running TensorFlow"),
    # Loads the benchmark to show it imports no TensorFlow: not a TensorFlow run.
    ([sys.executable, "-c", "spec_from_file_location('b', 'images/benchmark/hvd_cnn_bench.py')"],
     None),
    ([sys.executable, "-u", "images/benchmark/elastic.py"], "a Python running TensorFlow"),
    ([sys.executable, "-m", "launcher.cli.app", "list"], None),
    (["kubectl", "get", "pods"], None),
    (["openssl", "req", "-new"], None),
])
def test_what_makes_a_command_slow(argv, slow):
    assert what_makes_it_slow(argv) == slow
