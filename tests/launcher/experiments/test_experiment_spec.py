"""Experiment files: strict validation with one-line errors, and the matrix they expand to."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.errors import UsageError
from launcher.experiments.spec import load_experiment
from mpijob.jobspec.experiment_matrix import MAX_NAME_LENGTH, expand, parse_experiment
from mpijob.jobspec.spec import BENCHMARK_MODELS, build_spec
from tests.paths import ROOT

EXAMPLES = ROOT / "benchmarks" / "experiments"
GOOD = {"name": "exp", "backend": "local",
        "matrix": {"model": "resnet50", "workers": [1, 2], "gpus": 0}}


def write(tmp_path: Path, data, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def with_matrix(**changes) -> dict:
    return {**GOOD, "matrix": {**GOOD["matrix"], **changes}}


@pytest.mark.parametrize("name", ["topology-vs-regular", "scaling", "local-cpu"])
def test_example_files_are_valid(name):
    loaded = load_experiment(EXAMPLES / f"{name}.yaml")
    assert loaded.experiment.name == name
    assert loaded.runs
    if loaded.cluster is not None:
        assert loaded.cluster.is_file()


def test_topology_example_compares_the_two_policies_on_four_single_gpu_workers():
    runs = load_experiment(EXAMPLES / "topology-vs-regular.yaml").runs
    assert {r.model for r in runs} == {"vgg16", "resnet50"}
    assert {r.placement for r in runs} == {"topology", "spread"}
    assert {(r.workers, r.gpus, r.batch_size) for r in runs} == {(4, 1, 64)}


@pytest.mark.parametrize("data, key, expected", [
    (with_matrix(workers=[1, "two"]), "matrix.workers[1]",
     "expected a positive integer, got 'two'"),
    (with_matrix(workers=[1, 0]), "matrix.workers[1]", "expected a positive integer, got 0"),
    (with_matrix(workers=[True]), "matrix.workers[0]", "expected a positive integer, got True"),
    (with_matrix(workers=[]), "matrix.workers", "expected at least one value"),
    (with_matrix(workers=[2, 2]), "matrix.workers[1]", "repeats matrix.workers[0]"),
    (with_matrix(workers={"a": 1}), "matrix.workers", "or a list of them"),
    (with_matrix(model="resnet5"), "matrix.model[0]", "expected one of vgg16"),
    (with_matrix(gpus=-1), "matrix.gpus[0]", "expected an integer >= 0"),
    (with_matrix(placement="nearest"), "matrix.placement[0]",
     "expected one of topology, binpack, spread, got 'nearest'"),
    (with_matrix(precision="fp8"), "matrix.precision[0]", "expected fp32 or fp16"),
    (with_matrix(batch_size=0), "matrix.batch_size[0]", "expected an integer from 1 to 4096"),
    (with_matrix(image_size=16), "matrix.image_size[0]", "expected an integer from 32 to 1024"),
    (with_matrix(xla="yes"), "matrix.xla[0]", "expected true or false, got 'yes'"),
    (with_matrix(colour="red"), "matrix.colour", "unknown key; expected one of model, workers"),
    ({**GOOD, "matrix": {"model": "vgg16", "gpus": 1}}, "matrix.workers",
     "missing; expected a positive integer"),
    ({k: v for k, v in GOOD.items() if k != "backend"}, "backend",
     "missing; expected local or kubernetes"),
    ({**GOOD, "backend": "docker"}, "backend", "expected local or kubernetes, got 'docker'"),
    ({**GOOD, "name": "My_Exp"}, "name", "expected a DNS-1035 label"),
    ({**GOOD, "name": "x" * (MAX_NAME_LENGTH + 1)}, "name", "at most 30 characters"),
    ({**GOOD, "repetitions": 0}, "repetitions", "expected an integer from 1 to 999, got 0"),
    ({**GOOD, "timeout": "10m"}, "timeout", "expected a positive number of seconds"),
    ({**GOOD, "parallel": "2"}, "parallel", "expected a positive integer"),
    ({**GOOD, "env": {"A": 1}}, "env.A", "expected a mapping of VARIABLE: string value"),
    ({**GOOD, "matrix": ["resnet50"]}, "matrix", "expected a mapping of matrix keys"),
    ({**GOOD, "workers": 2}, "workers", "unknown key; expected one of name"),
])
def test_bad_file_names_the_file_the_key_and_what_is_expected(tmp_path, data, key, expected):
    path = write(tmp_path, data)
    with pytest.raises(UsageError) as err:
        load_experiment(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key}: ")
    assert expected in message
    assert "\n" not in message
    assert err.value.exit_code == 2


def test_several_problems_in_one_line(tmp_path):
    path = write(tmp_path, with_matrix(workers=["x"], precision="fp8", batch_size=0))
    with pytest.raises(UsageError) as err:
        load_experiment(path)
    message = str(err.value)
    assert "matrix.workers[0]" in message and "matrix.precision[0]" in message
    assert "matrix.batch_size[0]" in message and "\n" not in message


def test_more_problems_than_the_line_holds_are_all_listed_one_per_line(tmp_path):
    data = {**with_matrix(workers=["x"], precision="fp8", batch_size=0, gpus=-1, placement="near"),
            "backend": "docker", "repetitions": 0}
    path = write(tmp_path, data)
    with pytest.raises(UsageError) as err:
        load_experiment(path)
    summary, *lines = str(err.value).split("\n")
    assert summary.startswith(f"{path}: ") and "(and 4 more, all listed below)" in summary
    assert len(lines) == 7 and all(line.startswith(f"{path}: ") for line in lines)
    keys = {line[len(f"{path}: "):].split(": ")[0] for line in lines}
    assert keys == {"backend", "repetitions", "matrix.workers[0]", "matrix.gpus[0]",
                    "matrix.placement[0]", "matrix.precision[0]", "matrix.batch_size[0]"}
    assert f"{path}: matrix.placement[0]: expected one of topology, binpack, spread, got 'near'" in lines
    result = CliRunner().invoke(app, ["experiment", "run", "--dry-run", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr == f"error: {err.value}\n"


@pytest.mark.parametrize("text, expected", [
    ("name: [unclosed\n", "not valid YAML at line 2 column 1: expected ',' or ']'"),
    ("name: a\nname: b\nbackend: local\n", "not valid YAML at line 2 column 1: key 'name' appears twice"),
    ("", "got an empty file"),
    ("- 1\n- 2\n", "expected a mapping of experiment settings"),
])
def test_unreadable_yaml_is_one_line_with_its_place(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as err:
        load_experiment(path)
    assert str(err.value).startswith(f"{path}: ")
    assert expected in str(err.value)


def test_missing_file_and_missing_cluster_file(tmp_path):
    with pytest.raises(UsageError, match="no such experiment file"):
        load_experiment(tmp_path / "nope.yaml")
    path = write(tmp_path, {**GOOD, "cluster": "clusters/none.yaml"})
    with pytest.raises(UsageError, match=r"cluster: no such file .*clusters/none.yaml"):
        load_experiment(path)


def test_cluster_path_is_relative_to_the_experiment_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text("nodes: []\n")
    loaded = load_experiment(write(tmp_path / "sub", {**GOOD, "cluster": "c.yaml"}))
    assert loaded.cluster == tmp_path / "sub" / "c.yaml"


def test_cli_bad_file_exits_2_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    path = write(tmp_path, with_matrix(workers=[1, "two"]))
    result = CliRunner().invoke(app, ["experiment", "run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [f"error: {path}: matrix.workers[1]: expected a positive integer, got 'two'"]
    assert not (tmp_path / "out").exists()


def test_cli_bad_limit_and_backend_exit_2(tmp_path):
    path = write(tmp_path, GOOD)
    result = CliRunner().invoke(app, ["experiment", "run", str(path), "--limit", "0"])
    assert result.exit_code == 2 and "--limit" in result.output
    result = CliRunner().invoke(app, ["experiment", "run", str(path), "--backend", "slurm"])
    assert result.exit_code == 2 and "--backend" in result.output


# ------------------------------------------------------------------------ the matrix
def test_matrix_is_the_product_repetition_by_repetition():
    exp = parse_experiment({**GOOD, "repetitions": 2, "matrix": {
        "model": ["vgg16", "resnet50"], "workers": [1, 2, 4], "gpus": 1,
        "placement": ["topology", "spread"]}})
    runs = expand(exp)
    assert len(runs) == 2 * 3 * 2 * 2
    assert [r.repetition for r in runs] == [1] * 12 + [2] * 12
    first = runs[:12]
    assert {(r.model, r.workers, r.placement) for r in first} == {
        (m, w, p) for m in ("vgg16", "resnet50") for w in (1, 2, 4) for p in ("topology", "spread")}
    # A repetition is the same configuration: same hash, another run id.
    assert [r.config_hash for r in runs[:12]] == [r.config_hash for r in runs[12:]]
    assert len({r.run_id for r in runs}) == 24


def test_run_ids_are_stable_and_change_with_what_changes_the_measurement():
    ids = [r.run_id for r in expand(parse_experiment(GOOD))]
    assert ids == [r.run_id for r in expand(parse_experiment(dict(GOOD)))]
    for change in ({"image": "other:1"}, {"env": {"NCCL_DEBUG": "INFO"}}, {"backend": "kubernetes"}):
        other = [r.run_id for r in expand(parse_experiment({**GOOD, **change}))]
        assert set(other).isdisjoint(ids), change
    # Not part of the measurement: the timeout and the description.
    same = [r.run_id for r in expand(parse_experiment({**GOOD, "timeout": 5, "description": "x"}))]
    assert same == ids


@settings(max_examples=40, deadline=None)
@given(
    name=st.from_regex(r"[a-z]([a-z0-9-]{0,28}[a-z0-9])?", fullmatch=True),
    workers=st.lists(st.integers(1, 4096), min_size=1, max_size=3, unique=True),
    models=st.lists(st.sampled_from(BENCHMARK_MODELS), min_size=1, max_size=2, unique=True),
    repetitions=st.integers(1, 999),
)
def test_every_run_id_is_a_valid_job_name(name, workers, models, repetitions):
    exp = parse_experiment({"name": name, "backend": "kubernetes", "repetitions": repetitions,
                            "matrix": {"model": models, "workers": workers, "gpus": 1}})
    # The last repetition has the longest id; the job spec checks every derived name.
    for run in [r for r in expand(exp) if r.repetition == repetitions]:
        spec = build_spec(name=run.run_id, workers=run.workers, gpus_per_worker=1)
        assert spec.name == run.run_id
