"""Render a job spec (and its placement) to Kubernetes objects, as plain dicts.

Two modes:
- `pods`: built-in, no operator. The root is the launcher batch/v1 Job, created suspended
  so nothing runs before the gang is placed; a ConfigMap (hostfile and the in-pod scripts),
  an SSH Secret, a headless Service and one worker Pod per placed node follow, each owned
  by the root so that deleting the Job deletes the whole job.
- `operator`: one kubeflow.org/v2beta1 MPIJob for the Kubeflow MPI Operator.

Pure: the SSH keys, the benchmark source and the root's uid come in as arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpijob.jobspec.defaults import MODES
from mpijob.k8s.podpatch import apply_pod_patches
from mpijob.k8s.render import SSHKeys, with_owner
from mpijob.k8s.render_computedomain import apply_compute_domain
from mpijob.k8s.render_dra import apply_dra
from mpijob.k8s.render_elastic import apply_elastic
from mpijob.k8s.render_multus import apply_networks
from mpijob.k8s.render_network import apply_network_topology
from mpijob.k8s.render_operator import render_operator
from mpijob.k8s.render_pods import render_pods
from mpijob.k8s.render_rdma import apply_rdma
from mpijob.k8s.render_volumes import apply_volumes
from mpijob.k8s.start_gate import add_start_gate

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
) -> list[dict]:
    if mode == "pods":
        if ssh is None:
            raise ValueError("pods mode needs SSH keys")
        objects = render_pods(spec, placement, ssh, benchmark_source, prediction)
    elif mode == "operator":
        objects = render_operator(spec, placement, benchmark_source, prediction)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    objects = apply_network_topology(objects, spec, placement)
    objects = apply_dra(objects, spec, placement)
    objects = apply_compute_domain(objects, spec, placement)
    objects = apply_rdma(objects, spec)
    objects = apply_networks(objects, spec)
    objects = apply_volumes(objects, spec)
    objects = apply_pod_patches(objects, spec, mode)  # last: it sees every other field
    if mode == "pods":  # after the patches: they are the launcher's and workers' only
        objects = apply_elastic(objects, spec, placement, benchmark_source, elastic_source)
        objects = add_start_gate(objects, spec)
    return with_owner(objects, root_uid) if root_uid else objects
