"""images/benchmark/hvd_cnn_bench.py: arguments, statistics, and real runs (TF + Horovod).

The argument and statistics tests import the program without TensorFlow (it imports TF
only when it runs); the runs are subprocesses, skipped where TF/Horovod/mpirun are absent.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.paths import ROOT
from tests.slow_set import slow_helper

REPO = ROOT
PROGRAM = REPO / "images" / "benchmark" / "hvd_cnn_bench.py"


def _load():
    spec = importlib.util.spec_from_file_location("hvd_cnn_bench", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hvd_cnn_bench"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _load()


# --------------------------------------------------------------------------- imports
def test_import_pulls_in_neither_tensorflow_nor_horovod():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('b', {str(PROGRAM)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['b'] = m\n"
        "spec.loader.exec_module(m)\n"
        "m.parse_args(['--device=cpu'])\n"
        "bad = [n for n in sys.modules if n.split('.')[0] in ('tensorflow', 'horovod', 'numpy')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_program_is_python38_syntax():
    # hvdk8s ships the file in a ConfigMap to stock images such as horovod/horovod
    # (Python 3.8): no 3.9+ syntax.
    ast.parse(PROGRAM.read_text(), feature_version=(3, 8))


# ------------------------------------------------------------------------- arguments
def test_nchw_on_cpu_is_rejected_with_a_clear_message(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--device=cpu", "--data_format=NCHW"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--data_format=NCHW needs --device=gpu" in err
    assert "NHWC" in err


def test_data_format_defaults_follow_the_device():
    assert bench.parse_args(["--device=gpu"]).data_format == "NCHW"
    assert bench.parse_args(["--device=cpu"]).data_format == "NHWC"
    assert bench.parse_args(["--device=GPU", "--data_format=nhwc"]).data_format == "NHWC"


def test_defaults_match_tf_cnn_benchmarks():
    a = bench.parse_args([])
    assert (a.model, a.batch_size, a.image_size) == ("resnet50", 64, 224)
    assert (a.num_batches, a.num_warmup_batches, a.display_every) == (100, 10, 10)
    assert (a.variable_update, a.device, a.optimizer) == ("horovod", "gpu", "sgd")
    assert a.use_fp16 is False and a.xla is False
    i = bench.parse_args(["--model=inception3"])
    assert (i.batch_size, i.image_size) == (32, 299)
    assert bench.parse_args(["--model=vgg16", "--batch_size=8", "--image_size=64"]).image_size == 64


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], False),
        (["--use_fp16"], True),
        (["--use_fp16=True"], True),
        (["--use_fp16=false"], False),
        (["--use_fp16", "--nouse_fp16"], False),
    ],
)
def test_absl_style_booleans(argv, expected):
    assert bench.parse_args(argv).use_fp16 is expected


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch_size=-1"], "--batch_size must be >= 1"),
        (["--num_batches=0"], "--num_batches must be >= 1"),
        (["--num_warmup_batches=-1"], "--num_warmup_batches must be >= 0"),
        (["--display_every=0"], "--display_every must be >= 1"),
        (["--model=inception3", "--image_size=64"], "--image_size must be >= 75"),
        (["--image_size=16"], "--image_size must be >= 32"),
        (["--learning_rate=0"], "--learning_rate must be > 0"),
        (["--model=alexnet"], "invalid choice"),
        (["--variable_update=replicated"], "invalid choice"),
        (["--xla=maybe"], "expected true or false"),
    ],
)
def test_invalid_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_thread_flags_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("HVDK8S_INTRA_OP_THREADS", "3")
    monkeypatch.setenv("HVDK8S_INTER_OP_THREADS", "2")
    a = bench.parse_args(["--device=cpu"])
    assert bench.thread_settings(a, local_size=4) == (3, 2)
    assert bench.thread_settings(bench.parse_args(["--num_intra_threads=1"]), 4) == (1, 2)


def test_auto_threads_divide_a_shared_cpu_set(monkeypatch):
    monkeypatch.setattr(bench, "_cgroup_cpu_limit", lambda: None)
    cpus = set(range(8))
    monkeypatch.setattr(bench.os, "sched_getaffinity", lambda pid: set(cpus))
    assert bench.auto_intra_threads(local_size=2) == 4
    assert bench.auto_intra_threads(local_size=16) == 1  # never 0


def test_auto_threads_keep_a_bound_ranks_own_cores(monkeypatch):
    # mpirun --bind-to core: the rank's set is a strict subset of its parent's.
    monkeypatch.setattr(bench, "_cgroup_cpu_limit", lambda: None)
    me = os.getpid()
    monkeypatch.setattr(
        bench.os, "sched_getaffinity", lambda pid: {2, 3} if pid in (0, me) else set(range(8))
    )
    assert bench.auto_intra_threads(local_size=4) == 2


def test_auto_threads_respect_a_cgroup_cpu_limit(monkeypatch):
    monkeypatch.setattr(bench, "_cgroup_cpu_limit", lambda: 4.0)
    monkeypatch.setattr(bench.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert bench.auto_intra_threads(local_size=2) == 2
    a = bench.parse_args(["--device=gpu"])
    assert bench.thread_settings(a, 2) == (0, 0)  # GPU: TensorFlow's defaults


# ------------------------------------------------------------------------ statistics
def test_perf_timing_on_hand_computed_numbers():
    # batch 10, steps of 1, 0.5, 0.25, 0.5 s: per-step rates 10, 20, 40, 20 images/s.
    t = bench.perf_timing(10, [1.0, 0.5, 0.25, 0.5])
    # images/sec = batch / mean time = 10 / 0.5625, not the mean rate (22.5).
    assert t.images_per_sec == pytest.approx(17.777777777)
    # rates' population std: sqrt(((-12.5)^2 + 2.5^2 + 17.5^2 + 2.5^2) / 4) = sqrt(118.75);
    # +/- is that over sqrt(4).
    assert t.uncertainty == pytest.approx(math.sqrt(118.75) / 2)
    # median rate 20; absolute deviations 10, 0, 20, 0 -> median 5; x 1.4826.
    assert t.jitter == pytest.approx(7.413)
    assert bench.format_step_line(10, t, 6.89549) == (
        "10\timages/sec: 17.8 +/- 5.4 (jitter = 7.4)\t6.895"
    )


def test_perf_timing_agrees_with_the_numpy_formulas_of_tf_cnn_benchmarks():
    np = pytest.importorskip("numpy")
    times = [0.31, 0.29, 0.33, 0.30, 0.45, 0.28, 0.30]
    speeds = 16 / np.array(times)
    t = bench.perf_timing(16, times)
    assert t.images_per_sec == pytest.approx(16 / np.mean(times))
    assert t.uncertainty == pytest.approx(np.std(speeds) / np.sqrt(len(speeds)))
    assert t.jitter == pytest.approx(1.4826 * np.median(np.abs(speeds - np.median(speeds))))


def test_perf_timing_edge_cases():
    one = bench.perf_timing(8, [0.5])
    assert (one.images_per_sec, one.uncertainty, one.jitter) == (16.0, 0.0, 0.0)
    assert bench.format_timing(one) == "images/sec: 16.0 +/- 0.0 (jitter = 0.0)"
    with pytest.raises(ValueError):
        bench.perf_timing(8, [])
    with pytest.raises(ValueError):
        bench.perf_timing(8, [0.1, 0.0])


def test_display_steps_and_total():
    shown = [i + 1 for i in range(30) if bench.should_display(i, 10)]
    assert shown == [1, 10, 20, 30]
    # tf_cnn_benchmarks with horovod: this rank's rate times the number of ranks.
    assert bench.total_images_per_sec(8, 20, 10.0, 2) == pytest.approx(32.0)
    assert bench.format_total(32.0) == ["-" * 64, "total images/sec: 32.00", "-" * 64]
    with pytest.raises(ValueError):
        bench.rank_images_per_sec(8, 20, 0.0)


def test_result_line_is_standard_json_and_parses_with_a_rank_tag():
    line = bench.result_line({"model": "resnet50", "final_loss": float("nan"), "r": [1.5]})
    assert line.startswith("HVDK8S_RESULT ")
    json.loads(line[len("HVDK8S_RESULT "):])  # no NaN token
    assert bench.parse_result_line("[1,0]<stdout>:" + line + "[1,0]<stdout>:") == {
        "final_loss": None, "model": "resnet50", "r": [1.5]
    }
    assert bench.parse_result_line("total images/sec: 3") is None


def test_header_has_tf_cnn_benchmarks_lines():
    a = bench.parse_args(["--device=cpu", "--batch_size=8", "--num_batches=20"])
    lines = bench.header_lines(a, world_size=2, intra=1, inter=0, tf_version="2.15.1")
    assert lines[0] == "TensorFlow:  2.15"
    for expected in (
        "Model:       resnet50",
        "Dataset:     imagenet (synthetic)",
        "Mode:        training",
        "Batch size:  16 global",
        "             8 per device",
        "Num batches: 20",
        "Devices:     ['horovod/cpu:0', 'horovod/cpu:1']",
        "Data format: NHWC",
        "Optimizer:   sgd",
        "Variables:   horovod",
        "Threads:     intra=1 inter=default",
    ):
        assert expected in lines
    assert lines[-1] == "=========="


# ------------------------------------------------------------------------- real runs
def _installed(*modules: str) -> bool:
    """Found on the path, without importing TensorFlow (seconds, and at collection)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ModuleNotFoundError:  # a parent package is missing
        return False


needs_tf = pytest.mark.skipif(not _installed("tensorflow"), reason="TensorFlow not installed")
needs_hvd = pytest.mark.skipif(
    not _installed("tensorflow", "horovod.tensorflow"),
    reason="TensorFlow and Horovod (horovod.tensorflow) not installed",
)


@slow_helper
def run_with_tensorflow(argv: list[str], timeout: float = 300,
                        **kwargs) -> subprocess.CompletedProcess:
    """A process that runs TensorFlow (the benchmark, or code importing it): the slow set."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)


TINY = ["--image_size=32", "--batch_size=2", "--num_batches=3", "--num_warmup_batches=1",
        "--display_every=1", "--device=cpu"]
STEP = re.compile(
    r"^(\d+)\timages/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)\t-?\d+\.\d{3}$"
)


def _env() -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("HVDK8S_INTRA_OP_THREADS", None)
    env.pop("HVDK8S_INTER_OP_THREADS", None)
    return env


def _check_output(stdout: str, world_size: int, num_batches: int = 3) -> dict:
    lines = stdout.splitlines()
    assert "Dataset:     imagenet (synthetic)" in lines
    assert "Mode:        training" in lines
    steps = [int(m.group(1)) for m in map(STEP.match, lines) if m]
    assert steps == list(range(1, num_batches + 1))
    total_at = [i for i, line in enumerate(lines) if line.startswith("total images/sec: ")]
    assert len(total_at) == 1, "only rank 0 prints the total"
    i = total_at[0]
    assert lines[i - 1] == lines[i + 1] == "-" * 64
    results = [bench.parse_result_line(line) for line in lines if "HVDK8S_RESULT " in line]
    assert len(results) == 1
    r = results[0]
    assert r["world_size"] == world_size
    assert len(r["per_rank_images_per_sec"]) == world_size
    assert all(x > 0 for x in r["per_rank_images_per_sec"])
    assert r["total_images_per_sec"] == pytest.approx(float(lines[i].split(": ")[1]), abs=0.01)
    assert r["total_images_per_sec"] == pytest.approx(
        world_size * r["per_rank_images_per_sec"][0], rel=1e-6
    )
    assert r["step_time_mean_s"] > 0 and r["num_batches"] == num_batches
    return r


@pytest.mark.horovod
@needs_hvd
def test_single_process_horovod_run():
    out = run_with_tensorflow(
        [sys.executable, str(PROGRAM), "--model=resnet50", "--variable_update=horovod", *TINY],
        env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Devices:     ['horovod/cpu:0']" in out.stdout
    r = _check_output(out.stdout, world_size=1)
    assert (r["model"], r["batch_size"], r["image_size"]) == ("resnet50", 2, 32)
    assert (r["precision"], r["device"], r["xla"]) == ("fp32", "cpu", False)
    assert r["horovod_version"]


@needs_tf
def test_independent_mode_runs_without_horovod():
    # A Python that cannot import horovod still runs --variable_update=independent.
    code = (
        "import sys; sys.modules['horovod'] = None; sys.modules['horovod.tensorflow'] = None\n"
        f"sys.argv = ['hvd_cnn_bench.py'] + {['--model=trivial', '--variable_update=independent', *TINY]!r}\n"
        f"exec(compile(open({str(PROGRAM)!r}).read(), 'hvd_cnn_bench.py', 'exec'))\n"
    )
    out = run_with_tensorflow([sys.executable, "-c", code], env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    r = _check_output(out.stdout, world_size=1)
    assert r["variable_update"] == "independent" and r["horovod_version"] is None
    assert "Devices:     ['/cpu:0']" in out.stdout


@needs_tf
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_gpu_requested_without_a_gpu_fails_clearly():
    out = run_with_tensorflow(
        [sys.executable, str(PROGRAM), "--model=trivial", "--variable_update=independent",
         "--device=gpu", "--data_format=NHWC"], env=_env())
    assert out.returncode == 2
    assert "--device=gpu, but TensorFlow sees no GPU" in out.stderr


@pytest.mark.slow
@pytest.mark.horovod
@needs_hvd
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (OpenMPI) not installed")
def test_two_rank_mpirun_run():
    cmd = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe",
           "-x", "TF_CPP_MIN_LOG_LEVEL", "-x", "PYTHONUNBUFFERED", "-x", "PATH",
           # The trivial model: this is about Horovod across processes (allreduce,
           # broadcast, allgather of the rates), and two ResNet traces cost a minute.
           sys.executable, str(PROGRAM), "--model=trivial", "--variable_update=horovod", *TINY]
    out = run_with_tensorflow(cmd, env=_env())
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "Devices:     ['horovod/cpu:0', 'horovod/cpu:1']" in out.stdout
    assert "Batch size:  4 global" in out.stdout
    r = _check_output(out.stdout, world_size=2)
    assert r["global_batch_size"] == 4


# Run in a fresh interpreter, after the benchmark's own choice of Keras (prefer_keras_2): under
# TensorFlow >= 2.16 this process's tf.keras may already be Keras 3, which the benchmark never
# runs.
_DROP_BIASES = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bench", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
sys.modules["bench"] = bench
spec.loader.exec_module(bench)
bench.prefer_keras_2()
import numpy as np
import tensorflow as tf
inputs = tf.keras.Input((8, 8, 3))
x = tf.keras.layers.Conv2D(4, 3, name="conv_bn")(inputs)
x = tf.keras.layers.BatchNormalization()(x)
x = tf.keras.layers.Conv2D(4, 3, name="conv_relu")(x)  # feeds no batch norm: kept
x = tf.keras.layers.ReLU()(x)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(5)(tf.keras.layers.Flatten()(x)))
conv = model.get_layer("conv_bn")
conv.bias.assign(tf.random.normal(conv.bias.shape) * 3.0)  # far from zero
images = tf.random.normal((6, 8, 8, 3))
before = model(images, training=True)
count = len(model.trainable_variables)
dropped = bench.drop_redundant_conv_biases(tf, model)
assert dropped == 1, dropped
assert len(model.trainable_variables) == count - 1
assert model.get_layer("conv_relu").use_bias
after = model(images, training=True)
np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-4, atol=1e-4)
print("unchanged")
"""


@needs_tf
def test_dropping_biases_before_batch_norm_changes_nothing_in_training():
    out = run_with_tensorflow([sys.executable, "-c", _DROP_BIASES, str(PROGRAM)],
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert out.returncode == 0 and "unchanged" in out.stdout, (out.stdout + out.stderr)[-3000:]
