"""Answers gzip-compressed as the API server compresses them (128 KiB or more, for a client
that asks), read by hvdk8s's streaming and projected list parsers alike; none asked for
when the kubeconfig's cluster says disable-compression."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubesim.server import KubeAPIServer
from launcher.backends.kubernetes.client import POD, connect
from launcher.backends.kubernetes.projections import PlacementPod


@pytest.fixture
def gzip_server():
    with KubeAPIServer(controllers=False) as srv:
        srv.gzip_responses = True
        for i in range(400):  # ~250 KB of pods: past the 128 KiB threshold
            srv.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"p{i:03d}", "namespace": "default",
                                     "annotations": {"pad": "x" * 400}},
                        "spec": {"nodeName": f"n{i % 7}", "containers": [
                            {"name": "c", "image": "x",
                             "resources": {"requests": {"cpu": "1"}}}]}})
        yield srv


def _kubeconfig(path: Path, srv, cluster: dict) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": srv.url, **cluster}}],
        "users": [{"name": "u", "user": {"token": srv.token}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return str(path)


def test_gzip_answers_are_read_as_plain_ones(gzip_server, tmp_path):
    gzipped = connect(kubeconfig=_kubeconfig(tmp_path / "a", gzip_server, {}))
    plain = connect(kubeconfig=_kubeconfig(tmp_path / "b", gzip_server,
                                           {"disable-compression": True}))
    for kw in ({"cached": True}, {"item_type": PlacementPod, "cached": True},
               {"page_size": 300}):
        start = gzip_server.bytes_out
        got = gzipped.items(POD, all_namespaces=True, **kw)
        assert gzip_server.request_log[-1].headers["Accept-Encoding"] == "gzip"
        compressed, start = gzip_server.bytes_out - start, gzip_server.bytes_out
        expected = plain.items(POD, all_namespaces=True, **kw)
        assert "gzip" not in (gzip_server.request_log[-1].headers["Accept-Encoding"] or "")
        assert got == expected and len(got) == 400
        assert compressed < (gzip_server.bytes_out - start) / 3  # it was compressed
