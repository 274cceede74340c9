"""Calibrating the throughput model on a cluster's own measured runs.

A run (one `experiment run` record) gives the measured images/sec of `ranks` ranks of one
device kind ("cpu", or a canonical GPU name such as "V100"), each at `batch_size`. Its step
time is `batch_size * ranks / images_per_sec`, and the model fitted is

    step = batch / rate + t0                                  (one rank)
    step = batch / rate + t0 + overhead + x / bandwidth        (several ranks)

    x = 2 (n - 1) / n * gradient bytes * exposed share        (GPUs: bytes on the link)
    x = (2 + 5 (n - 1) / n) * gradient bytes                   (CPU ranks of one host)

`rate` (images/s per rank, large-batch limit) and `t0` (per-step fixed cost of one rank)
per (device, model, precision, image size), fitted on the one-rank runs by least squares
on `batch` (with a single batch size, t0 is the published figures': a time per model on
GPUs, mpijob.perf.perfdata.step_overhead_s, 8 images' worth on CPUs,
mpijob.perf.perfdata.BATCH_OVERHEAD_IMAGES); `bandwidth` (GB/s) per link kind and `overhead` (s per
multi-rank step), fitted on the multi-rank runs' time beyond their compute. The exposed
share is 1 on the CPU (Horovod's allreduce shares the cores with TensorFlow, so nothing
overlaps) and, on GPUs, the uncalibrated prediction's exposed / total allreduce time.
CPU ranks of one host move their gradients through memory with their own cores, so their
"link" (`host`) is the memory copy rate of a core and x counts every byte a rank copies
(`host_copy_bytes`); its default is measured on no run, so a 2-rank CPU job is predicted from
1-rank runs only.
Uncertainties are the least-squares standard errors (parameters with too few runs to have
one are reported with `stderr` None).

Pure: records in, a `Calibration` out; launcher/cli/calibrate.py does the files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mpijob.perf import perfdata
from mpijob.phases import JobPhase

VERSION: Literal[1] = 1
LINK_KINDS = ("host", "shm", "pcie", "nvlink", "net")
# Before any multi-rank run is seen. "shm": GPU pods of one host exchange gradients through
# host memory, priced like the model's pod-to-pod path (a cross-socket PCIe path,
# mpijob.scheduling.links). "host": CPU ranks' memory copies, at one core's memcpy rate. Single-threaded
# memcpy on dual-socket Xeon servers runs at 5-12 GB/s, limited by the misses one core keeps
# in flight (J. D. McCalpin, "Single-threaded memory performance for dual socket Xeon E5-*
# systems", https://sites.utexas.edu/jdm4372/, 2015; STREAM Copy counts twice that); this
# 2-core VM measured 11 GB/s with numpy (benchmarks/calibration/README.md).
DEFAULT_LINK_GBS = {"shm": 6.3, "host": 10.0}


class CalibrationError(ValueError):
    """The runs cannot be calibrated on (too few, or inconsistent): one line for the user."""


class ComputeRate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str
    model: str
    precision: str
    image_size: int | None = None
    images_per_sec: float
    images_per_sec_stderr: float | None = None
    step_overhead_s: float
    step_overhead_stderr: float | None = None
    runs: int

    def step_seconds(self, batch_size: int) -> float:
        return batch_size / self.images_per_sec + self.step_overhead_s


class LinkBandwidth(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["host", "shm", "pcie", "nvlink", "net"]
    gbs: float
    gbs_stderr: float | None = None
    runs: int


class Calibration(BaseModel):
    """The calibration file (JSON). `version` changes when the meaning of a field does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = VERSION
    created: str = ""
    sources: list[str] = []
    compute: list[ComputeRate] = []
    links: list[LinkBandwidth] = []
    multi_rank_overhead_s: float = 0.0
    multi_rank_overhead_stderr: float | None = None
    runs: int = 0
    error_before: float | None = None  # mean |predicted / measured - 1| without calibration
    error_after: float | None = None  # the same with it

    def rate(self, device: str, model: str, precision: str,
             image_size: int | None) -> ComputeRate | None:
        """The fitted rate for this device and workload; an image size of None matches any."""
        for c in self.compute:
            if (c.device, c.model, c.precision) == (device, model, precision) and (
                    image_size is None or c.image_size in (None, image_size)):
                return c
        return None

    def link_gbs(self, kind: str) -> float | None:
        return next((link.gbs for link in self.links if link.kind == kind), None)

    def describe(self) -> str:
        parts = [f"{c.device} {c.model} {c.precision}"
                 f"{f' {c.image_size}px' if c.image_size else ''}: {c.images_per_sec:.3g} img/s"
                 for c in self.compute]
        parts += [f"{link.kind} {link.gbs:.3g} GB/s" for link in self.links]
        return "; ".join(parts)


@dataclass(frozen=True)
class Run:
    """One measured run, as the fit sees it."""

    device: str
    model: str
    precision: str
    image_size: int | None
    batch_size: int
    ranks: int
    link: str  # "none" (one rank) or a LINK_KINDS entry
    images_per_sec: float  # measured, all ranks
    exposed_share: float = 1.0
    predicted_images_per_sec: float | None = None  # uncalibrated, when the record had one

    @property
    def step_s(self) -> float:
        return self.batch_size * self.ranks / self.images_per_sec

    @property
    def comm_bytes(self) -> float:
        """What the link's bandwidth divides: bytes copied through memory for CPU ranks of
        one host, else 2(n-1)/n x gradient bytes x the exposed share."""
        gradient_bytes = perfdata.MODELS[self.model].params * 4
        if self.link == "host":
            return host_copy_bytes(gradient_bytes, self.ranks)
        n = self.ranks
        return 2 * (n - 1) / n * gradient_bytes * self.exposed_share


def host_copy_bytes(gradient_bytes: float, ranks: int) -> float:
    """Bytes one CPU rank copies per step in Horovod's MPI allreduce over shared memory.

    Horovod copies the gradients into its fusion buffer and the result out of it (2 S).
    OpenMPI's ring over its shared-memory transport sends 2(n-1)/n S per rank, each byte
    copied into the shared segment by the sender and out by the receiver (the copy-in/copy-out
    path; 2 x 2(n-1)/n S), and the reduce-scatter half adds (n-1)/n S of reductions, about a
    copy's cost each. The cores doing this are the ones TensorFlow computes on, so none of it
    overlaps the backward pass."""
    if ranks <= 1:
        return 0.0
    share = (ranks - 1) / ranks
    return gradient_bytes * (2 + 2 * 2 * share + share)


# ------------------------------------------------------------------------ least squares
def _linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float | None,
                                                                     float | None]:
    """y = a + b x by least squares: (a, b, stderr a, stderr b); stderrs need >= 3 points."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    if n < 3:
        return a, b, None, None
    s2 = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True)) / (n - 2)
    return a, b, math.sqrt(s2 * (1 / n + mx * mx / sxx)), math.sqrt(s2 / sxx)


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))


def _fit_compute(group: Sequence[Run]) -> ComputeRate:
    first = group[0]
    batches = sorted({r.batch_size for r in group})
    if len(batches) >= 2:
        t0, slope, t0_err, slope_err = _linear_fit([r.batch_size for r in group],
                                                   [r.step_s for r in group])
        if slope <= 0:
            raise CalibrationError(
                f"{first.device} {first.model}: one-rank runs get faster per image at larger "
                "batches by more than the model allows (step time falls with the batch): "
                "inconsistent runs; repeat them on an idle machine")
        rate = 1 / slope
        rate_err = slope_err / slope ** 2 if slope_err is not None else None
        t0 = max(0.0, t0)
    elif first.device != "cpu":
        # One batch size on a GPU: the per-step time is the published figures' (a time per
        # model, perfdata.step_overhead_s), the rest is the rate.
        b = batches[0]
        t0, t0_err = perfdata.step_overhead_s(first.model), None
        per_image, per_image_err = _mean_sd([max(r.step_s - t0, 0.1 * r.step_s) / b
                                             for r in group])
        rate = 1 / per_image
        rate_err = per_image_err / per_image ** 2 if per_image_err is not None else None
    else:
        # One batch size on CPUs: the per-step cost is 8 images' worth, as in the TensorFlow
        # 1.x tables (perfdata.BATCH_OVERHEAD_IMAGES).
        b = batches[0]
        per_image, per_image_err = _mean_sd([r.step_s / (b + perfdata.BATCH_OVERHEAD_IMAGES)
                                             for r in group])
        rate = 1 / per_image
        rate_err = per_image_err / per_image ** 2 if per_image_err is not None else None
        t0, t0_err = perfdata.BATCH_OVERHEAD_IMAGES / rate, None
    return ComputeRate(device=first.device, model=first.model, precision=first.precision,
                       image_size=first.image_size, images_per_sec=rate,
                       images_per_sec_stderr=rate_err, step_overhead_s=t0,
                       step_overhead_stderr=t0_err, runs=len(group))


def _key(r: Run) -> tuple:
    return (r.device, r.model, r.precision, r.image_size)


def thin_groups(runs: Iterable[Run]) -> list[tuple]:
    """(device, model, precision, image size) of the workloads with a single one-rank run:
    too few to fit a rate with an uncertainty."""
    counts: dict[tuple, int] = {}
    for r in runs:
        if r.ranks == 1 and r.images_per_sec > 0:
            counts[_key(r)] = counts.get(_key(r), 0) + 1
    return [k for k, n in counts.items() if n < 2]


def fit(runs: Iterable[Run], *, sources: Sequence[str] = (), created: str = "",
        skip_thin: bool = False) -> Calibration:
    """Fit compute rates, link bandwidths and the multi-rank overhead (module docstring).
    `skip_thin`: leave out workloads with a single one-rank run (`thin_groups`) instead of
    refusing, as long as some workload can be fitted."""
    runs = [r for r in runs if r.images_per_sec > 0 and r.ranks >= 1]
    single = [r for r in runs if r.ranks == 1]
    multi = [r for r in runs if r.ranks > 1]
    if not single:
        raise CalibrationError(
            f"no successful one-rank run among {len(runs)}: the compute rate is fitted on runs "
            "with one rank (add workers: 1 to the experiment's matrix)")
    groups: dict[tuple, list[Run]] = {}
    for r in single:
        groups.setdefault(_key(r), []).append(r)
    thin = [k for k, g in groups.items() if len(g) < 2]
    if thin and skip_thin and len(thin) < len(groups):
        for k in thin:
            del groups[k]
        thin = []
    if thin:
        k = thin[0]
        raise CalibrationError(
            f"only one one-rank run of {k[0]} {k[1]} {k[2]}: at least 2 are needed to fit a "
            "rate with an uncertainty (set repetitions: 2 or more batch sizes)")
    for k, g in groups.items():
        spread = max(r.step_s / (r.batch_size + perfdata.BATCH_OVERHEAD_IMAGES) for r in g) / \
            min(r.step_s / (r.batch_size + perfdata.BATCH_OVERHEAD_IMAGES) for r in g)
        if spread > 3:
            raise CalibrationError(
                f"one-rank runs of {k[0]} {k[1]} {k[2]} differ {spread:.1f}x in time per image: "
                "inconsistent runs (another load on the machine?); repeat them")
    compute = {k: _fit_compute(g) for k, g in groups.items()}

    # Multi-rank runs: the time beyond their ranks' compute, against the bytes they move.
    usable = [r for r in multi if _key(r) in compute]
    links: list[LinkBandwidth] = []
    overhead = overhead_err = None
    if usable:
        extra = [(r, r.step_s - compute[_key(r)].step_seconds(r.batch_size)) for r in usable]
        kinds = sorted({r.link for r in usable})
        xs_all = {r.comm_bytes for r in usable}
        if len(kinds) == 1 and len(xs_all) >= 2:
            a, b, a_err, b_err = _linear_fit([r.comm_bytes for r, _ in extra], [e for _, e in extra])
            if b > 0:
                overhead, overhead_err = max(0.0, a), a_err
                links.append(LinkBandwidth(kind=kinds[0], gbs=1 / b / 1e9,
                                           gbs_stderr=(b_err / b ** 2 / 1e9) if b_err else None,
                                           runs=len(extra)))
        if not links:
            # One amount of bytes per link kind: its bandwidth alone explains the extra time.
            overhead = 0.0
            for kind in kinds:
                sel = [(r, e) for r, e in extra if r.link == kind]
                per_byte, per_byte_err = _mean_sd([max(e, 1e-9) / r.comm_bytes for r, e in sel])
                links.append(LinkBandwidth(
                    kind=kind, gbs=1 / per_byte / 1e9,
                    gbs_stderr=(per_byte_err / per_byte ** 2 / 1e9) if per_byte_err else None,
                    runs=len(sel)))
    cal = Calibration(created=created, sources=list(sources), compute=list(compute.values()),
                      links=links, multi_rank_overhead_s=overhead or 0.0,
                      multi_rank_overhead_stderr=overhead_err, runs=len(runs))
    runs = [r for r in runs if _key(r) in compute]  # a skipped workload is not calibrated
    before = [abs(r.predicted_images_per_sec / r.images_per_sec - 1) for r in runs
              if r.predicted_images_per_sec]
    after = [abs(predicted_images_per_sec(cal, r) / r.images_per_sec - 1) for r in runs]
    return cal.model_copy(update={
        "error_before": sum(before) / len(before) if before else None,
        "error_after": sum(after) / len(after) if after else None})


# ------------------------------------------------------------------------------ predict
def step_seconds(cal: Calibration, *, device: str, model: str, precision: str,
                 image_size: int | None, batch_size: int, ranks: int, link: str,
                 exposed_share: float = 1.0) -> float:
    """A step with the calibrated figures (ValueError when the device/workload is not in it)."""
    rate = cal.rate(device, model, precision, image_size)
    if rate is None:
        raise ValueError(f"the calibration has no rate for {device} {model} {precision}")
    step = rate.step_seconds(batch_size)
    if ranks > 1:
        gbs = cal.link_gbs(link) or DEFAULT_LINK_GBS.get(link)
        comm = Run(device, model, precision, image_size, batch_size, ranks, link, 1.0,
                   exposed_share).comm_bytes
        step += cal.multi_rank_overhead_s + (comm / (gbs * 1e9) if gbs else 0.0)
    return step


def predicted_images_per_sec(cal: Calibration, run: Run) -> float:
    step = step_seconds(cal, device=run.device, model=run.model, precision=run.precision,
                        image_size=run.image_size, batch_size=run.batch_size, ranks=run.ranks,
                        link=run.link, exposed_share=run.exposed_share)
    return run.batch_size * run.ranks / step


# ------------------------------------------------------------------ experiment records
def run_from_record(record: dict) -> Run | None:
    """A `Run` from one `experiment run` record (results.jsonl), or None when it is not a
    usable measurement (not succeeded, no images/sec, a model the fit does not know)."""
    if record.get("status") != JobPhase.SUCCEEDED.value or not record.get("images_per_sec"):
        return None
    model = perfdata.normalize_model(str(record.get("model", "")))
    precision = perfdata.normalize_precision(str(record.get("precision") or "fp32"))
    if model is None or precision is None:
        return None
    workers, gpus = int(record.get("workers") or 1), int(record.get("gpus") or 0)
    ranks = workers * gpus if gpus else workers
    prediction = record.get("prediction") or {}
    device = "cpu" if not gpus else (perfdata.normalize_gpu(prediction.get("gpu_model")) or
                                     prediction.get("gpu_model") or "gpu")
    nodes = int(record.get("nodes") or 1)
    if ranks == 1:
        link = "none"
    elif nodes > 1:
        link = "net"
    elif not gpus:
        link = "host"  # CPU ranks of one host: memory copies by their own cores
    elif workers > 1:
        link = "shm"  # single-GPU pods of one node: through host memory
    else:
        link = "nvlink" if "NVLink" in str(prediction.get("bottleneck", "")) else "pcie"
    share = 1.0
    if gpus and ranks > 1 and prediction.get("allreduce_seconds"):
        share = min(1.0, max(0.0, prediction.get("exposed_allreduce_seconds", 0.0)
                             / prediction["allreduce_seconds"]))
    return Run(device=device, model=model, precision=precision,
               image_size=record.get("image_size"), batch_size=int(record["batch_size"]),
               ranks=ranks, link=link, images_per_sec=float(record["images_per_sec"]),
               exposed_share=share,
               predicted_images_per_sec=record.get("predicted_images_per_sec"))
