"""Published figures behind the throughput model: models, single-GPU training speeds, GPUs.

Everything the model knows about compute comes from here. Each figure names its source;
figures that are not read straight off a published table say how they were derived
(`Figure.derived`), and `mpijob.perf.perfmodel` repeats that in a prediction's notes.

Measured single-GPU training throughput (synthetic ImageNet, images/sec, one GPU):

[TF-P100] TensorFlow performance benchmarks, "Details for NVIDIA DGX-1 (NVIDIA Tesla
    P100)", tables "Training synthetic data" (batch 64 per GPU) and "Other Results" (batch
    32), TF 1.x, May 2017. https://www.tensorflow.org/performance/benchmarks (the page's
    source: github.com/tensorflow/tensorflow, tensorflow/docs_src/performance/benchmarks.md).
[TF-K80] Same page, "Details for Google Compute Engine (NVIDIA Tesla K80)", training
    synthetic data, 1 GPU (batch 64; 32 for ResNet-152 and VGG16).
[LAMBDA-TF] Lambda Labs TensorFlow GPU benchmarks (tf_cnn_benchmarks, 1 GPU, largest
    batch that fits), github.com/lambdal/lambda-tensorflow-benchmark files
    tf-train-throughput-fp32.csv / tf-train-throughput-fp16.csv (throughput) and
    tf-train-bs-fp32.csv / tf-train-bs-fp16.csv (batch sizes; the repository now lives at
    github.com/LambdaColdStorage/lambda-tensorflow-benchmark), rows "V100 32GB" and
    "A100 40GB PCIe"; the data behind https://lambdalabs.com/gpu-benchmarks. "fp32" on the
    A100 is TF32 (TensorFlow's default on Ampere).
[NV-DLE-PT] NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/
    README.md (pytorch-21.03 NGC container), "Inference performance: NVIDIA DGX-1 (1x V100
    16GB)", mixed precision: batch 64 / 128 / 256 at 2984 / 3249 / 3382 img/s. A straight
    line through their step times (21.4, 39.4, 75.7 ms) has a fixed part of 3.4 ms per forward
    pass: the kernels a step launches whatever its batch (STEP_OVERHEAD_S).
[NV-DS] NVIDIA data sheets, dense (non-sparse) figures: V100 SXM2 (FP32 15.7 TFLOPS, Tensor
    Core 125, HBM2 900 GB/s; "NVIDIA Tesla V100 GPU Accelerator", 2018), A100 40GB PCIe (FP32
    19.5, TF32 Tensor Core 156, FP16 Tensor Core 312, HBM2 1,555 GB/s; "NVIDIA A100 Tensor
    Core GPU", 2020, the sparse 312/624 halved), H100 SXM5 (FP32 67, TF32 Tensor Core 494.7,
    FP16 Tensor Core 989.4, HBM3 3.35 TB/s; "NVIDIA H100 Tensor Core GPU", 2022, the sparse
    989/1,979 halved).
[NV-DLE] NVIDIA DeepLearningExamples, TensorFlow/Classification/ConvNets/resnet50v1.5/
    README.md (TF 20.06 NGC container): "Inference performance: NVIDIA T4 (1x T4 16G)" and
    "NVIDIA DGX-1 (1x V100 16G)", batch 128: FP32 429.83 vs 1324.91 img/s, mixed
    precision 995.81 vs 2770.61 img/s. The same README's training table (1x V100 16G:
    412 img/s FP32, 1270 img/s AMP) agrees with [LAMBDA-TF]'s V100 ResNet-50 row within 4%.

Derived figures (no single published table covers them; each derivation uses only
published single-GPU figures):
- ResNet-101: seconds per image interpolated linearly in forward GMACs between the
  same GPU's ResNet-50 and ResNet-152 figures (both normalised to large batch first).
- VGG19: the VGG16 figure scaled by VGG16/VGG19 GMACs (the same 3x3 conv stack, deeper).
- H100: the A100 figure carried over by the model's own roofline split (`carry_over`, see
  "Generations" below); no published TensorFlow CNN table for the H100 was found.
- T4: the V100 figure times T4 / V100 from [NV-DLE] (x0.324 fp32, x0.359 mixed); NVIDIA
  publishes T4 ResNet-50 inference but no T4 training table was found. The T4 is a 70 W
  card whose training speed is power-bound like its inference, which is why the ratio is
  carried over.
- P100 fp16: no published figure; the P100 has no Tensor Cores, so the fp32 figure is
  used (AMP's speed-up on Pascal is small).

Model sizes: trainable parameters of tf.keras.applications models (counted with
TensorFlow 2.15, include_top=True, 1000 classes: what images/benchmark/hvd_cnn_bench.py
trains) and forward multiply-accumulates per image from the torchvision model docs
("GFLOPS" column, which counts MACs; 224x224 input, 299x299 for Inception V3).

GPU peak rates (dense TFLOPS; FP32 without Tensor Cores, FP16 with them where present)
from NVIDIA's data sheets; used only by the FLOPs fallback for GPUs without figures.
NVLink links per GPU from the P100/V100/A100/H100 architecture whitepapers.
Blackwell (no published TensorFlow CNN training table, so the FLOPs fallback prices them;
the sparse Tensor Core figures NVIDIA lists are halved to dense):
- B200: HGX B200 (8 GPUs), https://www.nvidia.com/en-us/data-center/hgx/: FP32 600 TFLOPS,
  FP16/BF16 Tensor Core 36 PFLOPS sparse -> 75 and 2,250 per GPU.
- GB200: GB200 NVL72 (72 GPUs), https://www.nvidia.com/en-us/data-center/gb200-nvl72/:
  FP32 6,480 TFLOPS, FP16/BF16 Tensor Core 360 PFLOPS sparse -> 90 and 2,500 per GPU.
- GB300: GB300 NVL72 per-GPU dense figures (Verda, "NVIDIA GB300 NVL72: GPU Architecture
  & Performance", https://verda.com/blog/gb300-nvl72-architecture, from NVIDIA's
  Blackwell Ultra data): FP32 80 TFLOPS, FP16/BF16 2.5 PFLOPS.
- H200: the H100 SXM's silicon at the same clocks (GPU_SAME_AS), 18 NVLinks (H200 page,
  https://www.nvidia.com/en-us/data-center/h200/: NVLink 900 GB/s).
All Blackwell GPUs have 18 NVLink 5 links (mpijob.scheduling.links).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Per-step fixed cost that makes small batches slower per image: step = b / peak + t0.
# TensorFlow 1.x tables ([TF-P100], [TF-K80]): t0 is 8 images' worth, fitted on [TF-P100]'s
# batch 32 vs 64 pairs (ResNet-50 9.0, VGG16 4.8, Inception V3 7.9, ResNet-152 7.9 images).
BATCH_OVERHEAD_IMAGES = 8.0
# Every later figure: t0 is a time, the same on every GPU: the kernels of a step that take as
# long whatever the batch (launch latency, small kernels, the optimizer's per-tensor updates).
# A faster GPU or precision therefore needs a larger batch to come close to its peak (at
# ResNet-50's 12 ms an H100 at 5,000 img/s loses half its speed at batch 60, a V100 at 450
# img/s at batch 5). [NV-DLE-PT], ResNet-50: 3.4 ms of fixed time per forward pass; a
# training step runs the forward pass, a backward pass of about twice its kernels (data and
# weight gradients) and the optimizer's update of every weight tensor (~1.5 ms):
# 3 x 3.4 + 1.5 ~ 12 ms. Other models: scaled by their number of weight tensors (each one a
# layer whose forward, backward and update kernels every step launches; GRADIENT_PROFILES):
# VGG16 1.8 ms, Inception V3 10.7 ms, ResNet-152 35 ms.
STEP_OVERHEAD_S = 0.012  # ResNet-50's
_TF1_SOURCES = ("TF-P100", "TF-K80")

PRECISION_ALIASES = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "amp": "fp16", "mixed": "fp16"}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    params: int  # trainable parameters: what the allreduce moves every step
    gmacs: float  # forward multiply-accumulates per image, billions

    @property
    def train_gflops(self) -> float:
        """FLOPs per training image: 2 FLOPs per MAC, backward ~2x forward (so 3x in all)."""
        return 2 * self.gmacs * 3


MODELS: dict[str, ModelInfo] = {
    "vgg16": ModelInfo("vgg16", 138_357_544, 15.47),
    "vgg19": ModelInfo("vgg19", 143_667_240, 19.63),
    "resnet50": ModelInfo("resnet50", 25_583_592, 4.09),
    "resnet101": ModelInfo("resnet101", 44_601_832, 7.80),
    "resnet152": ModelInfo("resnet152", 60_268_520, 11.51),
    "inception3": ModelInfo("inception3", 23_817_352, 5.71),
}
MODEL_ALIASES = {
    "inceptionv3": "inception3",
    "inception_v3": "inception3",
    "inception-v3": "inception3",
    "resnet-50": "resnet50",
    "resnet-101": "resnet101",
    "resnet-152": "resnet152",
    "vgg-16": "vgg16",
    "vgg-19": "vgg19",
}


def step_overhead_s(model: str) -> float:
    """`model`'s fixed time per training step (see STEP_OVERHEAD_S)."""
    def tensors(m: str) -> int:
        return sum(t for _, _, t in GRADIENT_PROFILES[m])

    return STEP_OVERHEAD_S * tensors(model) / tensors("resnet50")


def normalize_model(name: str) -> str | None:
    key = name.strip().lower()
    key = MODEL_ALIASES.get(key, key)
    return key if key in MODELS else None


def normalize_precision(name: str) -> str | None:
    return PRECISION_ALIASES.get(name.strip().lower())


@dataclass(frozen=True)
class Figure:
    images_per_sec: float
    batch_size: int
    source: str
    derived: str | None = None  # how it was derived, when it is not a published number
    # Fixed seconds per step (STEP_OVERHEAD_S); None: BATCH_OVERHEAD_IMAGES images' worth.
    step_overhead_s: float | None = STEP_OVERHEAD_S

    @classmethod
    def from_peak(cls, peak: float, batch_size: int, source: str, derived: str | None,
                  step_overhead_s: float | None = STEP_OVERHEAD_S) -> Figure:
        """The figure at `batch_size` of a GPU whose large-batch rate is `peak`."""
        probe = cls(peak, batch_size, source, derived, step_overhead_s)
        return replace(probe, images_per_sec=probe._rate(peak, batch_size))

    @property
    def peak(self) -> float:
        """Large-batch images/s implied by the figure (step = batch / peak + overhead)."""
        b = self.batch_size
        if self.step_overhead_s is None:
            return self.images_per_sec * (b + BATCH_OVERHEAD_IMAGES) / b
        # A figure faster than its overhead allows (never for published ones): no overhead.
        return b / max(b / self.images_per_sec - self.step_overhead_s, 1e-3 * b / self.images_per_sec)

    def _rate(self, peak: float, batch_size: int) -> float:
        if self.step_overhead_s is None:
            return peak * batch_size / (batch_size + BATCH_OVERHEAD_IMAGES)
        return batch_size / (batch_size / peak + self.step_overhead_s)

    def at_batch(self, batch_size: int) -> float:
        return self._rate(self.peak, batch_size)

    def scaled(self, factor: float, derived: str, source: str | None = None) -> Figure:
        """This GPU's figure for one `factor` times faster compute (the same overhead)."""
        return Figure.from_peak(self.peak * factor, self.batch_size, source or self.source,
                                derived, self.step_overhead_s)


FLOPS_SOURCE = "FLOPs estimate"
SOURCES = {
    "TF-P100": "tensorflow.org/performance/benchmarks, DGX-1 P100, training synthetic data, 1 GPU",
    "TF-K80": "tensorflow.org/performance/benchmarks, GCE K80, training synthetic data, 1 GPU",
    "LAMBDA-TF": "github.com/lambdal/lambda-tensorflow-benchmark tf-train-throughput-*.csv, 1 GPU",
    "NV-DLE": "NVIDIA DeepLearningExamples TF resnet50v1.5 README, T4 vs V100 inference, batch 128",
    "NV-DS": "NVIDIA data sheets (tensor and FP32 TFLOPS, memory bandwidth) and the model's layer mix",
}

# (gpu, model, precision) -> (images/s, batch size, source key): published numbers only.
_MEASURED: dict[tuple[str, str, str], tuple[float, int, str]] = {
    ("P100", "inception3", "fp32"): (142, 64, "TF-P100"),
    ("P100", "resnet50", "fp32"): (219, 64, "TF-P100"),
    ("P100", "resnet152", "fp32"): (91.8, 64, "TF-P100"),
    ("P100", "vgg16", "fp32"): (154, 64, "TF-P100"),
    ("K80", "inception3", "fp32"): (30.5, 64, "TF-K80"),
    ("K80", "resnet50", "fp32"): (51.9, 64, "TF-K80"),
    ("K80", "resnet152", "fp32"): (20.0, 32, "TF-K80"),
    ("K80", "vgg16", "fp32"): (35.4, 32, "TF-K80"),
    ("V100", "inception3", "fp32"): (273, 192, "LAMBDA-TF"),
    ("V100", "resnet50", "fp32"): (432, 192, "LAMBDA-TF"),
    ("V100", "resnet152", "fp32"): (167, 96, "LAMBDA-TF"),
    ("V100", "vgg16", "fp32"): (249, 192, "LAMBDA-TF"),
    ("V100", "inception3", "fp16"): (771, 384, "LAMBDA-TF"),
    ("V100", "resnet50", "fp16"): (1276, 384, "LAMBDA-TF"),
    ("V100", "resnet152", "fp16"): (518, 192, "LAMBDA-TF"),
    ("V100", "vgg16", "fp16"): (456, 384, "LAMBDA-TF"),
    ("A100", "inception3", "fp32"): (627, 224, "LAMBDA-TF"),
    ("A100", "resnet50", "fp32"): (953, 224, "LAMBDA-TF"),
    ("A100", "resnet152", "fp32"): (390, 112, "LAMBDA-TF"),
    ("A100", "vgg16", "fp32"): (504, 224, "LAMBDA-TF"),
    ("A100", "inception3", "fp16"): (1222, 360, "LAMBDA-TF"),
    ("A100", "resnet50", "fp16"): (2075, 448, "LAMBDA-TF"),
    ("A100", "resnet152", "fp16"): (886, 200, "LAMBDA-TF"),
    ("A100", "vgg16", "fp16"): (1190, 448, "LAMBDA-TF"),
}

# GPU-to-GPU speed ratio used to carry a whole table over to a GPU with one published model.
T4_OVER_V100 = {"fp32": 429.83 / 1324.91, "fp16": 995.81 / 2770.61}  # [NV-DLE] ResNet-50

# Dense peak TFLOPS per GPU: (FP32, FP16 with Tensor Cores or plain FP16; None = no fast FP16).
GPU_PEAK_TFLOPS: dict[str, tuple[float, float | None]] = {
    "K80": (4.37, None),  # one of the board's two GPUs, boost clock
    "P4": (5.5, None),
    "P40": (12.0, None),
    "P100": (10.6, 21.2),
    "V100": (15.7, 125.0),
    "T4": (8.1, 65.0),
    "A10": (31.2, 125.0),
    "A30": (10.3, 165.0),
    "A40": (37.4, 149.7),
    "A100": (19.5, 312.0),
    "L4": (30.3, 121.0),
    "L40S": (91.6, 362.0),
    "H100": (67.0, 989.0),
    "B200": (75.0, 2250.0),
    "GB200": (90.0, 2500.0),
    "GB300": (80.0, 2500.0),
}
# Same silicon as a GPU with figures: use that GPU's figures (and say so).
GPU_SAME_AS = {"H200": "H100", "H800": "H100", "A800": "A100"}
# Fraction of peak the FLOPs fallback assumes: the V100 rows of the table imply 0.60-0.73 of
# FP32 peak for ResNet-50/101/152 and Inception V3 (VGG16 exceeds peak thanks to Winograd
# convolutions) and 0.21-0.34 of FP16 Tensor Core peak; rounded down to the middle.
FALLBACK_UTILIZATION = {"fp32": 0.65, "fp16": 0.25}
# A GPU string we cannot recognise is assumed to be this class (and the notes say so).
DEFAULT_GPU = "V100"

NVLINKS_PER_GPU = {"P100": 4, "V100": 6, "A100": 12, "H100": 18, "H200": 18, "H800": 8, "A800": 8,
                   "B200": 18, "GB200": 18, "GB300": 18}

_GPU_TOKENS = sorted(set(GPU_PEAK_TFLOPS) | set(GPU_SAME_AS), key=len, reverse=True)
_TOKEN_SPLIT = re.compile(r"[^A-Z0-9]+")


def normalize_gpu(product: str | None) -> str | None:
    """Canonical GPU name from a GPU Feature Discovery label: "Tesla-V100-SXM2-16GB" -> "V100",
    "NVIDIA-H100-80GB-HBM3" -> "H100", "Tesla-T4" -> "T4"; None when not recognised."""
    if not product:
        return None
    tokens = _TOKEN_SPLIT.split(product.upper())
    for token in tokens:
        if token in GPU_PEAK_TFLOPS or token in GPU_SAME_AS:
            return token
    # Labels that glue the variant on ("A100SXM4", "V100S"): longest known prefix wins.
    for token in tokens:
        for known in _GPU_TOKENS:
            if token.startswith(known) and not token[len(known):len(known) + 1].isdigit():
                return known
    return None


def _measured(gpu: str, model: str, precision: str) -> Figure | None:
    row = _MEASURED.get((gpu, model, precision))
    if row is None:
        return None
    ips, batch, source = row
    return Figure(ips, batch, source,
                  step_overhead_s=None if source in _TF1_SOURCES else step_overhead_s(model))


def _resnet101(gpu: str, precision: str) -> Figure | None:
    r50, r152 = _published(gpu, "resnet50", precision), _published(gpu, "resnet152", precision)
    if r50 is None or r152 is None:
        return None
    g50, g101, g152 = (MODELS[m].gmacs for m in ("resnet50", "resnet101", "resnet152"))
    t50, t152 = 1 / r50.peak, 1 / r152.peak
    t101 = t50 + (g101 - g50) / (g152 - g50) * (t152 - t50)
    return Figure.from_peak(1 / t101, r152.batch_size, r50.source,
                            "interpolated between ResNet-50 and ResNet-152 by GMACs",
                            None if r152.step_overhead_s is None else step_overhead_s("resnet101"))


def _vgg19(gpu: str, precision: str) -> Figure | None:
    v16 = _published(gpu, "vgg16", precision)
    if v16 is None:
        return None
    scale = MODELS["vgg16"].gmacs / MODELS["vgg19"].gmacs
    return Figure.from_peak(v16.peak * scale, v16.batch_size, v16.source,
                            "VGG16 figure scaled by VGG16/VGG19 GMACs",
                            None if v16.step_overhead_s is None else step_overhead_s("vgg19"))


def _published(gpu: str, model: str, precision: str) -> Figure | None:
    """A published figure, or one carried over from another GPU by a published ratio."""
    fig = _measured(gpu, model, precision)
    if fig is not None:
        return fig
    if gpu in CARRIED_FROM:
        return carry_over(CARRIED_FROM[gpu], gpu, model, precision)
    if gpu == "T4":
        base = _measured("V100", model, precision)
        if base is not None:
            return base.scaled(T4_OVER_V100[precision],
                               f"V100 figure x{T4_OVER_V100[precision]:.3f} (T4/V100 ResNet-50)",
                               f"{base.source}; NV-DLE")
    if gpu == "P100" and precision == "fp16":
        base = _measured("P100", model, "fp32")
        if base is not None:
            return replace(base, derived="no published P100 fp16 figure: fp32 figure (no Tensor Cores)")
    return None


# ------------------------------------------------------------------------------ generations
# A GPU with no published table of its own gets another generation's figures, carried over
# per model by what changed between the two: the Tensor Core (or FP32) throughput, which
# sets the time of convolutions and matrix products, and the memory bandwidth, which sets
# the time of the memory-bound layers (batch norm, activations, residual adds, pooling,
# concatenation). A roofline split of the published time per image on the reference GPU:
#   memory part  = LAYER_MIX elements x bytes per element / (bandwidth x MEMORY_EFFICIENCY)
#   compute part = the rest (at least MIN_COMPUTE_SHARE of it)
# each scaled by its own ratio. ResNets (a batch norm and a ReLU after every convolution) are
# mostly memory-bound in fp16 and move by nearly the bandwidth ratio; VGG (no batch norm, big
# 3x3 convolutions) moves by nearly the Tensor Core ratio. Checked on V100 -> A100, where
# [LAMBDA-TF] has both (benchmarks/model_fidelity, "generations").
@dataclass(frozen=True)
class GpuSpec:
    fp32_tflops: float  # CUDA cores
    tf32_tflops: float | None  # Tensor Cores, dense; None before Ampere
    fp16_tflops: float  # Tensor Cores, dense
    memory_gbs: float


GPU_SPECS = {  # [NV-DS]; the A100 is the 40GB PCIe card of [LAMBDA-TF]'s A100 rows
    "V100": GpuSpec(15.7, None, 125.0, 900.0),
    "A100": GpuSpec(19.5, 156.0, 312.0, 1555.0),
    "H100": GpuSpec(67.0, 494.7, 989.4, 3350.0),
}
CARRIED_FROM = {"H100": "A100"}
# Elementwise kernels reach about this share of the data sheet bandwidth (STREAM-like copy
# and triad kernels: 0.8-0.9 on V100/A100/H100, github.com/UoB-HPC/BabelStream results;
# batch norm's reductions do worse, so the low end).
MEMORY_EFFICIENCY = 0.8
MIN_COMPUTE_SHARE = 0.05
# Memory-bound elements touched per training image (forward + backward), millions: counted
# from tf.keras.applications by benchmarks/model_fidelity/layer_mix.py (the counting rules
# are there). x 4 bytes in fp32, x 2 in fp16 (mixed precision keeps activations in fp16).
LAYER_MIX_MELEMS = {
    "vgg16": 131.4, "vgg19": 141.8, "resnet50": 187.4, "resnet101": 282.9, "resnet152": 400.9,
    "inception3": 150.6,
}


def _tensor_rate(spec: GpuSpec, precision: str) -> float:
    if precision == "fp16":
        return spec.fp16_tflops
    return spec.tf32_tflops if spec.tf32_tflops is not None else spec.fp32_tflops


def roofline_split(gpu: str, model: str, precision: str, peak: float) -> tuple[float, float]:
    """(compute, memory) seconds per image of a published large-batch rate `peak`."""
    spec = GPU_SPECS[gpu]
    per_image = 1 / peak
    elem_bytes = 4 if precision == "fp32" else 2
    memory = LAYER_MIX_MELEMS[model] * 1e6 * elem_bytes / (spec.memory_gbs * 1e9 * MEMORY_EFFICIENCY)
    memory = min(memory, (1 - MIN_COMPUTE_SHARE) * per_image)
    return per_image - memory, memory


def generation_factor(ref: str, target: str, model: str, precision: str) -> float | None:
    """How much faster `target` trains `model` than `ref` (large batch), from the roofline
    split of ref's published figure; None without the figures or specs it needs.

    fp32 on a GPU without TF32 (V100) and with it (A100, H100) run their convolutions on
    different units: the compute part then comes from ref's fp16 (Tensor Core) figure, at
    TF32's rate, and the memory part from its fp32 figure."""
    if ref not in GPU_SPECS or target not in GPU_SPECS or model not in LAYER_MIX_MELEMS:
        return None
    a, b = GPU_SPECS[ref], GPU_SPECS[target]
    fig = _measured(ref, model, precision)
    if fig is None:
        return None
    compute, memory = roofline_split(ref, model, precision, fig.peak)
    ref_rate, target_rate = _tensor_rate(a, precision), _tensor_rate(b, precision)
    if precision == "fp32" and (a.tf32_tflops is None) != (b.tf32_tflops is None):
        tensor = _measured(ref, model, "fp16")
        if tensor is None or a.tf32_tflops is not None:
            return None  # TF32 -> FP32 (a newer to an older generation): not needed
        compute = roofline_split(ref, model, "fp16", tensor.peak)[0]
        ref_rate = a.fp16_tflops
    target_s = compute * ref_rate / target_rate + memory * a.memory_gbs / b.memory_gbs
    return (1 / fig.peak) / target_s


def carry_over(ref: str, target: str, model: str, precision: str) -> Figure | None:
    """`target`'s figure: ref's published one times `generation_factor`."""
    base = _measured(ref, model, precision)
    factor = generation_factor(ref, target, model, precision)
    if base is None or factor is None:
        return None
    return base.scaled(factor, f"{ref} figure x{factor:.2f} ({target}/{ref}: Tensor Core "
                               "and memory bandwidth ratios over this model's layer mix)",
                       f"{base.source}; NV-DS")


def figure(gpu: str, model: str, precision: str) -> Figure | None:
    """The single-GPU training figure for (canonical GPU, model, precision), or None."""
    fig = _published(gpu, model, precision)
    if fig is not None:
        return fig
    if model == "resnet101":
        return _resnet101(gpu, precision)
    if model == "vgg19":
        return _vgg19(gpu, precision)
    return None


def cite(fig: Figure) -> str:
    """Where a figure comes from, for humans: the sources' descriptions."""
    keys = [k.strip() for k in fig.source.split(";")]
    return "; ".join(SOURCES.get(k, k) for k in keys)


def flops_estimate(gpu: str, model: str, precision: str) -> Figure:
    """images/s from model FLOPs and a GPU's peak: the documented fallback."""
    fp32_peak, fp16_peak = GPU_PEAK_TFLOPS[gpu]
    if precision == "fp16" and fp16_peak is not None:
        peak, util = fp16_peak, FALLBACK_UTILIZATION["fp16"]
    else:
        peak, util = fp32_peak, FALLBACK_UTILIZATION["fp32"]
    ips = peak * 1e12 * util / (MODELS[model].train_gflops * 1e9)
    # A peak rate is a large-batch rate; quote it at a large batch.
    return Figure.from_peak(ips, 10_000, FLOPS_SOURCE,
                            f"{MODELS[model].train_gflops:.1f} GFLOP/image, {peak:g} TFLOPS x {util:g}",
                            step_overhead_s(model))


# --------------------------------------------------------------------- communication
# When each gradient becomes ready in the backward pass. Per model, in backward order, groups
# of consecutive layers: (fraction of the backward pass done when the group's last gradient
# is ready, trainable parameters in the group, gradient tensors in the group). Counted from
# tf.keras.applications (TF 2.15) by benchmarks/model_fidelity/layer_profiles.py: backward
# time of a layer taken proportional to its forward MACs (conv: out_h*out_w*k*k*c_in*c_out;
# dense: in*out), layers merged into at most 24 groups of equal backward time. VGG16's
# fully-connected layers (124 M of its 138 M parameters) are the first gradients ready.
GRADIENT_PROFILES: dict[str, tuple[tuple[float, int, int], ...]] = {
    "vgg16": (
        (0.0678, 128362472, 10),
        (0.0977, 2359808, 2),
        (0.2172, 2359808, 2),
        (0.3368, 2359808, 2),
        (0.3966, 1180160, 2),
        (0.5161, 590080, 2),
        (0.6357, 590080, 2),
        (0.6955, 295168, 2),
        (0.815, 147584, 2),
        (0.8748, 73856, 2),
        (0.9944, 36928, 2),
        (1.0, 1792, 2),
    ),
    "vgg19": (
        (0.0534, 128362472, 10),
        (0.1005, 4719616, 4),
        (0.1947, 2359808, 2),
        (0.289, 2359808, 2),
        (0.3832, 2359808, 2),
        (0.4303, 1180160, 2),
        (0.5245, 590080, 2),
        (0.6187, 590080, 2),
        (0.7129, 590080, 2),
        (0.76, 295168, 2),
        (0.8543, 147584, 2),
        (0.9014, 73856, 2),
        (0.9956, 36928, 2),
        (1.0, 1792, 2),
    ),
    "resnet50": (
        (0.0438, 5464552, 10),
        (0.1004, 4465664, 12),
        (0.1271, 2108928, 10),
        (0.1837, 4460032, 6),
        (0.2336, 1381632, 12),
        (0.2602, 528128, 8),
        (0.3035, 853504, 8),
        (0.3468, 855808, 8),
        (0.4034, 1118720, 12),
        (0.4167, 262912, 4),
        (0.46, 855808, 8),
        (0.5133, 1055488, 12),
        (0.5432, 590592, 4),
        (0.5932, 346752, 12),
        (0.6498, 280832, 12),
        (0.6764, 132992, 8),
        (0.7197, 213760, 8),
        (0.7597, 199680, 8),
        (0.7963, 180992, 8),
        (0.8396, 54208, 8),
        (0.8962, 70784, 12),
        (0.9228, 34240, 10),
        (0.9661, 53696, 6),
        (1.0, 13888, 8),
    ),
    "resnet101": (
        (0.0512, 9930216, 22),
        (0.0936, 6568960, 16),
        (0.1258, 1644544, 16),
        (0.1767, 1974528, 20),
        (0.2124, 1381632, 16),
        (0.2633, 1974528, 20),
        (0.2921, 1118720, 12),
        (0.3345, 1646848, 20),
        (0.3787, 1709312, 16),
        (0.4211, 1646848, 20),
        (0.4652, 1709312, 16),
        (0.5008, 1381632, 16),
        (0.5517, 1974528, 20),
        (0.5874, 1381632, 16),
        (0.6383, 1974528, 20),
        (0.6671, 1118720, 12),
        (0.7095, 1646848, 20),
        (0.752, 1646080, 16),
        (0.7927, 937344, 16),
        (0.8351, 413824, 20),
        (0.8775, 413440, 16),
        (0.9182, 235200, 16),
        (0.9607, 105024, 22),
        (1.0, 67584, 14),
    ),
    "resnet152": (
        (0.0434, 12039144, 32),
        (0.0844, 6104576, 22),
        (0.1277, 2502656, 28),
        (0.1766, 2828032, 28),
        (0.2154, 2237440, 24),
        (0.2541, 2237440, 24),
        (0.2928, 2237440, 24),
        (0.336, 2500352, 28),
        (0.3793, 2502656, 28),
        (0.418, 2237440, 24),
        (0.467, 2828032, 28),
        (0.5057, 2237440, 24),
        (0.5444, 2237440, 24),
        (0.5876, 2500352, 28),
        (0.6264, 2237440, 24),
        (0.6696, 2502656, 28),
        (0.7186, 2828032, 28),
        (0.7561, 2174208, 24),
        (0.7926, 1070336, 24),
        (0.8415, 709504, 28),
        (0.8802, 561664, 24),
        (0.9178, 546432, 24),
        (0.9645, 305984, 28),
        (1.0, 101824, 24),
    ),
    "inception3": (
        (0.0493, 6418152, 17),
        (0.0856, 3246528, 13),
        (0.1285, 3831488, 11),
        (0.1683, 1217088, 7),
        (0.2093, 811968, 9),
        (0.2559, 922368, 8),
        (0.3022, 916608, 11),
        (0.3387, 721216, 6),
        (0.3767, 753024, 13),
        (0.4241, 936256, 7),
        (0.4621, 753024, 13),
        (0.5043, 836096, 10),
        (0.5746, 1390304, 9),
        (0.5865, 55392, 2),
        (0.6286, 196960, 9),
        (0.6727, 205808, 13),
        (0.7106, 177360, 8),
        (0.7607, 233872, 11),
        (0.8873, 160000, 5),
        (0.9618, 23696, 4),
        (1.0, 10144, 4),
    ),
}

# NCCL's latency model, src/graph/tuning.cc (github.com/NVIDIA/nccl, NCCL 2.7-2.8 tables),
# ring algorithm, Simple protocol (what large fused allreduces use), microseconds:
# baseLat 8.4 per collective; hwLat per ring step 3.4 over NVLink, 5.7 over PCIe, 9.6 over
# the network; an allreduce ring has 2(n-1) steps of which 2(nodes-1) cross the network
# ("nInterSteps"); on more than one node a large ring allreduce's latency is multiplied by
# 1.9 ("Plateau effect of ring", ncclTopoGetAlgoTime).
NCCL_RING_BASE_LATENCY_S = 8.4e-6
NCCL_RING_STEP_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "net": 9.6e-6}
NCCL_RING_PLATEAU_FACTOR = 1.9

# Horovod's background loop (docs/tensor-fusion.rst; horovod/common/operations.cc): every
# HOROVOD_CYCLE_TIME it negotiates which tensors all ranks have ready, fuses them into
# buffers of at most HOROVOD_FUSION_THRESHOLD bytes and allreduces them one after another.
# Defaults: 1 ms and 128 MB since Horovod 0.21.0 (CHANGELOG, PR #2468: "Changed default
# cycle time from 5ms to 1ms and fusion threshold from 64MB to 128MB"); 5 ms and 64 MB
# before, which is what the Horovod paper's 2017 benchmarks ran with.
HOROVOD_CYCLE_S = 1e-3
HOROVOD_FUSION_BYTES = 128 * 1024 * 1024
HOROVOD_LEGACY_CYCLE_S = 5e-3
HOROVOD_LEGACY_FUSION_BYTES = 64 * 1024 * 1024
# Negotiation: the coordinator's gather and broadcast (and since Horovod 0.16 the response
# cache's bit-vector allreduce) are MPI/Gloo tree collectives: 2 x ceil(log2 ranks) network
# hops per cycle, each priced at NCCL's network step latency above.

# Synchronous SGD waits, at every step, for the slowest of its n ranks. With per-rank step
# times independent and normal with coefficient of variation RANK_JITTER, the slowest is
# E[max of n] = mean * (1 + RANK_JITTER * z(n)), z(n) the expected maximum of n standard
# normals (Blom's approximation: the normal quantile at (n - 0.375) / (n + 0.25); 0 for one
# rank, 0.56 for 2, 1.42 for 8, 2.76 for 128, 3.18 for 512). RANK_JITTER is the one figure
# of the communication model FITTED to a multi-GPU result: the Horovod paper's 128-GPU
# Inception V3 efficiency (90%), whose gradients the model otherwise hides completely; every
# other published multi-GPU figure in benchmarks/model_fidelity is held out from it.
RANK_JITTER = 0.034

# The P100 PCIe card runs slower clocks than the SXM2 module of the DGX-1 tables: 9.3 vs
# 10.6 FP32 TFLOPS (NVIDIA Tesla P100 data sheet). A "PCIE" P100 gets the SXM2 figures
# times that ratio.
FORM_FACTOR_RATIO = {("P100", "PCIE"): 9.3 / 10.6}
