#!/usr/bin/env python3
"""tf_cnn_benchmarks-compatible ImageNet training benchmark, TensorFlow 2 style.

Trains a `tf.keras.applications` model (weights=None) on synthetic ImageNet-shaped data
generated once on the device, or (--data_name=imagenet --data_dir DIR) on ImageNet
TFRecords through tf_cnn_benchmarks' input pipeline, each rank reading its own shard;
all-reducing gradients with Horovod
(hvd.DistributedGradientTape: NCCL on GPU when Horovod has it, MPI or Gloo on CPU), and
prints what tf_cnn_benchmarks prints (header, `<step>\\timages/sec: X +/- Y (jitter = Z)
\\t<loss>` lines, `total images/sec: N`), then one machine-readable line:

    HVDK8S_RESULT {"model": ..., "total_images_per_sec": ..., ...}

Example, 2 ranks on CPU:
    mpirun -np 2 python hvd_cnn_bench.py --model=resnet50 --batch_size=8 \\
        --num_batches=20 --variable_update=horovod --device=cpu --data_format=NHWC

One self-contained file on purpose: hvdk8s ships it to pods in a ConfigMap, next to
nothing, and stock images (horovod/horovod, Python 3.8) must run it; so it keeps to
Python 3.8 syntax. Importing it imports neither TensorFlow nor Horovod: argument
checking and the statistics below are pure Python and unit-tested on their own.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

# Where images/train/Dockerfile installs this program (hvdk8s pods run the ConfigMap copy
# at mpijob.k8s.command.BENCHMARK_IN_POD instead, which works with any image).
IN_IMAGE_PATH = "/opt/hvdk8s/hvd_cnn_bench.py"
RESULT_PREFIX = "HVDK8S_RESULT "
# tf_cnn_benchmarks' defaults: 100 timed batches after max(10, autotune warm-up) = 10.
DEFAULT_NUM_BATCHES = 100
DEFAULT_NUM_WARMUP_BATCHES = 10
DEFAULT_DISPLAY_EVERY = 10
IMAGENET_TRAIN_EXAMPLES = 1281167
NUM_CLASSES = 1000

# name -> (tf.keras.applications class, native image size, tf_cnn_benchmarks' default
# per-device batch size). Keras' ResNet50/101/152 are ResNet v1 (stride in the first 1x1
# convolution of a block), the variant tf_cnn_benchmarks calls `resnet50`.
MODELS = {
    "vgg16": ("VGG16", 224, 64),
    "vgg19": ("VGG19", 224, 64),
    "resnet50": ("ResNet50", 224, 64),
    "resnet101": ("ResNet101", 224, 32),
    "resnet152": ("ResNet152", 224, 32),
    "resnet50_v2": ("ResNet50V2", 224, 64),
    "resnet101_v2": ("ResNet101V2", 224, 32),
    "resnet152_v2": ("ResNet152V2", 224, 32),
    "inception3": ("InceptionV3", 299, 32),
    "mobilenet": ("MobileNet", 224, 32),
    # tf_cnn_benchmarks' `trivial` (flatten, dense 1, dense 4096): the plumbing, fast.
    "trivial": (None, 224, 32),
}
# Smallest input tf.keras.applications accepts without pretrained weights.
MIN_IMAGE_SIZE = {"inception3": 75}
DEFAULT_MIN_IMAGE_SIZE = 32


# ------------------------------------------------------------------------- statistics
# Defined as tensorflow/benchmarks scripts/tf_cnn_benchmarks/benchmark_cnn.py defines them
# (get_perf_timing, get_perf_timing_str, the `total images/sec` after the loop), so the
# two programs' figures compare line by line:
# - images/sec is batch_size / mean(step time): the rate over the timed steps so far,
#   not the mean of per-step rates;
# - "+/-" is the standard error of the per-step rates: their population std (NumPy's
#   default ddof=0) over sqrt(number of steps);
# - jitter is 1.4826 x the median absolute deviation of the per-step rates (1.4826
#   makes a MAD estimate the std of normally distributed values);
# - total images/sec is world_size x num_steps x batch_size / wall time of the whole
#   timed loop on the reporting rank, i.e. that rank's rate times the number of ranks.

LOSS_DIGITS = 3  # tf_cnn_benchmarks prints the loss with 3 decimals
SEPARATOR = "-" * 64
MAD_TO_STD = 1.4826


@dataclass(frozen=True)
class PerfTiming:
    images_per_sec: float
    uncertainty: float
    jitter: float


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def perf_timing(batch_size: int, step_times: Sequence[float]) -> PerfTiming:
    """Rate, its standard error and its jitter over per-step wall times in seconds."""
    if not step_times:
        raise ValueError("need at least one step time")
    if min(step_times) <= 0:
        raise ValueError("step times must be positive")
    n = len(step_times)
    speeds = [batch_size / t for t in step_times]
    mean_speed = math.fsum(speeds) / n
    std_speed = math.sqrt(math.fsum((s - mean_speed) ** 2 for s in speeds) / n)
    med = _median(speeds)
    return PerfTiming(
        images_per_sec=batch_size / (math.fsum(step_times) / n),
        uncertainty=std_speed / math.sqrt(n),
        jitter=MAD_TO_STD * _median([abs(s - med) for s in speeds]),
    )


def format_timing(t: PerfTiming) -> str:
    return (
        f"images/sec: {t.images_per_sec:.1f} +/- {t.uncertainty:.1f} "
        f"(jitter = {t.jitter:.1f})"
    )


def format_step_line(step: int, timing: PerfTiming, loss: float) -> str:
    """`step` is 1-based, as tf_cnn_benchmarks prints it."""
    return f"{step}\t{format_timing(timing)}\t{loss:.{LOSS_DIGITS}f}"


def should_display(step_index: int, display_every: int) -> bool:
    """tf_cnn_benchmarks prints the first timed step, then every display_every-th."""
    return step_index == 0 or (step_index + 1) % display_every == 0


def rank_images_per_sec(batch_size: int, num_steps: int, loop_seconds: float) -> float:
    if loop_seconds <= 0:
        raise ValueError("loop time must be positive")
    return num_steps * batch_size / loop_seconds


def total_images_per_sec(
    batch_size: int, num_steps: int, loop_seconds: float, world_size: int
) -> float:
    """What tf_cnn_benchmarks prints as `total images/sec` with --variable_update=horovod."""
    return world_size * rank_images_per_sec(batch_size, num_steps, loop_seconds)


def format_total(images_per_sec: float) -> list[str]:
    return [SEPARATOR, f"total images/sec: {images_per_sec:.2f}", SEPARATOR]


def parse_result_line(line: str) -> dict | None:
    """The JSON of a `HVDK8S_RESULT ` line. Text around it is ignored: mpirun
    --tag-output puts a rank tag before it (and OpenMPI 4.1 another one after it)."""
    at = line.find(RESULT_PREFIX)
    if at < 0:
        return None
    value, _ = json.JSONDecoder().raw_decode(line[at + len(RESULT_PREFIX):].lstrip())
    return value


# ----------------------------------------------------------------- reports to hvdk8s
# `HVDK8S_REPORT {json}` lines, as hvdk8s_report.py (beside this file) writes them and
# launcher/formats/rank_reports.py reads them. A copy of its emitter, not an import: this
# file travels alone in a ConfigMap, and a second shipped file would need every renderer
# to carry it; tests/images/test_benchmark_reports.py keeps the two writing the same lines.
REPORT_PREFIX = "HVDK8S_REPORT "
REPORT_SECONDS = 5.0
HEARTBEAT_SECONDS = 2.0
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK")
_report_lock = threading.Lock()


def own_rank() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def report(kind: str, stream=None, **fields) -> None:
    record = {"kind": kind, "rank": own_rank(), "time": time.time(),
              "host": socket.gethostname()}  # a pod's name: get names the rank's pod
    record.update({key: _json_safe(value) for key, value in fields.items()})
    line = REPORT_PREFIX + json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
    out = stream or sys.stdout
    with _report_lock:  # the heartbeat thread's line never splits another
        out.write(line)
        out.flush()


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


class Progress:
    """Every rank's `progress` report, at most every HVDK8S_REPORT_SECONDS: steps done of
    planned, the job's images/sec over the interval and since the warm-up (from this
    rank's step times: in an all-reduce every rank runs at the job's pace), this rank's
    mean step time and its own compute time (which shows a straggler)."""

    def __init__(self, total_steps: int, images_per_step: int, stream=None):
        self.total_steps = total_steps
        self.images_per_step = images_per_step
        self.every = _env_seconds("HVDK8S_REPORT_SECONDS", REPORT_SECONDS)
        self.stream = stream
        self.step = 0
        self._last: float | None = None
        self._interval = [0, 0.0, 0.0]  # steps, wall seconds, compute seconds
        self._total = [0, 0.0]

    def step_done(self, step_seconds: float, compute_seconds: float, now: float) -> None:
        self.step += 1
        self._interval = [self._interval[0] + 1, self._interval[1] + step_seconds,
                          self._interval[2] + compute_seconds]
        self._total = [self._total[0] + 1, self._total[1] + step_seconds]
        if self._last is None:
            self._last = now - step_seconds
        if now - self._last >= self.every or self.step == self.total_steps:
            self.emit()
            self._last = now

    def resize(self, images_per_step: int, steps_done: int) -> None:
        """An elastic job's new size, or a step count rolled back to its last commit."""
        if images_per_step != self.images_per_step:
            self.images_per_step = images_per_step
            self._interval, self._total = [0, 0.0, 0.0], [0, 0.0]
        self.step = steps_done

    def fields(self) -> dict:
        steps, wall, compute = self._interval
        found = {"step": self.step, "total_steps": self.total_steps, "warmup": False,
                 "images_per_step": self.images_per_step}
        if steps and wall > 0:
            found.update(step_time=wall / steps, compute_time=compute / steps,
                         images_per_sec=self.images_per_step * steps / wall)
        if self._total[1] > 0:
            found["images_per_sec_avg"] = self.images_per_step * self._total[0] / self._total[1]
        return found

    def emit(self) -> None:
        report("progress", stream=self.stream, **self.fields())
        self._interval = [0, 0.0, 0.0]


def start_heartbeat(progress: Progress):
    """A daemon thread reporting `heartbeat` (the step) every HVDK8S_HEARTBEAT_SECONDS;
    returns what stops it. A rank whose heartbeats cease is stopped or gone; one that beats
    without steps waits (in a collective)."""
    stop = threading.Event()
    every = _env_seconds("HVDK8S_HEARTBEAT_SECONDS", HEARTBEAT_SECONDS)

    def beat() -> None:
        while not stop.wait(every):
            report("heartbeat", stream=progress.stream, step=progress.step, every=every)

    threading.Thread(target=beat, name="hvdk8s-heartbeat", daemon=True).start()
    return stop.set


# -------------------------------------------------------------------------- arguments
class BenchmarkError(Exception):
    """A configuration this machine cannot run (exit status 2, message on stderr)."""


def _bool(text: str) -> bool:
    """absl-style boolean values, so tf_cnn_benchmarks lines (`--use_fp16=True`) work."""
    value = text.strip().lower()
    if value in ("1", "true", "t", "yes", "y"):
        return True
    if value in ("0", "false", "f", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hvd_cnn_bench.py",
        description="Synthetic ImageNet CNN training throughput, tf_cnn_benchmarks-compatible.",
    )
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument("--batch_size", type=int, default=0,
                   help="images per device (= per rank); 0: the model's tf_cnn_benchmarks "
                   "default (64 for resnet50, 32 for inception3)")
    p.add_argument("--num_batches", type=int, default=DEFAULT_NUM_BATCHES,
                   help="timed batches, after the warm-up (default %(default)s)")
    p.add_argument("--num_warmup_batches", type=int, default=DEFAULT_NUM_WARMUP_BATCHES,
                   help="untimed batches first: tracing, graph optimisation, allocator "
                   "(default %(default)s, as tf_cnn_benchmarks)")
    p.add_argument("--display_every", type=int, default=DEFAULT_DISPLAY_EVERY)
    p.add_argument("--variable_update", default="horovod", choices=["horovod", "independent"],
                   help="horovod: allreduce gradients across ranks; independent: one "
                   "process without gradient exchange (Horovod is not imported)")
    p.add_argument("--device", default="gpu", type=str.lower, choices=["cpu", "gpu"])
    p.add_argument("--data_format", default=None, type=str.upper, choices=["NCHW", "NHWC"],
                   help="default NCHW on gpu, NHWC on cpu (TensorFlow has no NCHW CPU kernels)")
    p.add_argument("--image_size", type=int, default=0,
                   help="square input side; 0: the model's native size (224, inception3 299)")
    for flag, help_text in (
        ("use_fp16", "mixed_float16 policy with dynamic loss scaling"),
        ("xla", "XLA-compile the forward and backward pass (jit_compile)"),
    ):
        p.add_argument(f"--{flag}", nargs="?", const=True, default=False, type=_bool,
                       metavar="BOOL", help=help_text)
        p.add_argument(f"--no{flag}", dest=flag, action="store_false", help=argparse.SUPPRESS)
    p.add_argument("--drop_redundant_bias", nargs="?", const=True, default=True, type=_bool,
                   metavar="BOOL", help="remove convolution biases that feed only batch "
                   "norm, which cancels them exactly (default true; false: the Keras model "
                   "exactly as built)")
    p.add_argument("--nodrop_redundant_bias", dest="drop_redundant_bias",
                   action="store_false", help=argparse.SUPPRESS)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum"])
    p.add_argument("--learning_rate", type=float, default=0.005)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--num_intra_threads", type=int, default=_env_int("HVDK8S_INTRA_OP_THREADS"),
                   help="TF intra-op threads per rank (env HVDK8S_INTRA_OP_THREADS); unset: "
                   "the cores this rank has to itself; 0: TensorFlow's default")
    p.add_argument("--num_inter_threads", type=int, default=_env_int("HVDK8S_INTER_OP_THREADS"),
                   help="TF inter-op threads per rank (env HVDK8S_INTER_OP_THREADS); unset "
                   "or 0: TensorFlow's default")
    p.add_argument("--seed", type=int, default=1234)
    # Horovod elastic under horovodrun (elastic.py beside this file).
    p.add_argument("--elastic", action="store_true",
                   help="run under horovodrun elastic: hvd.elastic.run, state committed every "
                   "--elastic_commit_every steps; a lost worker does not end the run")
    p.add_argument("--elastic_commit_every", type=int, default=5)
    p.add_argument("--data_name", default="synthetic", choices=["synthetic", "imagenet"],
                   help="synthetic: one batch made on the device; imagenet: TFRecords from "
                   "--data_dir through tf_cnn_benchmarks' input pipeline")
    p.add_argument("--data_dir", default=None,
                   help="directory of ImageNet TFRecords (train-*-of-*), with --data_name imagenet")
    p.add_argument("--datasets_num_parallel_calls", type=int, default=0,
                   help="parallel decode/preprocess calls per rank; 0: tf.data AUTOTUNE")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    _, native_size, default_batch = MODELS[args.model]
    if args.data_format is None:
        args.data_format = "NCHW" if args.device == "gpu" else "NHWC"
    if args.data_format == "NCHW" and args.device == "cpu":
        parser.error(
            "--data_format=NCHW needs --device=gpu: TensorFlow's CPU convolution and pooling "
            "kernels are NHWC-only; use --data_format=NHWC"
        )
    if args.batch_size == 0:
        args.batch_size = default_batch
    if args.image_size == 0:
        args.image_size = native_size
    if args.data_name == "imagenet" and not args.data_dir:
        parser.error("--data_name=imagenet needs --data_dir (the directory of train-*-of-*)")
    if args.data_dir and args.data_name == "synthetic":
        parser.error("--data_dir needs --data_name=imagenet")
    min_size = MIN_IMAGE_SIZE.get(args.model, DEFAULT_MIN_IMAGE_SIZE)
    for ok, message in (
        (args.batch_size >= 1, "--batch_size must be >= 1"),
        (args.num_batches >= 1, "--num_batches must be >= 1"),
        (args.num_warmup_batches >= 0, "--num_warmup_batches must be >= 0"),
        (args.display_every >= 1, "--display_every must be >= 1"),
        (args.learning_rate > 0, "--learning_rate must be > 0"),
        (args.image_size >= min_size, f"--image_size must be >= {min_size} for {args.model}"),
        ((args.num_intra_threads or 0) >= 0, "--num_intra_threads must be >= 0"),
        ((args.num_inter_threads or 0) >= 0, "--num_inter_threads must be >= 0"),
    ):
        if not ok:
            parser.error(message)
    return args


# ---------------------------------------------------------------------------- threads
def _cgroup_cpu_limit() -> float | None:
    """This container's CPU quota in cores (a Kubernetes CPU limit), None if unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:  # cgroup v2
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota_us = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period_us = int(f.read())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def auto_intra_threads(local_size: int) -> int:
    """The cores this rank has to itself, so that co-located ranks do not oversubscribe.

    When the MPI launcher bound the rank (its CPU set is a strict subset of its parent's,
    e.g. OpenMPI's default --bind-to core for np <= 2) that set is the rank's own;
    otherwise all ranks on the host share it and it is divided among them. A cgroup
    quota (Kubernetes CPU limit), shared by the pod's ranks, caps it either way.
    """
    local_size = max(1, local_size)
    mine = os.sched_getaffinity(0)
    try:
        parent = os.sched_getaffinity(os.getppid())
    except OSError:
        parent = mine
    cores = len(mine) if mine < parent else len(mine) // local_size
    limit = _cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, int(limit / local_size))
    return max(1, cores)


def thread_settings(args: argparse.Namespace, local_size: int) -> tuple[int, int]:
    """(intra, inter) op threads; 0 leaves TensorFlow's default."""
    intra = args.num_intra_threads
    if intra is None:
        # On GPU the host threads only feed kernels; TensorFlow's default is right there.
        intra = auto_intra_threads(local_size) if args.device == "cpu" else 0
    # TF's default inter-op pool (one thread per schedulable core) measured fastest on
    # CPU: a single inter-op thread serialises independent ops of the backward pass.
    inter = args.num_inter_threads or 0
    return intra, inter


# ------------------------------------------------------------------------------ model
def _function(tf, fn=None, **kwargs):
    """tf.function with reduce_retracing where this TF has it (2.9+)."""
    try:
        return tf.function(fn, reduce_retracing=True, **kwargs)
    except TypeError:
        return tf.function(fn, experimental_relax_shapes=True, **kwargs)


def build_model(tf, name: str, image_size: int, data_format: str):
    app_name = MODELS[name][0]
    if data_format == "NCHW":
        input_shape = (3, image_size, image_size)
        tf.keras.backend.set_image_data_format("channels_first")
    else:
        input_shape = (image_size, image_size, 3)
        tf.keras.backend.set_image_data_format("channels_last")
    if app_name is None:
        inputs = tf.keras.Input(shape=input_shape)
        x = tf.keras.layers.Flatten()(inputs)
        x = tf.keras.layers.Dense(1)(x)
        x = tf.keras.layers.Dense(4096)(x)
        outputs = tf.keras.layers.Dense(NUM_CLASSES)(x)
        return tf.keras.Model(inputs, outputs, name="trivial")
    # Logits out, no softmax: the loss is taken in float32 from them, which is what keeps
    # mixed_float16 numerically safe.
    return getattr(tf.keras.applications, app_name)(
        weights=None,
        include_top=True,
        input_shape=input_shape,
        classes=NUM_CLASSES,
        classifier_activation=None,
    )


def drop_redundant_conv_biases(tf, model) -> int:
    """Remove the bias of every convolution whose output goes only into batch norm.

    Training-mode batch norm subtracts the per-channel batch mean, so a per-channel bias
    added just before it cancels exactly: the network computes the same function and the
    bias always gets a zero gradient. tf_cnn_benchmarks' models have no such biases;
    tf.keras.applications' ResNets do, and pay a BiasAdd and a BiasAddGrad (a reduction
    over the whole activation) per convolution for them. Returns how many were dropped;
    0, leaving the model as it is, where Keras' internals are not the expected ones.
    """
    try:
        conv_types = (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D)
        bn_type = tf.keras.layers.BatchNormalization
        dropped = 0
        for layer in model.layers:
            if not isinstance(layer, conv_types) or not getattr(layer, "use_bias", False):
                continue
            consumers = [node.outbound_layer for node in layer._outbound_nodes]
            if not consumers or not all(isinstance(c, bn_type) for c in consumers):
                continue
            bias = layer.bias
            layer.use_bias = False  # Conv.call() adds the bias only when this is set
            layer._trainable_weights = [w for w in layer._trainable_weights if w is not bias]
            layer.bias = None
            dropped += 1
        return dropped
    except AttributeError:
        return 0


def build_optimizer(tf, args: argparse.Namespace):
    momentum = args.momentum if args.optimizer == "momentum" else 0.0
    legacy = getattr(tf.keras.optimizers, "legacy", None)
    if legacy is not None:
        # The legacy optimizer updates each variable with one fused kernel
        # (ResourceApplyGradientDescent / ResourceApplyKerasMomentum), the kernels
        # tf_cnn_benchmarks uses; Keras 2.11+'s new SGD makes two or three elementwise
        # passes over every weight instead.
        opt = legacy.SGD(learning_rate=args.learning_rate, momentum=momentum)
    else:
        opt = tf.keras.optimizers.SGD(learning_rate=args.learning_rate, momentum=momentum)
    if args.use_fp16:
        # Dynamic loss scaling from 128, tf_cnn_benchmarks' (fixed) default, not Keras'
        # 2**15: that overflows the fp16 gradients of an untrained ResNet for ten or more
        # steps (all skipped updates), which a short benchmark would never get past.
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt, initial_scale=128)
    return opt


def make_train_step(tf, hvd, model, opt, args: argparse.Namespace):
    def forward_loss(images, labels):
        logits = model(images, training=True)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=tf.cast(logits, tf.float32)
            )
        )
        if model.losses:
            loss += tf.add_n(model.losses)
        return loss

    if args.xla:
        # Only the model is compiled (its gradient is compiled with it): Horovod's
        # collectives have no XLA kernels, so they stay outside the cluster.
        forward_loss = _function(tf, forward_loss, jit_compile=True)

    variables = model.trainable_variables
    # Gradients are averaged over ranks by dividing the loss by the world size and
    # summing: the same numbers as op=hvd.Average (gradients are linear in the loss),
    # without Horovod's extra pass scaling the whole fused buffer after every allreduce.
    world_size = hvd.size() if hvd is not None else 1

    def train_step(images, labels):
        """(loss, this rank's compute seconds): forward and backward, up to its own
        gradients, before the all-reduce in which every rank waits for the slowest."""
        started = tf.timestamp()
        # An op without inputs may run last: with one inter-op thread (a rank bound to one
        # core) TensorFlow ran the stamp after the whole step. The input waits for it.
        with tf.control_dependencies([started]):
            images = tf.identity(images)
        with tf.GradientTape() as tape:
            loss = forward_loss(images, labels)
            scaled = opt.get_scaled_loss(loss) if args.use_fp16 else loss
            if world_size > 1:
                scaled = scaled / world_size
        grads = tape.gradient(scaled, variables)
        # The first layer's gradient is among the last the backward pass makes; a scalar of
        # it brought to the host waits for the device to have made it (a control edge from
        # a GPU op alone waits only for the kernel's launch).
        with tf.device("/CPU:0"):
            probe = tf.reduce_sum(grads[0])
        with tf.control_dependencies([probe]):
            computed = tf.timestamp()
        if hvd is not None:
            # What hvd.DistributedGradientTape(op=Sum) does for dense gradients, one
            # allreduce each (Horovod's tensor fusion batches them), after the probe.
            grads = [hvd.allreduce(g, op=hvd.Sum) for g in grads]
        if args.use_fp16:
            grads = opt.get_unscaled_gradients(grads)
        opt.apply_gradients(list(zip(grads, variables)))  # noqa: B905 (Python 3.8 too)
        return loss, computed - started

    return _function(tf, train_step)


# ------------------------------------------------------------------------------ input
# ImageNet TFRecords as tf_cnn_benchmarks reads them (tensorflow/benchmarks
# scripts/tf_cnn_benchmarks/preprocessing.py: parse_example_proto, train_image,
# RecordInputImagePreprocessor; datasets.py: the train-*-of-* file pattern): the
# records written by inception's build_imagenet_data.py, labels 1..1000 (0 is background).
TRAIN_PATTERN = "train-*-of-*"
SHUFFLE_BUFFER = 10000  # tf_cnn_benchmarks' --datasets_shuffle_buffer_size
INTERLEAVE_CYCLE = 10  # its parallel_interleave cycle_length
# Distorted crop: tf_cnn_benchmarks' _random_crop / inception's distorted_bounding_box_crop.
MIN_OBJECT_COVERED, ASPECT_RATIOS, AREAS, MAX_ATTEMPTS = 0.1, (0.75, 1.33), (0.05, 1.0), 100


def train_files(data_dir: str) -> list[str]:
    import glob

    return sorted(glob.glob(os.path.join(data_dir, TRAIN_PATTERN)))


def shard_of(files: Sequence[str], rank: int, world_size: int) -> list[str]:
    """This rank's files: every world_size-th, from its rank (tf.data's shard order), so
    no two ranks read one file. Fewer files than ranks: the caller shards by record."""
    return list(files[rank::world_size])


def parse_example(tf, serialized):
    """(JPEG bytes, 0-based label, bboxes [1, n, 4] ymin/xmin/ymax/xmax) of one record."""
    var_float = tf.io.VarLenFeature(dtype=tf.float32)
    features = tf.io.parse_single_example(serialized, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "image/object/bbox/xmin": var_float, "image/object/bbox/ymin": var_float,
        "image/object/bbox/xmax": var_float, "image/object/bbox/ymax": var_float,
    })
    coords = [tf.expand_dims(features[f"image/object/bbox/{k}"].values, 0)
              for k in ("ymin", "xmin", "ymax", "xmax")]
    bbox = tf.transpose(tf.expand_dims(tf.concat(coords, 0), 0), [0, 2, 1])
    label = tf.cast(features["image/class/label"], tf.int32) - 1  # 1..1000 -> 0..999
    return features["image/encoded"], label, bbox


def train_image(tf, jpeg, bbox, image_size: int, seed: int):
    """tf_cnn_benchmarks' train_image without color distortion (its default): a random
    crop covering part of a box, decoded fused with the crop, resized bilinearly, flipped
    left-right half the time, scaled to [-1, 1] (its normalized_image)."""
    shape = tf.image.extract_jpeg_shape(jpeg)
    bbox = tf.cond(tf.shape(bbox)[1] > 0, lambda: bbox,
                   lambda: tf.constant([[[0.0, 0.0, 1.0, 1.0]]]))  # no box: the whole image
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape, bounding_boxes=bbox, min_object_covered=MIN_OBJECT_COVERED,
        aspect_ratio_range=ASPECT_RATIOS, area_range=AREAS, max_attempts=MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True, seed=seed)
    offset_y, offset_x, _ = tf.unstack(begin)
    height, width, _ = tf.unstack(size)
    image = tf.image.decode_and_crop_jpeg(
        jpeg, tf.stack([offset_y, offset_x, height, width]), channels=3)
    image = tf.image.resize(image, [image_size, image_size], method="bilinear")
    image = tf.image.random_flip_left_right(image, seed=seed)
    return image * (2.0 / 255.0) - 1.0


def imagenet_dataset(tf, args, rank: int, world_size: int):
    """Each rank reads its own shard: parallel interleaved reads of its files, shuffle,
    parallel parse and preprocessing, batches, prefetch (tf_cnn_benchmarks' pipeline).
    Returns (dataset, this rank's files)."""
    files = train_files(args.data_dir)
    if not files:
        raise BenchmarkError(f"no ImageNet TFRecords ({TRAIN_PATTERN}) in {args.data_dir}")
    auto = tf.data.experimental.AUTOTUNE
    calls = args.datasets_num_parallel_calls or auto
    by_file = len(files) >= world_size
    mine = shard_of(files, rank, world_size) if by_file else files
    ds = tf.data.Dataset.from_tensor_slices(mine)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(INTERLEAVE_CYCLE, len(mine)),
                       num_parallel_calls=auto, deterministic=False)
    if not by_file:
        ds = ds.shard(world_size, rank)  # fewer files than ranks: every world_size-th record
    # The same seed on every rank: the shards, not the seeds, make the ranks' data differ.
    ds = ds.shuffle(SHUFFLE_BUFFER, seed=args.seed).repeat()

    def preprocess(serialized):
        jpeg, label, bbox = parse_example(tf, serialized)
        image = train_image(tf, jpeg, bbox, args.image_size, args.seed)
        if args.data_format == "NCHW":
            image = tf.transpose(image, [2, 0, 1])
        return image, label

    ds = ds.map(preprocess, num_parallel_calls=calls)
    ds = ds.batch(args.batch_size, drop_remainder=True).prefetch(auto)
    return ds, [os.path.basename(f) for f in mine]


def input_wait_share(wait_seconds: Sequence[float], step_seconds: Sequence[float]) -> float:
    """The share of the timed steps' wall time spent waiting for the next batch."""
    total = math.fsum(step_seconds)
    return math.fsum(wait_seconds) / total if total > 0 else 0.0


# -------------------------------------------------------------------------------- run
def header_lines(args, world_size: int, intra: int, inter: int, tf_version: str) -> list[str]:
    global_batch = args.batch_size * world_size
    if args.variable_update == "horovod":
        devices = [f"horovod/{args.device}:{i}" for i in range(world_size)]
    else:
        devices = [f"/{args.device}:0"]
    epochs = args.num_batches * global_batch / IMAGENET_TRAIN_EXAMPLES
    major_minor = ".".join(tf_version.split(".")[:2])
    return [
        f"TensorFlow:  {major_minor}",
        f"Model:       {args.model}",
        f"Dataset:     imagenet ({'synthetic' if args.data_name == 'synthetic' else 'real'})",
        "Mode:        training",
        "SingleSess:  False",
        f"Batch size:  {global_batch} global",
        f"             {args.batch_size} per device",
        f"Num batches: {args.num_batches}",
        f"Num epochs:  {epochs:.2f}",
        f"Devices:     {devices}",
        "NUMA bind:   False",
        f"Data format: {args.data_format}",
        f"Optimizer:   {args.optimizer}",
        f"Variables:   {args.variable_update}",
        # Not in tf_cnn_benchmarks' header: what it cannot vary or does not say.
        f"Image size:  {args.image_size}",
        f"Precision:   {'fp16' if args.use_fp16 else 'fp32'}",
        f"XLA:         {args.xla}",
        f"Threads:     intra={intra or 'default'} inter={inter or 'default'}",
        "==========",
    ]


def prefer_keras_2() -> None:
    """TensorFlow >= 2.16's tf.keras is Keras 3, whose variables Horovod 0.28.1 cannot
    all-reduce (horovod/horovod#4290: "'Variable' object has no attribute 'ref'"). Where
    tf-keras (Keras 2) is installed, tf.keras becomes it, so the model and optimizer are
    the Keras 2 code they are under TensorFlow 2.15 and images/sec compare across the two.
    TensorFlow reads the variable when tf.keras is first touched
    (tensorflow/python/util/lazy_loader.py); a value in the environment wins."""
    import importlib.util

    if importlib.util.find_spec("tf_keras") is not None:
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def run(args: argparse.Namespace) -> dict:
    prefer_keras_2()
    hvd = None
    rank, local_rank, world_size, local_size = 0, 0, 1, 1
    if args.variable_update == "horovod":
        try:
            import horovod.tensorflow as hvd
        except ImportError as e:
            raise BenchmarkError(
                f"--variable_update=horovod needs horovod.tensorflow ({e}); "
                "--variable_update=independent runs one process without it"
            ) from e
        if args.device == "cpu":
            # Horovod's background thread waits in MPI calls (every negotiation cycle, and
            # for peers to reach each allreduce); OpenMPI busy-polls there, taking the
            # core from TensorFlow's threads on the same cores. Yielding while idle
            # measured +55% images/sec with 2 ranks on 2 cores. Read by MPI_Init, which
            # hvd.init() calls; an explicit setting (env or mpirun --mca) wins.
            os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
        hvd.init()
        rank, local_rank = hvd.rank(), hvd.local_rank()
        world_size, local_size = hvd.size(), hvd.local_size()

    import tensorflow as tf

    # All of this must happen before the TensorFlow runtime starts (its first op).
    intra, inter = thread_settings(args, local_size)
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    gpus = tf.config.list_physical_devices("GPU")
    if args.device == "gpu":
        if not gpus:
            raise BenchmarkError("--device=gpu, but TensorFlow sees no GPU; use --device=cpu")
        if local_rank >= len(gpus):
            raise BenchmarkError(
                f"local rank {local_rank} has no GPU: {len(gpus)} visible for "
                f"{local_size} ranks on this host"
            )
        # One GPU per rank, by local rank: the Horovod convention.
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
        tf.config.experimental.set_memory_growth(gpus[local_rank], True)
    elif gpus:
        tf.config.set_visible_devices([], "GPU")
    if args.use_fp16:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    tf.random.set_seed(args.seed + rank)

    try:
        model = build_model(tf, args.model, args.image_size, args.data_format)
    except ValueError as e:
        raise BenchmarkError(f"cannot build {args.model}: {e}") from e
    dropped_biases = drop_redundant_conv_biases(tf, model) if args.drop_redundant_bias else 0
    opt = build_optimizer(tf, args)
    train_step = make_train_step(tf, hvd, model, opt, args)

    files: list[str] = []
    if args.data_name == "synthetic":
        with tf.device("/GPU:0" if args.device == "gpu" else "/CPU:0"):
            # Made once, on the device: no input pipeline and no host copies in the loop.
            if args.data_format == "NCHW":
                shape = (args.batch_size, 3, args.image_size, args.image_size)
            else:
                shape = (args.batch_size, args.image_size, args.image_size, 3)
            images = tf.random.truncated_normal(shape, dtype=tf.float32)
            labels = tf.random.uniform((args.batch_size,), 0, NUM_CLASSES, dtype=tf.int32)

        def next_batch():
            return images, labels
    else:
        dataset, files = imagenet_dataset(tf, args, rank, world_size)
        batches = iter(dataset)

        def next_batch():
            return next(batches)

    def say(line: str) -> None:
        if rank == 0:
            print(line, flush=True)

    for line in header_lines(args, world_size, intra, inter, tf.__version__):
        say(line)
    clock = time.perf_counter
    progress = Progress(args.num_batches, args.batch_size * world_size)
    stop_heartbeat = start_heartbeat(progress)
    if args.elastic and hvd is not None:
        from elastic import run_elastic  # beside this file: the script's directory is on sys.path

        def elastic_step(step: int, seconds: float, computed: float, ranks: int) -> None:
            progress.resize(args.batch_size * ranks, step - 1)
            progress.step_done(seconds, computed, clock())

        try:
            return run_elastic(args, tf=tf, hvd=hvd, model=model, opt=opt,
                               make_step=lambda: make_train_step(tf, hvd, model, opt, args),
                               local_step=make_train_step(tf, None, model, opt, args),
                               next_batch=next_batch, on_step=elastic_step)
        finally:
            stop_heartbeat()
    say("Running warm up")

    first_labels: list[int] = []

    def one_step() -> tuple[float, float, float]:
        """(loss, seconds waited for the batch, compute seconds). .numpy() is the one host
        sync per step: per-step times need it (as tf_cnn_benchmarks' sess.run fetching the
        loss does)."""
        t0 = clock()
        batch_images, batch_labels = next_batch()
        waited = clock() - t0
        if not first_labels:
            first_labels.extend(int(x) for x in batch_labels.numpy())
        loss, computed = train_step(batch_images, batch_labels)
        return float(loss.numpy()), waited, float(computed.numpy())

    broadcast_done = hvd is None
    warmup_step = 0.0
    for _ in range(args.num_warmup_batches):
        t0 = clock()
        one_step()
        warmup_step = clock() - t0  # the last one: tracing and allocation are behind it
        if not broadcast_done:
            _broadcast(hvd, model, opt)
            broadcast_done = True
    if args.num_warmup_batches:
        # What a stall is measured against until the first timed report comes.
        report("progress", step=0, total_steps=args.num_batches, warmup=True,
               images_per_step=progress.images_per_step, step_time=warmup_step)
    say("Done warm up")
    say("Step\tImg/sec\ttotal_loss")

    step_times: list[float] = []
    wait_times: list[float] = []
    loss = 0.0
    # No garbage-collector pauses inside timed steps; the loop allocates next to nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    loop_start = clock()
    for step in range(args.num_batches):
        t0 = clock()
        loss, waited, computed = one_step()
        step_times.append(clock() - t0)
        wait_times.append(waited)
        progress.step_done(step_times[-1], computed, clock())
        if not broadcast_done:  # no warm-up: rank 0's weights win after the first step
            _broadcast(hvd, model, opt)
            broadcast_done = True
        if should_display(step, args.display_every):
            say(format_step_line(step + 1, perf_timing(args.batch_size, step_times), loss))
    loop_seconds = clock() - loop_start
    stop_heartbeat()
    if gc_was_enabled:
        gc.enable()

    rate = rank_images_per_sec(args.batch_size, args.num_batches, loop_seconds)
    total = total_images_per_sec(args.batch_size, args.num_batches, loop_seconds, world_size)
    wait_share = input_wait_share(wait_times, step_times)
    gathered = (hvd.allgather_object((rate, wait_share, files, first_labels)) if hvd is not None
                else [(rate, wait_share, files, first_labels)])
    per_rank = [float(g[0]) for g in gathered]
    per_rank_wait = [float(g[1]) for g in gathered]
    for line in format_total(total):
        say(line)
    # Not in tf_cnn_benchmarks' output: whether the input was real, and how long the ranks
    # waited for it (the mean over ranks of each one's share of its step time).
    mean_wait = math.fsum(per_rank_wait) / len(per_rank_wait)
    say(f"input: {'synthetic' if args.data_name == 'synthetic' else 'real (' + args.data_dir + ')'}"
        f", input wait: {mean_wait * 100:.1f}% of step time")
    timing = perf_timing(args.batch_size, step_times)
    result = {
        "model": args.model,
        "batch_size": args.batch_size,
        "global_batch_size": args.batch_size * world_size,
        "image_size": args.image_size,
        "num_batches": args.num_batches,
        "num_warmup_batches": args.num_warmup_batches,
        "precision": "fp16" if args.use_fp16 else "fp32",
        "device": args.device,
        "xla": args.xla,
        "data_format": args.data_format,
        "optimizer": args.optimizer,
        "variable_update": args.variable_update,
        "world_size": world_size,
        "per_rank_images_per_sec": per_rank,
        "total_images_per_sec": total,
        "sum_images_per_sec": math.fsum(per_rank),
        "images_per_sec": timing.images_per_sec,
        "images_per_sec_uncertainty": timing.uncertainty,
        "images_per_sec_jitter": timing.jitter,
        "step_time_mean_s": math.fsum(step_times) / len(step_times),
        "step_time_median_s": _median(step_times),
        "loop_time_s": loop_seconds,
        "final_loss": loss,
        "conv_biases_dropped": dropped_biases,
        "num_intra_threads": intra,
        "num_inter_threads": inter,
        "tensorflow_version": tf.__version__,
        "horovod_version": _horovod_version() if hvd is not None else None,
        "hostname": socket.gethostname(),
        "data_name": args.data_name,
        "input": "synthetic" if args.data_name == "synthetic" else "real",
        "input_wait_share": mean_wait,
        "per_rank_input_wait_share": per_rank_wait,
    }
    if args.data_name != "synthetic":
        result["data_dir"] = args.data_dir
        # What each rank read: its files and the labels of its first batch.
        result["per_rank_input_files"] = [list(g[2]) for g in gathered]
        result["per_rank_first_labels"] = [list(g[3]) for g in gathered]
    say(result_line(result))
    return result


def _json_safe(value):
    """NaN/inf (a diverged fp16 loss) as null: the line must stay standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def result_line(result: dict) -> str:
    return RESULT_PREFIX + json.dumps(_json_safe(result), sort_keys=True, allow_nan=False)


def _broadcast(hvd, model, opt) -> None:
    """Rank 0's weights and optimizer state to every rank. After the first step (the
    Horovod convention), when everything created lazily, optimizer slots included, exists."""
    hvd.broadcast_variables(model.variables, root_rank=0)
    opt_vars = opt.variables() if callable(opt.variables) else opt.variables
    if opt_vars:
        hvd.broadcast_variables(opt_vars, root_rank=0)


def _horovod_version() -> str | None:
    try:
        import horovod

        return horovod.__version__
    except (ImportError, AttributeError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except BenchmarkError as e:
        print(f"hvd_cnn_bench: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
