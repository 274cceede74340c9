"""Experiment matrices with `data: [synthetic, imagenet]`: the runs, their ids, what they
submit, and the report's synthetic-vs-real gap."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.experiments.runner import submit_options
from launcher.experiments.spec import LoadedExperiment
from mpijob.jobspec.experiment_matrix import ExperimentError, expand, parse_experiment
from tests.launcher.experiments.test_experiment_report import record, store_with

BASE = {"name": "gap", "backend": "local",
        "matrix": {"model": "resnet50", "workers": 2, "gpus": 0, "image_size": 32}}


def test_synthetic_runs_keep_the_ids_they_had_before_the_data_axis():
    before = {r.run_id for r in expand(parse_experiment(BASE))}
    both = parse_experiment({**BASE, "data_dir": "records",
                             "matrix": {**BASE["matrix"], "data": ["synthetic", "imagenet"]}})
    runs = expand(both)
    assert [r.data for r in runs] == ["synthetic", "imagenet"]
    assert runs[0].run_id in before and runs[1].run_id not in before
    assert "real input" in runs[1].describe()


def test_imagenet_needs_a_data_dir_named_in_one_problem():
    with pytest.raises(ExperimentError) as err:
        parse_experiment({**BASE, "matrix": {**BASE["matrix"], "data": "imagenet"}})
    assert err.value.problems[0][0] == "data_dir"
    assert "TFRecords" in err.value.problems[0][1]
    with pytest.raises(ExperimentError) as err:
        parse_experiment({**BASE, "matrix": {**BASE["matrix"], "data": "cifar"}})
    assert "synthetic or imagenet" in str(err.value)


def test_a_real_input_run_submits_the_data_dir_relative_to_the_experiment(tmp_path):
    exp = parse_experiment({**BASE, "data_dir": "records",
                            "matrix": {**BASE["matrix"], "data": ["synthetic", "imagenet"]}})
    loaded = LoadedExperiment(exp, tmp_path / "gap.yaml", None)
    synthetic, real = (submit_options(loaded, r) for r in expand(exp))
    def data(options):
        return options.get("benchmark.data_name"), options.get("benchmark.data_dir")

    assert data(synthetic) == ("synthetic", None)
    assert data(real) == ("imagenet", str(tmp_path / "records"))


def test_the_report_shows_the_gap_between_synthetic_and_real_input(tmp_path):
    records = [record("s1", rate=100.0, data="synthetic", input_wait_share=0.0),
               record("s2", rate=100.0, rep=2),  # a row from before the data axis: synthetic
               record("r1", rate=60.0, data="imagenet", input_wait_share=0.4),
               record("r2", rate=80.0, data="imagenet", input_wait_share=0.2, rep=2)]
    store_with(tmp_path, records)
    result = CliRunner().invoke(app, ["experiment", "report", str(tmp_path / "res"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "Synthetic vs real input" in result.output and "0.70x" in result.output
    assert "DATA" in result.output  # the main table tells the two rows apart
    data = json.loads(CliRunner().invoke(app, ["experiment", "report", str(tmp_path / "res"),
                                               "-o", "json", "--no-plots"]).stdout)
    (gap,) = data["data_comparison"]
    assert gap["synthetic_images_per_sec"] == pytest.approx(100.0)
    assert gap["real_images_per_sec"] == pytest.approx(70.0)
    assert gap["real_over_synthetic"] == pytest.approx(0.7)
    assert gap["real_input_wait_share"] == pytest.approx(0.3)
