"""The experiment runner against a fake backend: records, failures, timeouts, Ctrl-C and
resume, parallel runs, efficiency."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from launcher.backends.base import FAILED
from launcher.cli.app import app
from launcher.errors import UserError
from launcher.experiments import runner as runner_module
from launcher.experiments.results import CSV_COLUMNS, ResultsStore
from launcher.experiments.runner import ExperimentRunner, Interrupted
from launcher.experiments.spec import load_experiment
from tests.experiment_fakes import FakeBackend, FakePrediction, Fate
from tests.paths import ROOT

REQUIRED_COLUMNS = ("run_id", "model", "workers", "gpus", "placement", "batch_size", "precision",
                    "status", "images_per_sec", "predicted_images_per_sec")


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))


def experiment_file(tmp_path: Path, **overrides) -> Path:
    data = {"name": "exp", "backend": "local", "timeout": 60,
            "matrix": {"model": "resnet50", "workers": [1, 2, 4], "gpus": 0}}
    data.update(overrides)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def make_runner(tmp_path, backend: FakeBackend, *, file=None, **kw) -> ExperimentRunner:
    loaded = load_experiment(file or experiment_file(tmp_path))
    kw.setdefault("sleep", lambda s: None)
    return ExperimentRunner(loaded, ResultsStore(tmp_path / "out"), submit=backend.submit_request,
                            open_backend=lambda *a: backend, **kw)


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_every_run_is_recorded_in_csv_and_jsonl_and_deleted(tmp_path):
    rates = {1: 10.0, 2: 16.0, 4: 24.0}
    backend = FakeBackend(fate_of=lambda o: Fate(images_per_sec=rates[o["workers"]]))
    summary = make_runner(tmp_path, backend).run()

    assert summary.total == 3 and summary.all_succeeded
    out = tmp_path / "out"
    rows = csv_rows(out / "results.csv")
    assert set(REQUIRED_COLUMNS) <= set(rows[0])
    assert [(r["workers"], r["status"], float(r["images_per_sec"])) for r in rows] == [
        ("1", "Succeeded", 10.0), ("2", "Succeeded", 16.0), ("4", "Succeeded", 24.0)]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["run_id"] for r in records] == [r["run_id"] for r in rows]
    first = records[0]
    assert first["gpus"] == 0 and first["precision"] == "fp32" and first["placement"] == "topology"
    assert first["duration_seconds"] == 90.0  # from the status's start and end
    assert first["result"] == {"world_size": 1}  # the HVDK8S_RESULT line of the log
    assert first["placement_detail"] == [{"node": "node-0", "gpus": [0]}]
    # Every job was deleted after it was recorded, and its log kept.
    assert backend.jobs == {} and backend.deleted == backend.submitted
    for r in records:
        assert "total images/sec" in (out / r["log"]).read_text()
    # Efficiency against this experiment's own one-rank run: rate / (ranks x 10).
    assert [r["scaling_efficiency"] for r in records] == pytest.approx([1.0, 0.8, 0.6])
    assert {r["efficiency_source"] for r in records} == {"measured"}


def test_a_failed_run_is_recorded_with_its_reason_and_the_matrix_goes_on(tmp_path):
    def fate(o):
        if o["workers"] == 2:
            return Fate(phase=FAILED, images_per_sec=None, reason="Error",
                        message="rank 1 exited with code 1")
        return Fate()

    backend = FakeBackend(fate_of=fate)
    summary = make_runner(tmp_path, backend).run()
    statuses = [(r["workers"], r["status"]) for r in summary.recorded]
    assert statuses == [(1, "Succeeded"), (2, "Failed"), (4, "Succeeded")]
    failed = summary.recorded[1]
    assert "rank 1 exited with code 1" in failed["reason"]
    assert failed["images_per_sec"] is None and failed["scaling_efficiency"] is None
    assert not summary.all_succeeded
    assert backend.jobs == {}


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_run_past_its_start_timeout_is_failed_by_tidy_and_recorded(tmp_path, parallel):
    """Reading a job fails nothing: the runner takes the explicit step (`tidy`) for a job
    that will not start, and records the cluster's failure."""
    def fate(o):
        if o["workers"] != 2:
            return Fate()
        return Fate(phase=FAILED, images_per_sec=None, reason="StartTimeout",
                    message="not running 60s after it was scheduled: ImagePullBackOff",
                    start_timeout=True)

    backend = FakeBackend(name="kubernetes", fate_of=fate)
    file = experiment_file(tmp_path, backend="kubernetes", parallel=parallel,
                           matrix={"model": "vgg16", "workers": [1, 2, 4], "gpus": 1})
    summary = make_runner(tmp_path, backend, file=file, poll_seconds=0).run()
    assert [(r["workers"], r["status"]) for r in summary.recorded if r["workers"] == 2] == [
        (2, "Failed")]
    failed = next(r for r in summary.recorded if r["workers"] == 2)
    assert "ImagePullBackOff" in failed["reason"]
    assert backend.tidied == [failed["run_id"]]
    assert backend.jobs == {}


def test_a_run_that_cannot_be_submitted_is_recorded_and_the_rest_run(tmp_path):
    def fate(o):
        return Fate(submit_error="job cannot be placed: 4 GPUs free, 8 asked") \
            if o["workers"] == 4 else Fate()

    summary = make_runner(tmp_path, FakeBackend(fate_of=fate)).run()
    assert [r["status"] for r in summary.recorded] == ["Succeeded", "Succeeded", "Failed"]
    assert summary.recorded[2]["reason"] == "not submitted: job cannot be placed: 4 GPUs free, 8 asked"


def test_timeout_is_recorded_and_the_job_deleted(tmp_path):
    backend = FakeBackend(fate_of=lambda o: Fate(on_wait="timeout") if o["workers"] == 1 else Fate())
    summary = make_runner(tmp_path, backend).run()
    assert summary.recorded[0]["status"] == "TimedOut"
    assert "after 60s" in summary.recorded[0]["reason"]
    assert summary.recorded[1]["status"] == "Succeeded"
    assert backend.jobs == {}
    assert 0 < backend.waited_timeouts[0] <= 60


def test_succeeded_job_without_a_rate_is_no_result(tmp_path):
    backend = FakeBackend(fate_of=lambda o: Fate(images_per_sec=None))
    summary = make_runner(tmp_path, backend, limit=1).run()
    assert summary.recorded[0]["status"] == "NoResult"


def test_rate_only_in_the_log_is_read_from_it(tmp_path):
    backend = FakeBackend(fate_of=lambda o: Fate(images_per_sec=42.5, log_only=True))
    summary = make_runner(tmp_path, backend, limit=1).run()
    assert summary.recorded[0]["status"] == "Succeeded"
    assert summary.recorded[0]["images_per_sec"] == 42.5


def test_interrupt_deletes_the_running_job_and_a_new_run_resumes(tmp_path):
    interrupting = FakeBackend(fate_of=lambda o: Fate(on_wait="interrupt") if o["workers"] == 2 else Fate())
    with pytest.raises(Interrupted) as stop:
        make_runner(tmp_path, interrupting).run()
    assert stop.value.recorded == 1 and stop.value.remaining == 2 and stop.value.left_running == []
    assert interrupting.jobs == {}  # the interrupted run's job is gone too
    store = ResultsStore(tmp_path / "out")
    first_id = interrupting.submitted[0]
    assert [r["run_id"] for r in store.records()] == [first_id]

    resumed = FakeBackend()
    summary = make_runner(tmp_path, resumed).run()
    assert first_id not in resumed.submitted
    assert resumed.submitted == interrupting.submitted[1:] + [summary.recorded[-1]["run_id"]]
    assert summary.skipped == 1 and len(summary.recorded) == 2
    assert len(store.succeeded_ids()) == 3

    # --rerun runs everything again; the newest record of a run is the one that counts.
    again = FakeBackend(fate_of=lambda o: Fate(images_per_sec=7.0))
    make_runner(tmp_path, again, rerun=True).run()
    assert len(again.submitted) == 3
    assert {r["images_per_sec"] for r in store.latest().values()} == {7.0}
    assert len(store.records()) == 6


def test_failed_runs_are_retried_on_the_next_invocation(tmp_path):
    flaky = FakeBackend(fate_of=lambda o: Fate(phase=FAILED) if o["workers"] == 4 else Fate())
    make_runner(tmp_path, flaky).run()
    retry = FakeBackend()
    summary = make_runner(tmp_path, retry).run()
    assert len(retry.submitted) == 1 and summary.recorded[0]["workers"] == 4


def test_limit_runs_only_the_first_n_still_to_do(tmp_path):
    backend = FakeBackend()
    make_runner(tmp_path, backend, limit=2).run()
    assert len(backend.submitted) == 2
    backend2 = FakeBackend()
    make_runner(tmp_path, backend2, limit=2).run()
    assert len(backend2.submitted) == 1  # only one left


def test_a_job_left_by_a_killed_runner_is_deleted_before_submitting(tmp_path):
    runner = make_runner(tmp_path, backend := FakeBackend())
    leftover = runner.runs()[0].run_id
    backend.jobs[leftover] = {"options": {"workers": 1, "gpus_per_worker": 0}, "fate": Fate(), "polls": 0}
    summary = runner.run()
    assert leftover in backend.deleted[:1]
    assert summary.all_succeeded and len(summary.recorded) == 3


def test_parallel_runs_wait_for_room(tmp_path):
    """With parallel 2, the second run finds no room while the first runs: it is tried
    again once the first has ended, not recorded as a failure."""
    in_flight = []

    class Crowded(FakeBackend):
        def submit_request(self, request):
            if self.jobs:
                raise UserError("job cannot be placed: no free GPUs")
            in_flight.append(request.options.get("name"))
            return super().submit_request(request)

    backend = Crowded(name="kubernetes", fate_of=lambda o: Fate(polls_until_done=2))
    file = experiment_file(tmp_path, backend="kubernetes", parallel=2,
                           matrix={"model": "vgg16", "workers": [1, 2], "gpus": 1})
    summary = make_runner(tmp_path, backend, file=file, poll_seconds=0).run()
    assert [r["status"] for r in summary.recorded] == ["Succeeded", "Succeeded"]
    assert len(in_flight) == 2


def test_parallel_runs_in_flight_together(tmp_path):
    backend = FakeBackend(name="kubernetes", fate_of=lambda o: Fate(polls_until_done=3))
    file = experiment_file(tmp_path, backend="kubernetes", parallel=3,
                           matrix={"model": "vgg16", "workers": [1, 2, 4], "gpus": 1})
    runner = make_runner(tmp_path, backend, file=file, poll_seconds=0)
    submitted_before_first_end = []
    original = backend.get

    def get(name, namespace=None):
        if not backend.deleted:
            submitted_before_first_end[:] = backend.submitted
        return original(name, namespace)

    backend.get = get
    summary = runner.run()
    assert len(submitted_before_first_end) == 3
    assert summary.all_succeeded


def test_no_access_to_the_backend_stops_before_any_run(tmp_path):
    class Unreachable(FakeBackend):
        def list(self, namespace=None, all_namespaces=False, *, live=False):
            raise UserError("no Kubernetes context: pass --context or set KUBECONFIG")

    backend = Unreachable()
    with pytest.raises(UserError, match="no Kubernetes context"):
        make_runner(tmp_path, backend).run()
    assert backend.submitted == [] and ResultsStore(tmp_path / "out").records() == []


def test_local_backend_runs_one_at_a_time_whatever_parallel_says(tmp_path):
    runner = make_runner(tmp_path, FakeBackend(), file=experiment_file(tmp_path, parallel=4))
    assert runner.parallel == 1


def test_prediction_is_recorded_and_is_the_efficiency_without_a_one_gpu_run(tmp_path):
    backend = FakeBackend(
        name="kubernetes",
        fate_of=lambda o: Fate(images_per_sec=300.0),
        prediction_of=lambda o: FakePrediction(images_per_sec=400.0, scaling_efficiency=0.85))
    file = experiment_file(tmp_path, backend="kubernetes",
                           matrix={"model": "vgg16", "workers": 4, "gpus": 1})
    summary = make_runner(tmp_path, backend, file=file).run()
    record = summary.recorded[0]
    assert record["predicted_images_per_sec"] == 400.0
    assert record["predicted_scaling_efficiency"] == 0.85
    assert record["scaling_efficiency"] == 0.85 and record["efficiency_source"] == "predicted"
    assert record["prediction"]["bottleneck"] == "compute"


def test_csv_alone_reads_back_typed(tmp_path):
    make_runner(tmp_path, FakeBackend()).run()
    store = ResultsStore(tmp_path / "out")
    from_jsonl = store.latest()
    store.jsonl_path.unlink()
    from_csv = store.latest()
    assert list(from_csv) == list(from_jsonl)
    for rid, rec in from_csv.items():
        for column in CSV_COLUMNS:
            assert rec[column] == from_jsonl[rid][column], column


def test_a_cut_jsonl_line_is_skipped(tmp_path):
    make_runner(tmp_path, FakeBackend(), limit=1).run()
    store = ResultsStore(tmp_path / "out")
    with open(store.jsonl_path, "a") as f:
        f.write('{"run_id": "exp-1234')
    assert len(store.records()) == 1 and store.skipped_lines == 1


def test_records_that_are_not_result_rows_are_skipped_and_counted(tmp_path):
    store = ResultsStore(tmp_path)
    store.jsonl_path.write_text("\n".join(json.dumps(r) for r in [
        {"run_id": "ok", "workers": "4", "status": "Succeeded"},  # an older, shorter record
        {"run_id": "typo", "wrokers": 4},
        {"run_id": "bad-status", "status": "Done"},
        {"run_id": "bad-time", "started": "noon"},
        {"workers": 4},  # no run id
    ]) + "\n")
    assert [(r["run_id"], r["workers"], r["gpus"]) for r in store.records()] == [("ok", 4, None)]
    assert store.skipped_lines == 4


def test_a_record_with_a_field_of_its_own_is_refused_when_written(tmp_path):
    with pytest.raises(ValidationError, match="wrokers"):
        ResultsStore(tmp_path).append({"run_id": "r", "wrokers": 4})
    assert not (tmp_path / "results.jsonl").exists()


def test_the_runs_recorded_by_earlier_versions_still_read():
    measured = ROOT / "benchmarks" / "calibration" / "measured"
    for folder in ("1rank", "2rank", "local-cpu"):
        store = ResultsStore(measured / folder)
        lines = store.jsonl_path.read_text().splitlines()
        assert len(store.records()) == len(lines) and store.skipped_lines == 0


# ----------------------------------------------------------------------------- the CLI
def patch_fake(monkeypatch, backend: FakeBackend) -> None:
    monkeypatch.setattr(runner_module, "_default_submit", backend.submit_request)
    monkeypatch.setattr(runner_module, "_default_open_backend", lambda *a: backend)


def test_cli_ctrl_c_exits_130_and_says_how_to_resume(tmp_path, monkeypatch):
    file = experiment_file(tmp_path)
    out = tmp_path / "out"
    patch_fake(monkeypatch, FakeBackend(fate_of=lambda o: Fate(on_wait="interrupt")
                                        if o["workers"] == 2 else Fate()))
    result = CliRunner().invoke(app, ["experiment", "run", str(file), "--out", str(out)])
    assert result.exit_code == 130
    assert f"resume with: hvdk8s experiment run {file} --out {out}" in result.output
    assert len(csv_rows(out / "results.csv")) == 1

    patch_fake(monkeypatch, FakeBackend())
    result = CliRunner().invoke(app, ["experiment", "run", str(file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 of 3 runs already succeeded" in result.output
    assert "3 of 3 succeeded in all" in result.output
    assert len(csv_rows(out / "results.csv")) == 3


def test_cli_exit_1_when_a_run_failed(tmp_path, monkeypatch):
    patch_fake(monkeypatch, FakeBackend(fate_of=lambda o: Fate(phase=FAILED)))
    result = CliRunner().invoke(app, ["experiment", "run", str(experiment_file(tmp_path)),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "3 Failed" in result.output


def test_cli_default_results_dir_is_results_slash_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    patch_fake(monkeypatch, FakeBackend())
    result = CliRunner().invoke(app, ["experiment", "run", str(experiment_file(tmp_path)),
                                      "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "exp" / "results.csv").is_file()


def test_cli_dry_run_lists_runs_and_what_is_done(tmp_path, monkeypatch):
    file = experiment_file(tmp_path)
    out = tmp_path / "out"
    patch_fake(monkeypatch, backend := FakeBackend())
    CliRunner().invoke(app, ["experiment", "run", str(file), "--out", str(out), "--limit", "1"])
    result = CliRunner().invoke(app, ["experiment", "run", str(file), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0
    assert "2 to run now" in result.output
    assert result.output.count("Succeeded") == 1
    assert len(backend.submitted) == 1  # the dry run submitted nothing


def test_second_runner_on_the_same_dir_is_refused(tmp_path):
    store = ResultsStore(tmp_path / "out")
    with store.lock():
        with pytest.raises(UserError, match="in use by another"):
            with ResultsStore(tmp_path / "out").lock():
                pass
