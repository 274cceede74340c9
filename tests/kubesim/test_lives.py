"""The lives the kubelet model plays for hvdk8s' containers (kubesim/lives.py), and the image
references it cannot pull (kubesim/images.py): the benchmark's lines are the benchmark's
own, its reports are the shared report format, failures say what the real ones say."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys

import pytest

from kubesim import devcluster, images
from kubesim.lives import _Benchmark, _exit_code, _Timing
from kubesim.server import KubeAPIServer
from launcher.formats.rank_reports import is_report_line, iter_reports
from tests.paths import ROOT

PROGRAM = ROOT / "images" / "benchmark" / "hvd_cnn_bench.py"
ARGS = ["--model", "resnet50", "--batch_size", "64", "--num_batches", "30",
        "--num_warmup_batches", "10", "--variable_update", "horovod", "--device", "gpu",
        "--data_format", "NCHW"]
POD = {"metadata": {"uid": "u-1", "name": "demo-launcher-abcde"},
       "spec": {"hostname": "demo-launcher"}}


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("hvd_cnn_bench_lives", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hvd_cnn_bench_lives"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _benchmark_module()


def _flags(argv: list[str]) -> dict:
    return {argv[i][2:]: argv[i + 1] for i in range(0, len(argv), 2)}


def _played(ranks: int = 4, step: float = 0.162, **kw) -> list[str]:
    timed, _ = _Benchmark(_flags(ARGS), ranks, step, POD, **kw).play()
    return [line() if callable(line) else line for _, line in timed]


def test_the_played_header_is_the_benchmarks_own():
    lines = [n for n in _played() if not is_report_line(n)]
    header = bench.header_lines(bench.parse_args(ARGS), 4, 0, 0, "2.15.1")
    assert lines[:len(header)] == header
    assert lines[len(header):len(header) + 3] == ["Running warm up", "Done warm up",
                                                  "Step\tImg/sec\ttotal_loss"]


def test_the_step_lines_are_the_benchmarks_figures_of_the_same_step_times():
    timing = _Timing(64)
    times = [0.16, 0.17, 0.158, 0.165, 0.162]
    for t in times:
        timing.add(t)
    assert timing.line(5, 7.5) == bench.format_step_line(5, bench.perf_timing(64, times), 7.5)


def test_the_total_and_result_lines_say_what_the_benchmark_says():
    lines = _played()
    shown = [n for n in lines if "\timages/sec: " in n]
    assert [n.split("\t")[0] for n in shown] == ["1", "10", "20", "30"]  # should_display
    total = float(next(n for n in lines if n.startswith("total images/sec: ")).split()[-1])
    assert total == pytest.approx(4 * 64 / 0.162, rel=0.02)  # the predicted step time
    at = lines.index(f"total images/sec: {total:.2f}")
    assert lines[at - 1:at + 2] == bench.format_total(total)
    result = bench.parse_result_line(next(n for n in lines if n.startswith("HVDK8S_RESULT ")))
    assert result["total_images_per_sec"] == pytest.approx(total, abs=0.01)
    assert result["world_size"] == 4 and result["num_batches"] == 30
    tree = ast.parse(PROGRAM.read_text())
    keys = next({k.value for k in node.value.keys if isinstance(k, ast.Constant)}
                for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", None) == "result"
                and isinstance(node.value, ast.Dict))
    assert set(result) == keys  # the benchmark's synthetic-data result, key for key


def test_every_rank_reports_its_progress_and_heartbeat_in_the_shared_format():
    lines = _played(ranks=2, step=1.0)
    reports = list(iter_reports(lines, kind="progress"))
    assert {r["rank"] for r in reports} == {0, 1}
    mine = [r for r in reports if r["rank"] == 0]
    assert mine[0] == {**mine[0], "step": 0, "warmup": True, "images_per_step": 128}
    steps = [r["step"] for r in mine[1:]]
    assert steps == sorted(steps) and steps[-1] == 30 and len(steps) >= 5  # every 5 s
    timed = mine[1:]
    assert all(not r["warmup"] and r["total_steps"] == 30 and r["images_per_step"] == 128
               for r in timed)
    assert all(r["images_per_sec"] == pytest.approx(128 / r["step_time"]) for r in timed)
    assert timed[-1]["images_per_sec_avg"] == pytest.approx(128, rel=0.02)
    beats = [r for r in iter_reports(lines, kind="heartbeat") if r["rank"] == 1]
    assert len(beats) >= 20 and beats[-1]["step"] > beats[0]["step"] and beats[0]["every"] == 2


def test_a_benchmark_told_to_fail_stops_after_its_warm_up():
    lines = [n for n in _played(failing=True, code=3) if not is_report_line(n)]
    assert lines[-2:] == ["Done warm up", "hvdk8s dev cluster: rank 0 exits with status 3 "
                          "(HVDK8S_DEV_EXIT=3)"]
    assert not any(n.startswith("total images/sec") for n in lines)


@pytest.mark.parametrize("text, code", [("3", 3), ("0", 0), ("256", 0), ("x", None),
                                        (None, None)])
def test_the_exit_convention_reads_a_status(text, code):
    assert _exit_code(text) == code


@pytest.mark.parametrize("image", ["horovod/horovod:0.28.1", "localhost/hvdk8s-train:0.1.0-cpu",
                                   "registry.example.com:5000/a/b@sha256:" + "a" * 64,
                                   "busybox"])
def test_references_that_parse_pull(image):
    assert images.invalid_name(image) is None and images.unresolvable(image) is None


@pytest.mark.parametrize("image, why", [
    ("Horovod/horovod:1", "invalid reference format: repository name must be lowercase"),
    ("horovod horovod", "invalid reference format"),
    ("a:b:c", "invalid reference format")])
def test_references_that_do_not_parse_are_invalid_image_names(image, why):
    assert images.invalid_name(image) == (
        f'Failed to apply default image tag "{image}": couldn\'t parse image reference '
        f'"{image}": {why}')


def test_a_registry_under_invalid_does_not_resolve():
    assert images.unresolvable("registry.invalid/nosuch") == (
        'rpc error: code = Unknown desc = failed to pull and unpack image '
        '"registry.invalid/nosuch:latest": failed to resolve reference '
        '"registry.invalid/nosuch:latest": failed to do request: Head '
        '"https://registry.invalid/v2/nosuch/manifests/latest": dial tcp: lookup '
        'registry.invalid on 127.0.0.53:53: no such host')


def test_an_invalid_image_name_waits_with_the_kubelets_reason_and_event():
    with KubeAPIServer() as srv:
        srv.add_node("n0", gpus=0)
        srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"nodeName": "n0", "containers": [{"name": "c",
                                                               "image": "Bad/Name:1"}]}})

        def waiting():
            statuses = srv.get("pods", "p")["status"].get("containerStatuses") or [{}]
            return statuses[0].get("state", {}).get("waiting", {})
        srv.wait_for(lambda: waiting().get("reason") == "InvalidImageName")
        assert "repository name must be lowercase" in waiting()["message"]
        reasons = [e["reason"] for e in srv.objects("events", "default")]
        assert reasons.count("InspectFailed") == 1 and "Pulling" not in reasons


def test_the_kubeconfig_is_private_from_its_creation(tmp_path):
    old = tmp_path / "kubeconfig"
    old.write_text("old")
    old.chmod(0o644)
    mask = os.umask(0)
    try:
        dev = devcluster.start("two-nodes", old)
    finally:
        os.umask(mask)
    try:
        assert oct(old.stat().st_mode & 0o777) == "0o600"
        assert "old" not in old.read_text()
    finally:
        dev.stop()


def test_the_multikueue_shape_names_its_worker_cluster_as_a_context(tmp_path):
    import yaml

    dev = devcluster.start("multikueue", tmp_path / "kc")
    try:
        config = yaml.safe_load((tmp_path / "kc").read_text())
        assert [c["name"] for c in config["contexts"]] == ["hvdk8s-dev", "worker1"]
        assert config["current-context"] == "hvdk8s-dev"
        servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
        assert servers["worker1"] == dev.workers["worker1"].url != dev.server.url
        assert json.dumps(dev.workers["worker1"].objects("nodes")).count("nvidia.com/gpu") > 0
    finally:
        dev.stop()
