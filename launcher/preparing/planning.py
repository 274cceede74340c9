"""Planning a job: place it on a cluster snapshot and predict its throughput.

Shared by `submit`, `plan` and the experiment runner, and by the backends (each picks how
its jobs are planned), so it imports no backend and nothing of the submit pipeline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from launcher.errors import UserError

if TYPE_CHECKING:  # types only: the models load when a job is planned (lazy imports below)
    from mpijob.jobspec.spec import JobSpec
    from mpijob.perf.perfmodel import Assumptions, Prediction
    from mpijob.scheduling.cluster import Cluster
    from mpijob.scheduling.placement import Placement


@dataclass
class Plan:
    """Where a job runs and how fast: the placement (None: the scheduler places it) and the
    prediction (None: nothing to predict from), with what planning could not check."""

    spec: JobSpec
    placement: Placement | None = None
    prediction: Prediction | None = None
    notes: list[str] = field(default_factory=list)



def fits_when_idle(cluster: Cluster, spec: JobSpec) -> bool:
    """Would the job fit once the pods running now are gone (taints, labels, sizes kept)?"""
    # lazy: placement and the perf model (~25 ms) only when there is a cluster to plan on
    from mpijob.scheduling.placement import PlacementRequest, place

    idle = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, allocated=frozenset(), free_cpu=None, free_memory=None)
        for n in cluster.nodes))
    return place(idle, PlacementRequest.from_spec(spec), policy=spec.placement_policy).feasible


def plan_job(spec: JobSpec, cluster: Cluster | None,
             assumptions: Assumptions | None = None) -> Plan:
    """Place the job on the snapshot and predict its throughput; refuse what cannot fit."""
    plan = Plan(spec)
    if cluster is None:
        plan.notes.append("no cluster snapshot: the scheduler places the workers "
                          "(pass --cluster FILE to plan)")
        return plan
    from mpijob.scheduling.placement import PlacementRequest, place

    placement = place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
    if not placement.feasible:
        if spec.gang != "none" and fits_when_idle(cluster, spec):
            # A gang scheduler queues what does not fit now and places it when it does.
            plan.notes.append(f"the job does not fit the cluster now ({placement.reason}); "
                              f"{spec.gang} queues it and places it when it fits")
            return plan
        raise UserError(f"job {spec.name} cannot be placed: {placement.reason}")
    plan.placement = placement
    if spec.gpus_per_worker or assumptions is not None:
        try:
            from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, predict

            plan.prediction = predict(model=spec.benchmark.model,
                                      batch_size=spec.benchmark.batch_size,
                                      precision=spec.benchmark.precision,
                                      placement=placement, cluster=cluster,
                                      assumptions=assumptions or DEFAULT_ASSUMPTIONS)
        except (ImportError, ValueError) as exc:
            plan.notes.append(f"no prediction: {exc}")
    return plan


def plan_local_cpu(spec: JobSpec, assumptions: Assumptions | None) -> Plan:
    """A CPU job on this machine: predicted only from a calibration (ranks share one host)."""
    plan = Plan(spec)
    if assumptions is None or spec.gpus_per_worker:
        return plan
    from mpijob.perf.perfmodel import predict_cpu

    try:
        plan.prediction = predict_cpu(model=spec.benchmark.model,
                                      batch_size=spec.benchmark.batch_size,
                                      precision=spec.benchmark.precision, ranks=spec.workers,
                                      hosts=1, image_size=spec.benchmark.image_size,
                                      assumptions=assumptions)
    except ValueError as exc:
        plan.notes.append(f"no prediction: {exc}")
    return plan
