"""The benchmark on real input: ImageNet TFRecords (scripts/make_imagenet_tfrecords.py)
through tf_cnn_benchmarks' pipeline, each Horovod rank reading its own shard."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.images.test_benchmark_program import (
    PROGRAM,
    REPO,
    _env,
    bench,
    needs_hvd,
    run_with_tensorflow,
)

runner = CliRunner()
SHARDS = 4


def _generator():
    spec = importlib.util.spec_from_file_location("make_imagenet_tfrecords",
                                                  REPO / "scripts" / "make_imagenet_tfrecords.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def records(tmp_path_factory, tensorflow):
    out = tmp_path_factory.mktemp("imagenet")
    _generator().write(str(out), records=64, shards=SHARDS, seed=0)
    return out


def test_imagenet_needs_a_data_dir_and_a_data_dir_needs_imagenet():
    for argv in (["--data_name=imagenet"], ["--data_dir=/data"]):
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(argv)
        assert exit_info.value.code == 2


def test_shards_are_disjoint_and_cover_every_file():
    files = [f"train-{i:05d}-of-00008" for i in range(8)]
    for world in (1, 2, 3, 8):
        shards = [bench.shard_of(files, r, world) for r in range(world)]
        assert sorted(f for s in shards for f in s) == files
        assert sum(len(s) for s in shards) == len(set(f for s in shards for f in s))


def test_input_wait_share():
    assert bench.input_wait_share([0.1, 0.3], [1.0, 1.0]) == pytest.approx(0.2)
    assert bench.input_wait_share([], []) == 0.0


def test_generated_records_have_the_layout_tf_cnn_benchmarks_reads(records, tensorflow):
    tf = tensorflow
    files = bench.train_files(str(records))
    assert [p.rsplit("/", 1)[1] for p in files] == [f"train-{i:05d}-of-{SHARDS:05d}"
                                                    for i in range(SHARDS)]
    sizes, labels = set(), []
    for serialized in tf.data.TFRecordDataset(files):
        jpeg, label, bbox = bench.parse_example(tf, serialized)
        sizes.add(tuple(tf.image.extract_jpeg_shape(jpeg).numpy()[:2]))
        labels.append(int(label))
        assert bbox.shape == (1, 1, 4)
        image = bench.train_image(tf, jpeg, bbox, 32, seed=1)
        assert image.shape == (32, 32, 3)
        assert -1.0 <= float(tf.reduce_min(image)) and float(tf.reduce_max(image)) <= 1.0
    assert len(sizes) >= 3  # a few sizes, as ImageNet's photos vary
    assert sorted(labels) == list(range(64))  # 0-based, one per record


@pytest.mark.slow
@pytest.mark.horovod
@needs_hvd
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (OpenMPI) not installed")
def test_two_horovod_ranks_read_different_shards_with_the_same_seed(records):
    cmd = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe",
           "-x", "TF_CPP_MIN_LOG_LEVEL", "-x", "PYTHONUNBUFFERED", "-x", "PATH",
           sys.executable, str(PROGRAM), "--model=trivial", "--variable_update=horovod",
           "--image_size=32", "--batch_size=4", "--num_batches=3", "--num_warmup_batches=1",
           "--device=cpu", "--seed=7", "--data_name=imagenet", f"--data_dir={records}"]
    out = run_with_tensorflow(cmd, timeout=600, env=_env())
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "Dataset:     imagenet (real)" in out.stdout
    assert f"input: real ({records}), input wait: " in out.stdout
    (r,) = [bench.parse_result_line(x) for x in out.stdout.splitlines() if "HVDK8S_RESULT" in x]
    assert r["input"] == "real" and 0 <= r["input_wait_share"] < 1
    files = r["per_rank_input_files"]
    assert files == [["train-00000-of-00004", "train-00002-of-00004"],
                     ["train-00001-of-00004", "train-00003-of-00004"]]
    # The generator writes record i to file i % SHARDS with label i: each rank's first
    # batch comes from its own files only, so the ranks' batches differ.
    for rank, labels in enumerate(r["per_rank_first_labels"]):
        assert len(labels) == 4
        assert {f"train-{i % SHARDS:05d}-of-{SHARDS:05d}" for i in labels} <= set(files[rank])
    assert not set(r["per_rank_first_labels"][0]) & set(r["per_rank_first_labels"][1])


def test_local_submit_refuses_a_directory_without_records(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["submit", "mpi", "--backend", "local", "--workers", "2",
                                 "--gpus", "0", "--data-name", "imagenet",
                                 "--benchmark-data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no ImageNet TFRecords (train-*-of-*) there" in result.output


def test_imagenet_without_a_data_dir_is_one_line():
    result = runner.invoke(app, ["submit", "mpi", "--data-name", "imagenet", "--dry-run"])
    assert result.exit_code == 2
    assert "--benchmark-data-dir" in result.output.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.horovod
@needs_hvd
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (OpenMPI) not installed")
def test_done_when_local_submit_runs_on_the_generated_records(records, tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, [
        "submit", "mpi", "--backend", "local", "--name", "real", "--workers", "2", "--gpus", "0",
        "--data-name", "imagenet", "--benchmark-data-dir", str(records), "--image-size", "32",
        "--batch-size", "2", "--num-batches", "2", "--num-warmup-batches", "1", "--wait"])
    assert result.exit_code == 0, result.output[-3000:]
    assert "total images/sec: " in result.output
    assert "input: real" in result.output and "% of step time" in result.output
    got = runner.invoke(app, ["get", "real", "--backend", "local", "-o", "json"])
    assert json.loads(got.stdout)["phase"] == "Succeeded"
