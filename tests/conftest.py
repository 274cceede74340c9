"""Fixtures shared by the test modules: the in-process Kubernetes API server, and `k8s`,
which runs the Kubernetes tests against it or against a real cluster (tests/k8s_env.py)."""

import os
import sys
import tempfile

import pytest

from tests import slow_set, xdist_groups
from tests.k8s_env import k8s  # noqa: F401
from tests.kubeapi_fixtures import api_requests, kube_server, kubeconfig  # noqa: F401
from tests.real_runs import real_runs  # noqa: F401

slow_set.install_guard()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Before `-m "not slow"` deselects: a test using a slow fixture or helper is slow."""
    slow_set.put_in_the_slow_set(items)
    slow_set.one_worker_for_the_slow_set(items)
    xdist_groups.record(config, items)


def pytest_configure(config):
    xdist_groups.configure(config)


def pytest_unconfigure(config):
    xdist_groups.unconfigure(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (scripts/test.sh) on this pytest: tests/xdist_groups.py."""
    return xdist_groups.make_scheduler(config, log)


def pytest_runtest_setup(item):
    item.stash[_TENSORFLOW_BEFORE] = "tensorflow" in sys.modules


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test outside the slow set that started mpirun, TensorFlow, a shell script or an
    image fails, saying how it joins the slow set (tests/slow_set.py)."""
    report = yield
    if call.when == "call" and not slow_set.is_slow(item):
        why = slow_set.why_not_fast(item, item.stash.get(_TENSORFLOW_BEFORE, True))
        if why and report.outcome != "skipped":
            report.outcome = "failed"
            report.longrepr = why
    elif call.when == "teardown":
        slow_set.forget(item)
    return report


_TENSORFLOW_BEFORE = pytest.StashKey[bool]()


@slow_set.slow_fixture
def local_jobs(tmp_path, monkeypatch):
    """HVDK8S_HOME of the test's own, for a test that starts local jobs (each a supervisor
    running mpirun): the slow set. Every job it started is deleted after."""
    from launcher.backends.local.backend import LocalBackend

    home = tmp_path / "home"
    monkeypatch.setenv("HVDK8S_HOME", str(home))
    yield home
    backend = LocalBackend(stop_grace_seconds=2.0)
    for status in backend.list(all_namespaces=True):  # never leave a process behind
        backend.delete(status.name, status.namespace)


@slow_set.slow_fixture(scope="session")
def tensorflow():
    """TensorFlow imported once per session (seconds), for the tests that need it in this
    process; they are in the slow set."""
    return pytest.importorskip("tensorflow")

# Not the tests' doing: pytest's own, and what importing TensorFlow sets once per process
# (tensorflow/__init__.py: TF2_BEHAVIOR; tensorflow/python/tpu/__init__.py: TPU_ML_PLATFORM;
# TensorFlow 2.20 adds its version and ENABLE_RUNTIME_UPTIME_TELEMETRY).
_SET_BY_OTHERS = frozenset({"PYTEST_CURRENT_TEST", "TF2_BEHAVIOR", "TPU_ML_PLATFORM",
                            "TPU_ML_PLATFORM_VERSION", "ENABLE_RUNTIME_UPTIME_TELEMETRY"})


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _SET_BY_OTHERS}


@pytest.fixture(autouse=True)
def _environment_unchanged_by_the_test():
    """A variable a test leaves behind reaches every later test and each process they start
    (a leaked TF_USE_LEGACY_KERAS once broke every TensorFlow 2.15 run after it). Set up
    before monkeypatch and torn down after it, so what monkeypatch restores is not counted."""
    before = _environment()
    yield
    after = _environment()
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for name in changed:
            if name in before:
                os.environ[name] = before[name]
            else:
                os.environ.pop(name, None)
        pytest.fail(f"the test left the environment changed: {', '.join(changed)}")


@pytest.fixture(autouse=True)
def _kubeconfig_flag_of_this_test_only():
    """`--kubeconfig` is kept in the client module for the command that took it: a test that
    calls the client directly must not see the flag of an earlier test's command."""
    yield
    from launcher.backends.kubernetes.kubeconfig_flag import set_kubeconfig_flag

    set_kubeconfig_flag(None)


# Per-user defaults (launcher/cli/userdefaults.py) must not reach the tests: an empty
# config file instead of the developer's $HVDK8S_HOME/config.yaml, and no HVDK8S_<OPTION>.
_EMPTY_CONFIG = os.path.join(tempfile.mkdtemp(prefix="hvdk8s-test-config-"), "config.yaml")
open(_EMPTY_CONFIG, "w").close()
os.environ["HVDK8S_CONFIG"] = _EMPTY_CONFIG
