"""The parser of benchmark output, fed with what the benchmark itself prints."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launcher.formats.benchmark_result import RESULT_PREFIX, parse_benchmark_output
from tests.paths import ROOT

BENCH_DIR = ROOT / "images" / "benchmark"


@functools.cache
def _load_bench_stats():
    path = BENCH_DIR / "bench_stats.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("hvdk8s_test_bench_stats", path)
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is created.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _bench_stats():
    """The benchmark's own formatting, so the parser is checked against the producer."""
    module = _load_bench_stats()
    if module is None:
        pytest.skip("images/benchmark/bench_stats.py is not there")
    return module


def _run_output(total: float, result: dict) -> list[str]:
    stats = _bench_stats()
    return [
        "TensorFlow:  2.15",
        "Model:       resnet50",
        "Running warm up",
        "Done warm up",
        "Step\tImg/sec\ttotal_loss",
        stats.format_step_line(1, stats.perf_timing(8, [0.5, 0.4]), 7.1),
        *stats.format_total(total),
        RESULT_PREFIX + json.dumps(result, sort_keys=True),
    ]


def test_reads_rate_and_result_as_the_benchmark_prints_them():
    result = {"world_size": 2, "per_rank_images_per_sec": [10.5, 10.25], "total_images_per_sec": 21.0}
    rate, parsed = parse_benchmark_output(_run_output(20.75, result))
    assert rate == pytest.approx(20.75)
    assert parsed == result


def test_step_lines_are_not_taken_for_the_total():
    stats = _bench_stats()
    line = stats.format_step_line(10, stats.perf_timing(8, [0.5, 0.4, 0.45]), 6.9)
    assert parse_benchmark_output([line]) == (None, None)


def test_lines_tagged_by_mpirun_and_with_newlines_are_read():
    lines = ["[1,0]<stdout>:total images/sec: 123.45\n", '[1,0]<stdout>:HVDK8S_RESULT {"world_size": 4}\n']
    rate, result = parse_benchmark_output(lines)
    assert rate == pytest.approx(123.45)
    assert result == {"world_size": 4}


def test_a_whole_text_is_split_into_lines():
    rate, result = parse_benchmark_output('x\ntotal images/sec: 7.5\nHVDK8S_RESULT {"a": 1}\n')
    assert (rate, result) == (7.5, {"a": 1})


def test_the_last_run_wins():
    lines = ["total images/sec: 1.0", 'HVDK8S_RESULT {"run": 1}', "total images/sec: 2.0", 'HVDK8S_RESULT {"run": 2}']
    assert parse_benchmark_output(lines) == (2.0, {"run": 2})


def test_a_cut_result_line_is_skipped_and_an_earlier_one_kept():
    lines = ['HVDK8S_RESULT {"run": 1}', 'HVDK8S_RESULT {"run": 2, "per_rank']
    assert parse_benchmark_output(lines) == (None, {"run": 1})


def test_non_object_json_is_not_a_result():
    assert parse_benchmark_output(["HVDK8S_RESULT [1, 2]"]) == (None, None)


def test_the_json_total_stands_in_when_the_text_line_is_missing():
    rate, _ = parse_benchmark_output(['HVDK8S_RESULT {"total_images_per_sec": 42.5}'])
    assert rate == 42.5
    rate, _ = parse_benchmark_output(['HVDK8S_RESULT {"total_images_per_sec": "fast"}'])
    assert rate is None


def test_output_without_figures():
    assert parse_benchmark_output([]) == (None, None)
    assert parse_benchmark_output(["Traceback (most recent call last):", "OOM"]) == (None, None)


@given(st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False))
def test_any_printed_total_reads_back_to_its_printed_precision(total):
    stats = _bench_stats()
    rate, _ = parse_benchmark_output(stats.format_total(total))
    assert rate == pytest.approx(total, abs=0.005)
