"""An elastic job's plan (mpijob.jobspec.elastic): placed for the workers it starts with
(the others hold nothing: `hvdk8s scale` places them on the cluster as it is then), with
which sizes fit now, and the predicted images/sec at every size it can have."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only
    from mpijob.jobspec.spec import JobSpec
    from mpijob.perf.perfmodel import Assumptions
    from mpijob.scheduling.cluster import Cluster


@dataclass(frozen=True)
class SizeForecast:
    workers: int
    fits_now: bool
    fits_idle: bool  # on the cluster with nothing else running
    images_per_sec: float | None  # None: no prediction (no GPUs and no calibration, or no fit)


@dataclass(frozen=True)
class ElasticPlan:
    plan_workers: int  # the workers placed: those it starts with (--workers)
    sizes: tuple[SizeForecast, ...]
    lines: tuple[str, ...]


def _at(spec: JobSpec, workers: int) -> JobSpec:
    return spec.model_copy(update={"workers": workers})


def plan_elastic(spec: JobSpec, cluster: Cluster | None,
                 assumptions: Assumptions | None) -> ElasticPlan:
    from mpijob.jobspec.elastic import sizes
    from mpijob.jobspec.elastic_bounds import HOROVOD_ELASTIC_DOCS

    head = (f"elastic: {spec.min_size}..{spec.max_size} workers, starting with {spec.workers} "
            f"(horovodrun elastic over Gloo; the program must use hvd.elastic: "
            f"{HOROVOD_ELASTIC_DOCS}); the gang is the minimum, {spec.min_size}")
    if cluster is None:
        return ElasticPlan(spec.workers, (), (head, "elastic: no cluster snapshot, so no "
                                              "placement or prediction per size"))
    from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, PredictionError, predict
    from mpijob.scheduling.placement import PlacementRequest, place

    idle = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, allocated=frozenset(), free_cpu=None, free_memory=None)
        for n in cluster.nodes))
    forecasts = []
    for n in sizes(spec):
        placed = place(cluster, PlacementRequest.from_spec(_at(spec, n)),
                       policy=spec.placement_policy)
        where = placed if placed.feasible else place(
            idle, PlacementRequest.from_spec(_at(spec, n)), policy=spec.placement_policy)
        rate = None
        if where.feasible and (spec.gpus_per_worker or assumptions is not None):
            try:
                rate = predict(model=spec.benchmark.model, batch_size=spec.benchmark.batch_size,
                               precision=spec.benchmark.precision, placement=where,
                               cluster=cluster if placed.feasible else idle,
                               assumptions=assumptions or DEFAULT_ASSUMPTIONS).images_per_sec
            except (PredictionError, ValueError):
                rate = None
        forecasts.append(SizeForecast(n, placed.feasible, where.feasible, rate))
    plan_workers = spec.workers
    grow = [f.workers for f in forecasts if f.fits_now and f.workers > spec.workers]
    fit = (f"elastic: placed for the {plan_workers} workers it starts with, one pod each; "
           "the others hold nothing until `hvdk8s scale` places them on the cluster as it is "
           "then" + (f" (up to {max(grow)} would fit now)" if grow else
                     " (none more would fit now)" if spec.max_size > spec.workers else ""))
    rates = ", ".join(
        f"{f.workers}: " + (f"{f.images_per_sec:,.0f}" if f.images_per_sec is not None else "-")
        + ("" if f.fits_now else " (once GPUs free up)" if f.fits_idle
           else " (never: more than the cluster has)") for f in forecasts)
    return ElasticPlan(plan_workers, tuple(forecasts),
                       (head, fit, f"elastic: predicted images/sec by workers: {rates}"))
