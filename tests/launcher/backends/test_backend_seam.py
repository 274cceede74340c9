"""The backend seam: `run_submit` hands the spec, its plan and the backend's own options to
whatever backend it holds, and never asks which one it is; no backend imports the pipeline."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

import pytest

from launcher.backends import select
from launcher.backends.base import BaseBackend, Prepared, SubmitOptions, SubmitResult
from launcher.errors import UsageError
from launcher.pipeline import submitting
from launcher.preparing.planning import Plan
from tests.test_import_graph import imports_of, project_modules


@dataclass(frozen=True)
class QueueOptions(SubmitOptions):
    priority: int = 0


class QueueBackend(BaseBackend):
    """A third backend, written only against the base contract."""

    name = "queue"
    namespace = "team-a"
    job_command_flags = "--backend queue"

    def __init__(self):
        self.calls: list[tuple] = []

    def submit_options(self, *, mode, server_dry_run, schedule_timeout):
        if server_dry_run:
            raise UsageError("--dry-run=server: the queue backend has no server")
        return QueueOptions(mode=mode, priority=7)

    def plan(self, spec, cluster, assumptions, *, mode=None):
        self.calls.append(("plan", spec.name, cluster))
        return Plan(spec, notes=["queued by the queue backend"])

    def preflight(self, plan, options):
        self.calls.append(("preflight", plan.spec.name))
        return replace(plan, notes=[*plan.notes, "checked"]), ["queue has room"]

    def prepare(self, plan, options):
        # A fresh token per call, as SSH keys are: a second render would differ.
        entry = {"kind": "QueueEntry", "name": plan.spec.name, "priority": options.priority,
                 "token": uuid.uuid4().hex}
        self.calls.append(("prepare", plan.spec.name, options, entry))
        return Prepared(plan.spec, plan, (entry,))

    def submit(self, prepared, options):
        spec = prepared.spec
        self.calls.append(("submit", spec.name, spec.workers, prepared.plan.notes, options,
                           prepared.objects))
        return SubmitResult(spec.name, spec.namespace, self.name, message="queued")


@pytest.fixture
def queue_backend(monkeypatch):
    backend = QueueBackend()
    monkeypatch.setattr(select, "resolve_backend_name", lambda name, context, **_: (name, "asked"))
    monkeypatch.setattr(select, "make_backend", lambda name, **kw: backend)
    return backend


def _request(**kw):
    options = submitting.JobOptions({"name": "j", "workers": 3, "gpus_per_worker": 0},
                                    command=("true",))
    return submitting.SubmitRequest(options=options, backend="queue", **kw)


def test_submit_hands_spec_plan_and_the_backends_own_options(queue_backend):
    outcome = submitting.run_submit(_request(mode="operator"))
    (plan_call, preflight_call, prepare_call, submit_call) = queue_backend.calls
    assert plan_call == ("plan", "j", None)
    assert preflight_call == ("preflight", "j")
    assert prepare_call[:3] == ("prepare", "j", QueueOptions(mode="operator", priority=7))
    assert submit_call[:5] == ("submit", "j", 3, ["queued by the queue backend", "checked"],
                               QueueOptions(mode="operator", priority=7))
    (entry,) = submit_call[5]
    assert entry["kind"] == "QueueEntry" and len(entry["token"]) == 32
    assert outcome.namespace == "team-a"  # the backend's namespace when the user gave none


def test_dry_run_is_the_backends_and_sends_nothing(queue_backend):
    outcome = submitting.run_submit(_request(dry_run="client"))
    (entry,) = outcome.objects
    assert {k: v for k, v in entry.items() if k != "token"} == {
        "kind": "QueueEntry", "name": "j", "priority": 7}
    # A client dry run reads what a submit reads (its checks included) and sends nothing:
    # the submit's calls without the last, `submit`.
    dry = [c[0] for c in queue_backend.calls]
    queue_backend.calls.clear()
    submitting.run_submit(_request())
    assert dry == [c[0] for c in queue_backend.calls][:-1] and "submit" not in dry


def test_what_is_sent_is_what_was_prepared_once(queue_backend):
    submitting.run_submit(_request())
    prepares = [c for c in queue_backend.calls if c[0] == "prepare"]
    (submit_call,) = [c for c in queue_backend.calls if c[0] == "submit"]
    assert len(prepares) == 1
    assert submit_call[5] == (prepares[0][3],)  # the one prepared entry, not a second render


def test_a_backend_refuses_options_it_cannot_honour(queue_backend):
    with pytest.raises(UsageError, match="the queue backend has no server"):
        submitting.run_submit(_request(dry_run="server"))
    assert queue_backend.calls == []


def test_offline_dry_run_renders_kubernetes_objects_without_a_backend():
    outcome = submitting.run_submit(submitting.SubmitRequest(
        options=submitting.JobOptions({"name": "off", "workers": 2, "gpus_per_worker": 1,
                                       "image": "img:1"}, command=("true",)),
        dry_run="client"))
    assert [o["kind"] for o in outcome.objects][:2] == ["Job", "ConfigMap"]
    assert outcome.backend.name == "offline"


def test_backends_import_nothing_from_the_submit_pipeline():
    modules = project_modules()
    for name, path in modules.items():
        if name.startswith("launcher.backends"):
            assert "launcher.pipeline.submitting" not in imports_of(name, path, modules), name


def test_submit_hints_how_to_reach_the_job_on_its_backend(queue_backend):
    from typer.testing import CliRunner

    from launcher.cli.app import app

    result = CliRunner().invoke(app, ["submit", "mpi", "--backend", "local", "--name", "j",
                                      "true"])
    assert result.exit_code == 0, result.stderr
    assert "follow it with: hvdk8s logs -f j -n team-a --backend queue" in result.stderr


class SizingQueueBackend(QueueBackend):
    """A third backend that decides what the pipeline used to decide by asking which
    backend it held: the job's size, the mode, what to say about the start."""

    def __init__(self):
        super().__init__()
        self.listed: list[str | None] = []

    def sized(self, values, command):
        return values if "workers" in values else {**values, "workers": 5}

    def start_note(self, spec, plan, *, quick):
        return f"queue start: {spec.workers} workers (sized here: {quick})"

    def mode_for(self, asked, spec, *, gang_unserved):
        from launcher.backends.base import ModeDecision
        from mpijob.k8s.modes import Installed

        return ModeDecision("operator" if asked == "auto" else asked, Installed(known=False))

    def list(self, namespace=None, all_namespaces=False):
        self.listed.append(namespace)
        return []


@pytest.fixture
def sizing_backend(monkeypatch):
    backend = SizingQueueBackend()
    monkeypatch.setattr(select, "resolve_backend_name", lambda name, context, **_: (name, "asked"))
    monkeypatch.setattr(select, "make_backend", lambda name, **kw: backend)
    return backend


def test_the_backend_sizes_the_job_chooses_its_mode_and_says_how_it_starts(sizing_backend, capsys):
    options = submitting.JobOptions({"name": "j", "gpus_per_worker": 0}, command=("true",))
    submitting.run_submit(submitting.SubmitRequest(options=options, backend="queue",
                                                   mode="auto"))
    (prepare_call,) = [c for c in sizing_backend.calls if c[0] == "prepare"]
    (submit_call,) = [c for c in sizing_backend.calls if c[0] == "submit"]
    assert prepare_call[2] == QueueOptions(mode="operator", priority=7)
    assert submit_call[2] == 5
    assert "queue start: 5 workers (sized here: True)" in capsys.readouterr().err


def test_a_generated_name_is_chosen_once_from_the_validated_job(sizing_backend):
    options = submitting.JobOptions({"gpus_per_worker": 0}, command=("train.py",))
    outcome = submitting.run_submit(submitting.SubmitRequest(options=options, backend="queue"))
    assert sizing_backend.listed == ["team-a"]  # looked for once, in the job's namespace
    assert outcome.name.startswith("train-")  # the program the validated command runs
    assert [c[1] for c in sizing_backend.calls] == [outcome.name] * 4


def test_bad_options_are_refused_before_a_name_is_looked_for(sizing_backend):
    options = submitting.JobOptions({"workers": "many", "gpus_per_worker": 0},
                                    command=("true",))
    with pytest.raises(UsageError, match="--workers"):
        submitting.run_submit(submitting.SubmitRequest(options=options, backend="queue"))
    assert sizing_backend.listed == [] and sizing_backend.calls == []
