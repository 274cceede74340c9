"""`hvdk8s agent --once --dry-run` on a machine without a kubelet: the report, not a retry loop."""

from __future__ import annotations

import json
import socket
import sys

from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.scheduling.topology import parse_annotation
from tests import fake_pynvml
from tests.topo_files import gpu_links

runner = CliRunner()


def test_dry_run_without_a_kubelet_prints_the_topology_and_says_why_no_allocations(
        monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.dgx1_v100())
    monkeypatch.delenv("NODE_NAME", raising=False)
    missing = tmp_path / "no-kubelet.sock"

    result = runner.invoke(app, ["agent", "--once", "--dry-run", "--kubelet-socket", str(missing)])

    assert result.exit_code == 0, result.output
    topology, taken, meta = parse_annotation(result.stdout)
    assert topology.links == gpu_links("dgx1-v100-mlx5.txt")
    assert taken == frozenset() and json.loads(result.stdout)["allocated"] == {}
    assert meta["node"] == socket.gethostname()
    notes = [line for line in result.stderr.splitlines() if "PodResources" in line]
    assert len(notes) == 1 and str(missing) in notes[0]
    assert "retrying" not in result.stderr and "giving up" not in result.stderr


def test_without_dry_run_a_node_name_is_still_required(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.dgx1_v100())
    monkeypatch.delenv("NODE_NAME", raising=False)
    result = runner.invoke(app, ["agent", "--once"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --node-name: ")
