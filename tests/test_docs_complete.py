"""What the docs promise is there: every key the cluster-file loader accepts is in
docs/cluster-file.md's tables."""

from __future__ import annotations

import re
from pathlib import Path

from launcher.formats import clusterfile

ROOT = Path(__file__).resolve().parent.parent


def test_every_node_key_of_the_cluster_file_is_documented():
    doc = (ROOT / "docs" / "cluster-file.md").read_text()
    documented = set(re.findall(r"^\| `([A-Za-z_]+)`", doc, re.M))
    documented |= {k for row in re.findall(r"^\| (`[^|]+)\|", doc, re.M)
                   for k in re.findall(r"`([A-Za-z_]+)`", row)}
    keys = set(clusterfile.NodeEntry.model_fields)
    assert keys - documented == set()
