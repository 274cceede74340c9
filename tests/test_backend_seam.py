"""The backend seam: `run_submit` hands the spec, its plan and the backend's own options to
whatever backend it holds, and never asks which one it is; no backend imports the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from launcher.backends import select
from launcher.backends.base import BaseBackend, SubmitOptions, SubmitResult
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

    def plan(self, spec, cluster, assumptions):
        self.calls.append(("plan", spec.name, cluster))
        return Plan(spec, notes=["queued by the queue backend"])

    def dry_run(self, spec, plan, options):
        self.calls.append(("dry_run", spec.name, options))
        return [{"kind": "QueueEntry", "name": spec.name, "priority": options.priority}]

    def submit(self, spec, plan, options):
        self.calls.append(("submit", spec.name, spec.workers, plan.notes, options))
        return SubmitResult(spec.name, spec.namespace, self.name, message="queued")


@pytest.fixture
def queue_backend(monkeypatch):
    backend = QueueBackend()
    monkeypatch.setattr(select, "resolve_backend_name", lambda name, context: (name, "asked"))
    monkeypatch.setattr(select, "make_backend", lambda name, **kw: backend)
    return backend


def _request(**kw):
    options = submitting.JobOptions(name="j", workers=3, gpus=0, command=["true"])
    return submitting.SubmitRequest(options=options, backend="queue", **kw)


def test_submit_hands_spec_plan_and_the_backends_own_options(queue_backend):
    outcome = submitting.run_submit(_request(mode="operator"))
    (plan_call, submit_call) = queue_backend.calls
    assert plan_call == ("plan", "j", None)
    assert submit_call == ("submit", "j", 3, ["queued by the queue backend"],
                           QueueOptions(mode="operator", priority=7))
    assert outcome.namespace == "team-a"  # the backend's namespace when the user gave none


def test_dry_run_is_the_backends_and_sends_nothing(queue_backend):
    outcome = submitting.run_submit(_request(dry_run="client"))
    assert outcome.objects == [{"kind": "QueueEntry", "name": "j", "priority": 7}]
    assert [c[0] for c in queue_backend.calls] == ["plan", "dry_run"]


def test_a_backend_refuses_options_it_cannot_honour(queue_backend):
    with pytest.raises(UsageError, match="the queue backend has no server"):
        submitting.run_submit(_request(dry_run="server"))
    assert queue_backend.calls == []


def test_offline_dry_run_renders_kubernetes_objects_without_a_backend():
    outcome = submitting.run_submit(submitting.SubmitRequest(
        options=submitting.JobOptions(name="off", workers=2, gpus=1, image="img:1",
                                      command=["true"]),
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
