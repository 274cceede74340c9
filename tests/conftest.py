"""Fixtures shared by the test modules: the in-process Kubernetes API server, and `k8s`,
which runs the Kubernetes tests against it or against a real cluster (tests/k8s_env.py)."""

from tests.k8s_env import k8s  # noqa: F401
from tests.kubeapi_fixtures import api_requests, kube_server, kubeconfig  # noqa: F401
