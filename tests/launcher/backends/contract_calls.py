"""The backend contract's calls in the order `hvdk8s submit` makes them after planning
(launcher/pipeline/submitting.py), for tests that hand a backend a spec and a placement
of their own rather than going through the CLI's options."""

from __future__ import annotations

import dataclasses

from launcher.backends.base import SubmitResult
from launcher.backends.kubernetes.backend import DEFAULT_SCHEDULE_TIMEOUT, KubernetesBackend
from launcher.backends.local.backend import LocalBackend
from launcher.errors import Refused
from launcher.preparing.planning import Plan
from mpijob.jobspec import defaults
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.modes import choose_mode
from mpijob.perf.perfmodel import Prediction
from mpijob.scheduling.placement import Placement


def create_job(backend: KubernetesBackend, spec: JobSpec, placement: Placement | None = None, *,
               mode: defaults.Mode = defaults.MODE, dry_run: bool = False,
               schedule_timeout: float | None = DEFAULT_SCHEDULE_TIMEOUT,
               prediction: Prediction | None = None,
               delete_on_timeout: bool | None = None) -> SubmitResult:
    """The mode chosen, then preflight, prepare and submit: what the pipeline does once it
    has a plan."""
    choice = choose_mode(mode, spec, backend.installed_modes(spec))
    if choice.mode is None:
        raise Refused(choice.line)
    mode = choice.mode
    options = dataclasses.replace(
        backend.submit_options(mode=mode, server_dry_run=dry_run,
                               schedule_timeout=schedule_timeout),
        delete_on_timeout=delete_on_timeout)
    options = backend.job_options(spec, options)
    plan, notes = backend.preflight(Plan(spec, placement, prediction), options)
    result = backend.submit(backend.prepare(plan, options), options)
    if notes and result.message:
        result.message = "\n".join([result.message, *(f"note: {n}" for n in notes)])
    return result


def _local_options(backend: LocalBackend, mode: defaults.Mode):
    return backend.submit_options(mode=mode, server_dry_run=False, schedule_timeout=None)


def start_local(backend: LocalBackend, spec: JobSpec, placement: Placement | None = None, *,
                mode: defaults.Mode = "pods") -> SubmitResult:
    """The local backend's prepare and submit: the launch decided, then started."""
    options = _local_options(backend, mode)
    return backend.submit(backend.prepare(Plan(spec, placement), options), options)


def describe_local(backend: LocalBackend, spec: JobSpec, placement: Placement | None = None) -> dict:
    """What a local dry run prints: the one object of the backend's prepare."""
    (described,) = backend.prepare(Plan(spec, placement), _local_options(backend, "pods")).objects
    return described
