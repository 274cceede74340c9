"""`hvdk8s calibrate --preflight FILE`: the link bandwidths a cluster's preflights measured
become the calibration's, and the model then predicts with them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.formats import calibration_file
from mpijob.perf.perfmodel import Assumptions, allreduce_cost
from mpijob.scheduling.cluster import Node
from mpijob.scheduling.presets import preset

runner = CliRunner()


def _path(path, gbs, kind, expected=10.0):
    return {"check": "allreduce", "path": path, "busbw_gbs": gbs, "expected_gbs": expected,
            "link_kind": kind, "nodes": ["a", "b"], "ranks": 2}


def _job(*paths):
    return {"name": "j", "phase": "Succeeded",
            "preflight": {"verdict": "pass", "policy": "warn", "findings": [],
                          "paths": list(paths), "gpus": [], "notes": []}}


def test_preflight_figures_become_link_bandwidths(tmp_path):
    first = tmp_path / "a.json"
    first.write_text(json.dumps(_job(_path("nodes", 2.0, "net"), _path("node", 140.0, "nvlink"),
                                     _path("job", 1.0, "net"))))
    second = tmp_path / "b.json"  # a list of jobs, as `get` of several would be kept
    second.write_text(json.dumps([_job(_path("pair", 3.0, "net"))]))
    out = tmp_path / "cal.json"
    result = runner.invoke(app, ["calibrate", "--preflight", str(first), "--preflight",
                                 str(second), "-o", str(out)])
    assert result.exit_code == 0, result.output
    cal, _ = calibration_file.load(str(out))
    # The whole job's figure mixes links: left out; the net figures are averaged.
    assert cal.link_gbs("net") == 2.5 and cal.link_gbs("nvlink") == 140.0
    assert {link.kind: link.runs for link in cal.links} == {"net": 2, "nvlink": 1}

    # The model now prices the network at the measured 2.5 GB/s instead of 0.6 x 100 Gb/s.
    nodes = [Node(name=n, gpus=8, topology=preset("dgx-h100"), gpu_model="NVIDIA-H100",
                  network_gbps=100.0) for n in "ab"]
    pods = [(nodes[0], (0,)), (nodes[1], (0,))]
    plain = allreduce_cost(pods, 64 << 20, Assumptions(transport="tcp"))
    fitted = allreduce_cost(pods, 64 << 20, Assumptions(transport="tcp", calibration=cal))
    assert fitted.seconds_per_byte * 2.5e9 == pytest.approx(1.0)
    assert plain.seconds_per_byte < fitted.seconds_per_byte


def test_a_preflight_without_judged_figures_is_refused(tmp_path):
    cpu = tmp_path / "cpu.json"  # a CPU job's: measured, never judged against a link
    cpu.write_text(json.dumps(_job(_path("node", 0.1, None, expected=None))))
    result = runner.invoke(app, ["calibrate", "--preflight", str(cpu), "-o",
                                 str(tmp_path / "c.json")])
    assert result.exit_code == 2
    assert "no preflight figure judged against a link" in result.output
    assert not (tmp_path / "c.json").exists()


def test_nothing_to_calibrate_on_is_one_line():
    result = runner.invoke(app, ["calibrate"])
    assert result.exit_code == 2 and "--preflight FILE" in result.output


def test_with_result_directories_the_preflights_links_join_the_fitted_compute(tmp_path):
    from tests.paths import ROOT

    runs = ROOT / "benchmarks" / "gpu" / "recorded" / "h100-sxm5-example"
    figures = tmp_path / "job.json"
    figures.write_text(json.dumps(_job(_path("nodes", 4.0, "net"))))
    out = tmp_path / "cal.json"
    result = runner.invoke(app, ["calibrate", str(runs), "--preflight", str(figures),
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    cal, _ = calibration_file.load(str(out))
    assert {c.device for c in cal.compute} == {"H100"}  # from the runs
    assert cal.link_gbs("net") == 4.0  # from the preflight
    assert str(figures.resolve()) in cal.sources
