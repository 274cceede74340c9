"""pytest fixtures for the test API server (launcher.testing.kubeapi); conftest.py imports them."""

from __future__ import annotations

import pytest

from launcher.testing.kubeapi.server import KubeAPIServer

GPU_NODE_LABELS = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.count": "8"}


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


__all__ = ["kube_server", "kubeconfig", "GPU_NODE_LABELS"]
