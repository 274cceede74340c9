"""`experiment report`: aggregation over repetitions, efficiency, the placement comparison,
and which plots are drawn (or skipped, and why)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.experiments import aggregate
from launcher.experiments.report import build_report, write_plots
from launcher.experiments.results import ResultsStore

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def record(run_id, *, model="vgg16", workers=4, gpus=1, placement="topology", rate=100.0,
           predicted=None, status="Succeeded", rep=1, **extra) -> dict:
    return {"run_id": run_id, "experiment": "e", "model": model, "workers": workers, "gpus": gpus,
            "placement": placement, "batch_size": 64, "precision": "fp32", "image_size": None,
            "num_batches": 100, "num_warmup_batches": 10, "xla": False, "repetition": rep,
            "backend": "kubernetes", "status": status,
            "reason": None if status == "Succeeded" else "boom",
            "images_per_sec": rate if status == "Succeeded" else None,
            "predicted_images_per_sec": predicted,
            "predicted_scaling_efficiency": 0.9 if predicted else None, **extra}


def gpu_records() -> list[dict]:
    """Two models x two policies x 4 GPUs, two repetitions; plus a VGG16 scaling series."""
    out = []
    for rep, jitter in ((1, -10.0), (2, 10.0)):
        for model, topo, spread in (("vgg16", 900.0, 300.0), ("resnet50", 1500.0, 1000.0)):
            out.append(record(f"{model}-t-r{rep}", model=model, rate=topo + jitter,
                              predicted=topo * 1.05, rep=rep))
            out.append(record(f"{model}-s-r{rep}", model=model, placement="spread",
                              rate=spread + jitter, predicted=spread * 0.9, rep=rep))
    out.append(record("vgg16-1", workers=1, rate=250.0, predicted=260.0))
    out.append(record("vgg16-2", workers=2, rate=450.0, predicted=480.0))
    out.append(record("vgg16-8", workers=8, rate=0.0, status="Failed"))
    return out


def store_with(tmp_path, records) -> ResultsStore:
    store = ResultsStore(tmp_path / "res")
    for r in records:
        store.append(r)
    return store


def row(rows, **match):
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_rows_average_repetitions_and_compute_efficiency_from_the_one_gpu_run():
    rows = aggregate.summarize(gpu_records())
    topo = row(rows, model="vgg16", workers=4, placement="topology")
    assert topo["runs"] == 2 and topo["succeeded"] == 2
    assert topo["images_per_sec"] == pytest.approx(900.0)
    assert topo["images_per_sec_std"] == pytest.approx(14.142, rel=1e-3)
    # vgg16 has a 1-GPU run at 250 images/sec: 900 / (4 x 250).
    assert topo["scaling_efficiency"] == pytest.approx(0.9)
    assert topo["efficiency_source"] == "measured"
    assert topo["measured_over_predicted"] == pytest.approx(1 / 1.05)
    # resnet50 has no 1-GPU run: the predicted efficiency stands in, and says so.
    resnet = row(rows, model="resnet50", workers=4, placement="topology")
    assert resnet["efficiency_source"] == "predicted" and resnet["scaling_efficiency"] == 0.9
    failed = row(rows, workers=8)
    assert failed["succeeded"] == 0 and failed["images_per_sec"] is None
    assert failed["last_failure"] == "boom"


def test_placement_comparison_gives_topology_over_spread():
    comparison = aggregate.placement_comparison(aggregate.summarize(gpu_records()))
    by_model = {c["model"]: c for c in comparison}
    assert set(by_model) == {"vgg16", "resnet50"}
    assert by_model["vgg16"]["topology_speedup"]["spread"] == pytest.approx(3.0)
    assert by_model["resnet50"]["topology_speedup"]["spread"] == pytest.approx(1.5)


def test_all_three_plots_from_gpu_results(tmp_path):
    store_with(tmp_path, gpu_records())
    report = build_report(tmp_path / "res")
    plots = {p.name: p for p in write_plots(report)}
    assert set(plots) == {"placement.png", "scaling.png", "predicted.png"}
    for p in plots.values():
        assert p.path is not None, p.why
        assert p.path.read_bytes()[:8] == PNG_MAGIC


def test_cpu_results_skip_the_plots_without_data_and_say_why(tmp_path):
    cpu = [record("c1", model="resnet50", workers=1, gpus=0, rate=20.0),
           record("c2", model="resnet50", workers=2, gpus=0, rate=30.0)]
    store_with(tmp_path, cpu)
    report = build_report(tmp_path / "res")
    plots = {p.name: p for p in write_plots(report)}
    assert plots["scaling.png"].path.is_file()
    assert plots["placement.png"].path is None and "one placement policy" in plots["placement.png"].why
    assert plots["predicted.png"].path is None and "no run has a prediction" in plots["predicted.png"].why
    assert not (tmp_path / "res" / "placement.png").exists()
    assert row(report.rows, workers=2)["scaling_efficiency"] == pytest.approx(0.75)


def test_one_worker_count_has_no_scaling_plot(tmp_path):
    store_with(tmp_path, [record("a", workers=4), record("b", workers=4, placement="spread")])
    plots = {p.name: p for p in write_plots(build_report(tmp_path / "res"))}
    assert plots["scaling.png"].path is None and "two or more worker counts" in plots["scaling.png"].why
    assert plots["placement.png"].path is not None


def test_cli_report_table_and_json(tmp_path):
    store_with(tmp_path, gpu_records())
    result = CliRunner().invoke(app, ["experiment", "report", str(tmp_path / "res")])
    assert result.exit_code == 0, result.output
    assert "TOPOLOGY/SPREAD" in result.output and "3.00x" in result.output
    assert "wrote" in result.output and "placement.png" in result.output

    result = CliRunner().invoke(app, ["experiment", "report", str(tmp_path / "res"), "-o", "json",
                                      "--no-plots"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["runs"] == len(gpu_records())
    assert data["statuses"] == {"Succeeded": 10, "Failed": 1}
    topo = row(data["rows"], model="vgg16", workers=4, placement="topology")
    assert topo["images_per_sec"] == pytest.approx(900.0)


def test_cli_report_of_a_dir_without_results_exits_2(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "missing"):
        result = CliRunner().invoke(app, ["experiment", "report", str(target)])
        assert result.exit_code == 2
        assert result.output.startswith(f"error: {target}: ")


def test_only_failures_draw_nothing_and_say_so(tmp_path):
    store_with(tmp_path, [record("a", status="Failed"), record("b", workers=2, status="TimedOut")])
    report = build_report(tmp_path / "res")
    assert [(p.path, p.why) for p in write_plots(report)] == [
        (None, "skipped: no run succeeded")] * 3
    assert report.statuses() == {"Failed": 1, "TimedOut": 1}
