"""The compute side per batch and per generation: the fixed step time and the per-model
carry-over of figures between GPU generations (mpijob.perf.perfdata)."""

from __future__ import annotations

import pytest

from mpijob.perf import perfdata
from mpijob.perf.perfmodel import single_gpu_images_per_sec

H100 = "NVIDIA-H100-80GB-HBM3"
MODELS = ("vgg16", "resnet50", "resnet152", "inception3")


@pytest.mark.parametrize("precision, batch, measured", [
    ("fp32", 64, 1714), ("fp16", 64, 2429), ("fp16", 256, 4761)])
def test_h100_resnet50_within_15_percent_of_a_users_measurements(precision, batch, measured):
    # One H100 80GB HBM3, PyTorch 2.11, torchvision ResNet-50, synthetic data (a user's runs).
    predicted = single_gpu_images_per_sec(H100, "resnet50", precision, batch)
    assert predicted == pytest.approx(measured, rel=0.15)


def test_a_faster_gpu_needs_a_larger_batch_for_the_same_share_of_its_peak():
    t0 = perfdata.step_overhead_s("resnet50")
    for gpu in ("V100", "A100", "H100"):
        for precision in ("fp32", "fp16"):
            fig = perfdata.figure(gpu, "resnet50", precision)
            half = fig.peak * t0  # the batch at which a step is half fixed time
            assert fig.at_batch(64) / fig.peak == pytest.approx(64 / (64 + half))
    h100 = perfdata.figure("H100", "resnet50", "fp16")
    v100 = perfdata.figure("V100", "resnet50", "fp32")
    assert h100.at_batch(64) / h100.peak < 0.6 < 0.9 < v100.at_batch(64) / v100.peak


def test_published_figures_are_returned_at_their_own_batch():
    for (gpu, model, precision), (ips, batch, _) in perfdata._MEASURED.items():
        fig = perfdata.figure(gpu, model, precision)
        assert fig.at_batch(batch) == pytest.approx(ips)


def test_tensorflow_1_tables_keep_their_fitted_8_images_per_step():
    fig = perfdata.figure("P100", "resnet50", "fp32")
    assert fig.at_batch(32) / fig.at_batch(64) == pytest.approx((32 / 40) / (64 / 72))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_each_model_moves_by_its_own_factor_between_the_bandwidth_and_tensor_ratios(precision):
    a, h = perfdata.GPU_SPECS["A100"], perfdata.GPU_SPECS["H100"]
    memory_ratio = h.memory_gbs / a.memory_gbs
    tensor_ratio = (h.fp16_tflops / a.fp16_tflops if precision == "fp16"
                    else h.tf32_tflops / a.tf32_tflops)
    factors = {m: perfdata.generation_factor("A100", "H100", m, precision) for m in MODELS}
    for m, f in factors.items():
        assert min(memory_ratio, tensor_ratio) < f < max(memory_ratio, tensor_ratio), m
        got = perfdata.figure("H100", m, precision)
        assert got.peak == pytest.approx(perfdata.figure("A100", m, precision).peak * f)
        assert "A100 figure" in got.derived
    # VGG16 (no batch norm, big 3x3 convolutions) gains more than the memory-bound ResNets.
    assert factors["vgg16"] > max(factors["resnet50"], factors["resnet152"])


def test_v100_to_a100_carry_over_holds_within_35_percent_of_lambdas_a100_rows():
    for precision in ("fp32", "fp16"):
        for model in MODELS:
            v100, a100 = (perfdata.figure(g, model, precision) for g in ("V100", "A100"))
            factor = perfdata.generation_factor("V100", "A100", model, precision)
            carried = v100.scaled(factor, "").at_batch(a100.batch_size)
            assert carried == pytest.approx(a100.images_per_sec, rel=0.35), (model, precision)


def test_the_fixed_step_time_grows_with_a_models_layers():
    times = {m: perfdata.step_overhead_s(m) for m in perfdata.MODELS}
    assert times["resnet50"] == perfdata.STEP_OVERHEAD_S
    assert times["vgg16"] < times["inception3"] < times["resnet50"] < times["resnet101"] \
        < times["resnet152"]


def test_a_gpu_calibrated_at_one_batch_keeps_the_models_fixed_step_time():
    from mpijob.perf.calibration import Run, fit

    runs = [Run("H100", "resnet50", "fp16", 224, 64, 1, "none", ips) for ips in (2400.0, 2460.0)]
    (rate,) = fit(runs).compute
    assert rate.step_overhead_s == perfdata.step_overhead_s("resnet50")
    assert 64 / rate.step_seconds(64) == pytest.approx(2430, rel=0.01)
