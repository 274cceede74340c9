"""What both Kubernetes backends share: the offline one, which a client dry run uses when no
cluster is asked anything, and the live one (launcher.backends.kubernetes.backend, which
extends this). The job's objects are rendered here, once: a dry run prints them and the
live backend's `submit` creates exactly them.

The job's pods are decided once (mpijob.k8s.workload: each worker's node, GPUs, requests,
claims and devices), then the builder of the job's mode turns them into objects, each
object whole:
- `pods`: built-in, no operator. The root is the launcher batch/v1 Job, created suspended
  so nothing runs before the gang is placed; a ConfigMap (hostfile and the in-pod scripts),
  an SSH Secret, a headless Service and one worker Pod per placed node follow, each owned
  by the root so that deleting the Job deletes the whole job (mpijob.k8s.render_pods).
  With a --start-timeout, a start gate Job whose pod owns the workers
  (mpijob.k8s.start_gate); an elastic job's workers are one Indexed Job instead
  (mpijob.k8s.render_elastic).
- `operator`: one kubeflow.org/v2beta1 MPIJob for the Kubeflow MPI Operator
  (mpijob.k8s.render_operator).
- `trainjob`: one trainer.kubeflow.org TrainJob for Kubeflow Trainer
  (mpijob.k8s.render_trainjob).

Light on purpose: a client dry run imports this, not the API client; the builders load
only to render.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.backends.base import BaseBackend, Prepared, SubmitOptions
from launcher.preparing.planning import Plan

if TYPE_CHECKING:  # types only: the models load when a job is rendered (lazy imports below)
    from mpijob.jobspec.spec import JobSpec
    from mpijob.k8s.render import SSHKeys
    from mpijob.k8s.workload import Workload
    from mpijob.scheduling.placement import Placement


def render(
    spec: JobSpec,
    *,
    mode: str = "pods",
    placement: Placement | None = None,
    ssh: SSHKeys | None = None,
    benchmark_source: str | None = None,
    elastic_source: str | None = None,
    prediction: dict | None = None,
    trainer_version: str | None = None,
    managed_by: str | None = None,
    gate_deadline: int | None = None,
    preflight_plan: dict | None = None,
) -> list[dict]:
    """The job's objects, the root first. Pure: the SSH keys and the benchmark sources come
    in as arguments; the root's uid is added at creation (mpijob.k8s.render.with_owner).
    `trainer_version`: the TrainJob API the cluster serves (None: the builder's own).
    `preflight_plan`: the preflight's expectations on the placement (None: the ranks of each
    pod only, nothing expected)."""
    from mpijob.jobspec.defaults import MODES
    from mpijob.k8s.workload import workload

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    work = workload(spec, placement, mode)
    files = preflight_files(work, preflight_plan)
    if mode == "operator":
        from mpijob.k8s.render_operator import render_operator

        return render_operator(work, benchmark_source, prediction, managed_by, files)
    if mode == "trainjob":  # what a TrainJob cannot carry is refused there
        from mpijob.k8s.render_trainjob import render_trainjob

        version = {"version": trainer_version} if trainer_version else {}
        return render_trainjob(work, benchmark_source, prediction, managed_by=managed_by,
                               preflight_files=files, **version)
    from mpijob.k8s.render_pods import render_pods

    if ssh is None:
        raise ValueError("pods mode needs SSH keys")
    return render_pods(work, ssh, benchmark_source, prediction, elastic_source, gate_deadline, files)


def preflight_files(work: Workload, plan: dict | None) -> dict[str, str] | None:
    """The preflight's ConfigMap entries: its program, and its plan for these pods (the
    planned pods' expectations where the pods are the planned ones, made uniform where one
    template or an elastic start decides which pod runs where, none otherwise)."""
    import json

    from mpijob.k8s.command import PREFLIGHT_IN_POD, PREFLIGHT_PLAN_IN_POD
    from mpijob.k8s.render import pod_script
    from mpijob.perf import preflight

    spec = work.spec
    if not spec.runs_preflight:
        return None
    source = pod_script(PREFLIGHT_IN_POD.rsplit("/", 1)[1])
    if work.shape is not None:  # one template: which worker lands on which node is the operator's
        slots = [work.shape.slots] * work.shape.replicas
        plan = preflight.for_template(plan, slots) if plan else None
    else:
        slots = [p.slots for p in work.workers]
        if spec.elastic and plan:
            plan = preflight.for_elastic(plan, spec.gpus_per_worker)
    if plan is None or (not spec.elastic and [p["slots"] for p in plan["pods"]] != slots):
        plan = preflight.plain_plan(slots, gpus=spec.gpus_per_worker > 0)
    return {PREFLIGHT_IN_POD.rsplit("/", 1)[1]: source,
            PREFLIGHT_PLAN_IN_POD.rsplit("/", 1)[1]: json.dumps(plan, indent=1, sort_keys=True) + "\n"}


class KubernetesObjects(BaseBackend):
    name = "offline"

    def prepare(self, plan: Plan, options: SubmitOptions) -> Prepared:
        """Render the job's objects, once; computed here without a call to anything."""
        # lazy: choosing a backend imports this module for every job command; SSH keys
        # (cryptography) load only to submit or dry-run
        from launcher.preparing.benchmark_program import benchmark_source, elastic_benchmark_source
        from launcher.preparing.sshkeys import generate_ssh_keys, placeholder_ssh_keys
        from mpijob.jobspec import defaults
        from mpijob.k8s.start_gate import initial_deadline

        spec = plan.spec
        keys = placeholder_ssh_keys if options.shown_only else generate_ssh_keys
        # The offline dry run's options carry no timeout: it shows submit's default.
        timeout = getattr(options, "schedule_timeout", defaults.SCHEDULE_TIMEOUT_SECONDS)
        objects = render(
            spec, mode=options.mode, placement=plan.placement,
            ssh=keys(comment=f"hvdk8s-{spec.name}") if options.mode == "pods" else None,
            benchmark_source=benchmark_source() if spec.runs_benchmark else None,
            elastic_source=elastic_benchmark_source() if spec.runs_benchmark and spec.elastic
            else None,
            prediction=plan.prediction.to_json() if plan.prediction is not None else None,
            trainer_version=options.trainer_version, managed_by=options.managed_by,
            gate_deadline=initial_deadline(spec, timeout),
            preflight_plan=plan.preflight)
        return Prepared(spec, plan, tuple(objects))
