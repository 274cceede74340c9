"""Where the Kubernetes tests run: the in-process test API server (kubesim), or a real
cluster when HVDK8S_TEST_KUBECONFIG names its kubeconfig.

On a real cluster, HVDK8S_TEST_CONTEXT / HVDK8S_TEST_NAMESPACE pick the context and the
namespace, HVDK8S_TEST_IMAGE the Horovod image the end-to-end runs use; job names get a
random suffix, every job a test created is deleted afterwards, and tests that need the
server's fault injection or scripted pods are skipped.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

import pytest


@dataclass
class K8sEnv:
    kubeconfig: str
    context: str | None
    namespace: str
    image: str
    srv: object | None = None  # kubesim.server.KubeAPIServer
    jobs: list[str] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.srv is None

    def server(self):
        """The test server, or skip: the test injects faults or scripts pods."""
        if self.srv is None:
            pytest.skip("needs the test API server (fault injection / scripted pods)")
        return self.srv

    def name(self, base: str) -> str:
        """A job name: unique on a real cluster, cleaned up after the test."""
        name = f"{base}-{secrets.token_hex(2)}" if self.real else base
        self.jobs.append(name)
        return name

    def script_launcher(self, job: str, logs, exit_code: int | None = 0, **kw) -> None:
        """What the launcher pod prints (test server only; a real cluster runs the image)."""
        if self.srv is not None:
            self.srv.script_pod(rf"{job}-launcher-.*", logs=logs, exit_code=exit_code, **kw)

    def backend(self, **kw):
        from launcher.backends.kubernetes.backend import KubernetesBackend

        return KubernetesBackend(self.context, self.namespace, **kw)

    def cli_args(self) -> list[str]:
        args = ["--backend", "kubernetes", "-n", self.namespace]
        return args + (["--context", self.context] if self.context else [])


def hvdk8s(k8s: K8sEnv, *args: str):
    """The CLI run against the test's cluster; a traceback in its output fails the test."""
    from typer.testing import CliRunner

    from launcher.cli.app import app  # lazy: conftest imports this module for every test

    result = CliRunner().invoke(app, [*args, *k8s.cli_args()])
    assert "Traceback" not in result.output, result.output
    return result


@pytest.fixture
def k8s(request, monkeypatch):
    real = os.environ.get("HVDK8S_TEST_KUBECONFIG")
    if real:
        monkeypatch.setenv("KUBECONFIG", real)
        env = K8sEnv(real, os.environ.get("HVDK8S_TEST_CONTEXT"),
                     os.environ.get("HVDK8S_TEST_NAMESPACE", "default"),
                     os.environ.get("HVDK8S_TEST_IMAGE", "horovod/horovod:0.28.1"))
    else:
        srv = request.getfixturevalue("kube_server")
        path = request.getfixturevalue("kubeconfig")
        monkeypatch.setenv("KUBECONFIG", path)
        env = K8sEnv(path, "test", "default", "registry.example/horovod:test", srv)
    yield env
    if env.real:
        backend = env.backend()
        for job in env.jobs:
            backend.delete(job)
