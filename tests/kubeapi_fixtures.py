"""pytest fixtures for the test API server (kubesim); conftest.py imports them."""

from __future__ import annotations

import pytest

from kubesim.server import KubeAPIServer

GPU_NODE_LABELS = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.count": "8"}


def configmaps_made(srv: KubeAPIServer, namespace: str = "default") -> list[str]:
    """The namespace's ConfigMaps but kube-root-ca.crt, which the server puts in every
    namespace (as the root-ca-cert-publisher controller does)."""
    return [name for c in srv.objects("configmaps", namespace)
            if (name := c["metadata"]["name"]) != "kube-root-ca.crt"]


@pytest.fixture
def kube_server():
    """A started server with nodes gpu-node-0 and gpu-node-1, 8 nvidia.com/gpu each."""
    with KubeAPIServer() as srv:
        for i in range(2):
            srv.add_node(f"gpu-node-{i}", gpus=8, labels=dict(GPU_NODE_LABELS))
        yield srv


@pytest.fixture
def kubeconfig(kube_server, tmp_path) -> str:
    """Path to a kubeconfig (context "test", namespace "default") for kube_server.
    Nothing is exported: pass it to load_kube_config(config_file=...) explicitly."""
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


class RequestCounter:
    """What the test API server was asked from `mark()` on: lists, watches, gets, writes."""

    def __init__(self, srv):
        self.srv = srv
        self.start = 0

    def mark(self) -> None:
        with self.srv._log_lock:
            self.start = len(self.srv.request_log)

    def since(self) -> list:
        with self.srv._log_lock:
            return list(self.srv.request_log[self.start:])

    @staticmethod
    def kind(r) -> str:
        """'watch', 'list', 'get' (one object, logs and discovery included) or the method."""
        if r.method != "GET":
            return r.method
        if r.query.get("watch") in ("true", "1"):
            return "watch"
        parts = r.path.strip("/").split("/")
        # /api/v1/pods, /api/v1/namespaces/NS/pods, /apis/G/V/namespaces/NS/R: a collection
        core = parts[:2] == ["api", "v1"]
        rest = parts[2:] if core else parts[3:]
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            rest = rest[2:]
        return "list" if len(rest) == 1 and len(parts) > (2 if core else 3) else "get"

    def count(self, kind: str) -> int:
        return sum(1 for r in self.since() if self.kind(r) == kind)


@pytest.fixture
def api_requests(kube_server):
    """Counts the test API server's requests by kind (RequestCounter)."""
    return RequestCounter(kube_server)


__all__ = ["kube_server", "kubeconfig", "api_requests", "RequestCounter", "GPU_NODE_LABELS"]
