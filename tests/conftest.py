"""Fixtures shared by the test modules: the in-process Kubernetes API server, and `k8s`,
which runs the Kubernetes tests against it or against a real cluster (tests/k8s_env.py)."""

import os
import tempfile

import pytest

from tests.k8s_env import k8s  # noqa: F401
from tests.kubeapi_fixtures import api_requests, kube_server, kubeconfig  # noqa: F401


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
