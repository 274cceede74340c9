"""Planning a job: place it on a cluster snapshot and predict its throughput.

Shared by `submit`, `plan` and the experiment runner, and by the backends (each picks how
its jobs are planned), so it imports no backend and nothing of the submit pipeline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from launcher.errors import UsageError, UserError

if TYPE_CHECKING:  # types only: the models load when a job is planned (lazy imports below)
    from launcher.preparing.network_plan import NetworkPlan
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
    # RDMA or TCP between nodes, and what to say (launcher.preparing.network_plan).
    network: NetworkPlan | None = None


def fits_when_idle(cluster: Cluster, spec: JobSpec) -> bool:
    """Would the job fit once the pods running now are gone (taints, labels, sizes kept)?"""
    # lazy: placement and the perf model (~25 ms) only when there is a cluster to plan on
    from mpijob.scheduling.placement import PlacementRequest, place

    idle = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, allocated=frozenset(), free_cpu=None, free_memory=None)
        for n in cluster.nodes))
    return place(idle, PlacementRequest.from_spec(spec), policy=spec.placement_policy).feasible


def plan_job(spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None = None,
             pod_security: str | None = None) -> Plan:
    """Place the job on the snapshot, decide its network (--rdma) and predict its
    throughput on that network; refuse what cannot fit; give the workers their default
    CPU/memory requests. `pod_security`: the namespace's enforced Pod Security level,
    where known."""
    elastic = None
    if spec.elastic:  # placed for as many workers as fit now, up to the maximum
        from launcher.preparing.elastic_plan import plan_elastic

        elastic = plan_elastic(spec, cluster, assumptions)
        placed = spec.model_copy(update={"workers": elastic.plan_workers})
        plan = _place_and_predict(placed, cluster, assumptions, pod_security)
        plan.spec = plan.spec.model_copy(update={"workers": spec.workers})
        plan.notes.extend(elastic.lines)
    else:
        plan = _place_and_predict(spec, cluster, assumptions, pod_security)
    if plan.spec.cpu is None or plan.spec.memory is None:
        from mpijob.jobspec.worker_share import plan_shares

        shares = plan_shares(cluster, plan.placement, plan.spec.gpus_per_worker)
        plan.spec = plan.spec.model_copy(update={"worker_shares": shares})
        plan.notes.extend(describe_requests(plan.spec, plan.placement))
    return plan


def describe_requests(spec: JobSpec, placement: Placement | None) -> list[str]:
    """One line per distinct worker request the defaults give, with where it came from."""
    from mpijob.jobspec.worker_share import pod_defaults

    pods: list[tuple[str | None, int]] = [(a.node, len(a.gpus) if spec.gpus_per_worker else a.workers)
            for a in placement.assignments] if placement is not None else []
    pods = pods or [(None, spec.gpus_per_worker or 1)]
    lines = []
    for node, slots in pods:
        default = pod_defaults(spec.worker_shares, node, slots)
        if default is None:
            continue
        cpu, memory, source = default
        cpu = f"{spec.cpu} per worker (--cpu)" if spec.cpu else (cpu or "none")
        memory = f"{spec.memory} per worker (--memory)" if spec.memory else (memory or "none")
        where = f"pod on {node}" if node else "each pod"
        line = (f"worker requests ({where}): cpu {cpu}, memory {memory} + --shm-size "
                f"{spec.shm_size} in its limit ({source})")
        if line not in lines:
            lines.append(line)
    if len(lines) > 1:
        lines.append("  (in operator mode every worker, from one template, requests the smallest of these)")
    return lines


def _place_and_predict(spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
                       pod_security: str | None) -> Plan:
    plan = Plan(spec)
    if cluster is None:
        if spec.rdma == "on" and spec.gpus_per_worker:
            raise UsageError("--rdma on: no cluster snapshot to find the nodes' RDMA devices "
                             "in; pass --cluster FILE, or request the device with "
                             "--extra-resource NAME=N")
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
    if not spec.gpus_per_worker:
        if assumptions is not None:
            _predict_cpu_workers(plan, spec, placement, cluster, assumptions)
        return plan
    from launcher.preparing import network_plan
    from mpijob.jobspec.spec import RdmaRequest

    try:
        decision = network_plan.decide(spec.rdma, placement, cluster, pod_security=pod_security,
                                       gpu_request=spec.gpu_request)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    res = decision.resource
    if decision.paired and res is not None and decision.pairing is not None:
        plan.spec = spec = spec.model_copy(update={"rdma_request": RdmaRequest(
            resource=res.name, per_gpu=True, nic_driver=decision.pairing.driver)})
    elif decision.use and res is not None:
        plan.spec = spec = spec.model_copy(update={"rdma_request": RdmaRequest(
            resource=res.name, per_gpu=res.kind == "vf", link=res.link, hcas=res.hcas)})
    try:
        plan.network = network_plan.plan_network(
            spec.rdma, model=spec.benchmark.model, batch_size=spec.benchmark.batch_size,
            precision=spec.benchmark.precision, placement=placement, cluster=cluster,
            assumptions=assumptions, decision=decision)
        plan.prediction = plan.network.prediction
    except ValueError as exc:
        plan.network = network_plan.NetworkPlan(decision)
        plan.notes.append(f"no prediction: {exc}")
    return plan


def _predict_cpu_workers(plan: Plan, spec, placement, cluster, assumptions) -> None:
    from mpijob.perf.perfmodel import predict

    try:
        plan.prediction = predict(model=spec.benchmark.model,
                                  batch_size=spec.benchmark.batch_size,
                                  precision=spec.benchmark.precision,
                                  placement=placement, cluster=cluster, assumptions=assumptions)
    except ValueError as exc:
        plan.notes.append(f"no prediction: {exc}")


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
