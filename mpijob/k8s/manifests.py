"""Render a job spec (and its placement) to Kubernetes objects, as plain dicts.

The job's pods are decided once (mpijob.k8s.workload: each worker's node, GPUs, requests,
claims and devices), then one builder turns them into objects, each object whole:
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

Pure: the SSH keys, the benchmark sources and the root's uid come in as arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpijob.jobspec.defaults import MODES
from mpijob.k8s.render import SSHKeys, with_owner
from mpijob.k8s.render_operator import render_operator
from mpijob.k8s.render_pods import render_pods
from mpijob.k8s.render_trainjob import VERSION as TRAINER_VERSION
from mpijob.k8s.render_trainjob import render_trainjob
from mpijob.k8s.workload import workload

if TYPE_CHECKING:  # only types here
    from mpijob.jobspec.spec import JobSpec
    from mpijob.scheduling.placement import Placement


def render(
    spec: JobSpec,
    *,
    mode: str = "pods",
    placement: Placement | None = None,
    ssh: SSHKeys | None = None,
    benchmark_source: str | None = None,
    elastic_source: str | None = None,
    root_uid: str | None = None,
    prediction: dict | None = None,
    trainer_version: str = TRAINER_VERSION,
    managed_by: str | None = None,
) -> list[dict]:
    if mode == "pods":
        if ssh is None:
            raise ValueError("pods mode needs SSH keys")
        objects = render_pods(workload(spec, placement, mode), ssh, benchmark_source, prediction,
                              elastic_source)
    elif mode == "operator":
        objects = render_operator(workload(spec, placement, mode), benchmark_source, prediction,
                                  managed_by)
    elif mode == "trainjob":  # what a TrainJob cannot carry is refused there
        objects = render_trainjob(workload(spec, placement, mode), benchmark_source, prediction,
                                  version=trainer_version, managed_by=managed_by)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return with_owner(objects, root_uid) if root_uid else objects
