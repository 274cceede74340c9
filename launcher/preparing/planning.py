"""Planning a job on a cluster snapshot: how its workers request GPUs (DRA where the nodes
publish it, else the device plugin), where they go, their network, the predicted
throughput and the workers' default CPU/memory requests.

`plan_placed` is the one plan of a placed job, for `submit` (`plan_job`, which places it
first) and for `plan` (which places it under every policy it compares). Shared by the
backends (each picks how its jobs are planned) and the experiment runner, so it imports
no backend and nothing of the submit pipeline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from launcher.errors import Refused, UsageError

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
    # What the preflight expects of each path on this placement (mpijob.perf.preflight);
    # None: off, or nothing placed (the ranks' figures are then reported, not judged).
    preflight: dict | None = None


def fits_when_idle(cluster: Cluster, spec: JobSpec) -> bool:
    """Would the job fit once the pods running now are gone (taints, labels, sizes kept)?"""
    # lazy: placement and the perf model (~25 ms) only when there is a cluster to plan on
    from mpijob.scheduling.placement import PlacementRequest, place

    idle = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, allocated=frozenset(), free_cpu=None, free_memory=None)
        for n in cluster.nodes))
    return place(idle, PlacementRequest.from_spec(spec), policy=spec.placement_policy).feasible


def plan_job(spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None = None,
             pod_security: str | None = None, rdma_fix: str | None = None) -> Plan:
    """submit's plan: place the job on the snapshot (refusing what cannot fit), then
    `plan_placed`; say what the workers' default requests are. `pod_security`: the
    namespace's enforced Pod Security level, where known. An elastic job is placed for the
    workers it starts with (launcher.preparing.elastic_plan)."""
    from mpijob.jobspec.defaults import PREFLIGHT_KUBERNETES

    spec = spec.with_preflight_default(PREFLIGHT_KUBERNETES)
    if spec.elastic:
        from launcher.preparing.elastic_plan import plan_elastic

        elastic = plan_elastic(spec, cluster, assumptions)
        plan = _place_and_plan(spec, cluster, assumptions, pod_security, rdma_fix)
        plan.notes.extend(elastic.lines)
    else:
        plan = _place_and_plan(spec, cluster, assumptions, pod_security, rdma_fix)
    if plan.spec.worker_shares:
        plan.notes.extend(describe_requests(plan.spec, plan.placement))
    return plan


def _place_and_plan(spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
                    pod_security: str | None, rdma_fix: str | None = None) -> Plan:
    if cluster is None:
        spec, said = resolve_gpu_request(spec, cluster)
        if spec.rdma == "on" and spec.gpus_per_worker:
            raise UsageError("--rdma on: no cluster snapshot to find the nodes' RDMA devices "
                             "in; pass --cluster FILE, or request the device with "
                             "--extra-resource NAME=N")
        plan = _with_shares(Plan(spec, notes=[*said, "no cluster snapshot: the scheduler "
                                              "places the workers (pass --cluster FILE to plan)"]),
                            cluster)
    else:
        from mpijob.scheduling.placement import PlacementRequest, place

        placement = place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
        if placement.feasible:
            plan = plan_placed(spec, cluster, placement, assumptions, pod_security,
                               rdma_fix=rdma_fix)
        elif spec.gang != "none" and fits_when_idle(cluster, spec):
            # A gang scheduler queues what does not fit now and places it when it does.
            spec, said = resolve_gpu_request(spec, cluster)
            plan = _with_shares(Plan(spec, notes=[
                *said, f"the job does not fit the cluster now ({placement.reason}); "
                f"{spec.gang} queues it and places it when it fits"]), cluster)
        else:
            raise Refused(f"job {spec.name} cannot be placed: {placement.reason}")
    return plan


def resolve_gpu_request(spec: JobSpec, cluster: Cluster | None) -> tuple[JobSpec, list[str]]:
    """--gpu-request: auto takes DRA where the cluster's nodes publish DRA GPU devices (the
    network decision depends on it: GPUs and NICs paired through DRA); the spec with the
    choice made, and what to say about it."""
    if not spec.gpus_per_worker:
        return spec.model_copy(update={"gpu_request": "device-plugin"}), []
    has_dra = cluster is not None and any(n.dra_devices for n in cluster.nodes)
    choice = spec.gpu_request
    mode = choice if choice != "auto" else ("dra" if has_dra else "device-plugin")
    if mode == "dra" and cluster is not None and not has_dra:
        raise UsageError("--gpu-request dra: no node of the cluster publishes DRA GPU devices "
                         "(no gpu.nvidia.com ResourceSlices); use --gpu-request device-plugin")
    said = (["gpus: requested through DRA ResourceClaims"
             + (" (elastic: each worker pod claims any free GPUs of its node, so that a "
                "worker joining later takes whichever freed up)" if spec.elastic else
                " selecting the planned devices" if has_dra else
                " (no device data: any GPUs sharing one PCIe root)")] if mode == "dra" else [])
    return spec.model_copy(update={"gpu_request": mode}), said


def plan_placed(spec: JobSpec, cluster: Cluster, placement: Placement,
                assumptions: Assumptions | None = None, pod_security: str | None = None, *,
                rdma_fix: str | None = None) -> Plan:
    """The one plan of a job on a feasible placement, for `submit` and `plan` alike: how
    its GPUs are requested (DRA where the nodes publish it), its network (--rdma: the
    device the workers request, or TCP), its throughput on that network, and the workers'
    default CPU/memory requests (a share of each planned node)."""
    spec, said = resolve_gpu_request(spec, cluster)
    plan = Plan(spec, placement=placement, notes=said)
    if not spec.gpus_per_worker:
        _predict_cpu_workers(plan, spec, placement, cluster, assumptions)
        return _with_shares(plan, cluster)
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
            assumptions=assumptions, decision=decision, rdma_fix=rdma_fix)
        plan.prediction = plan.network.prediction
    except ValueError as exc:
        plan.network = network_plan.NetworkPlan(decision)
        plan.notes.append(f"no prediction: {exc}")
    plan.preflight = preflight_plan(spec, placement, cluster, assumptions, decision.transport)
    if plan.preflight is not None:
        from mpijob.perf.preflight import describe

        plan.notes.append(describe(plan.preflight, str(spec.preflight)))
    return _with_shares(plan, cluster)


def preflight_plan(spec: JobSpec, placement: Placement, cluster: Cluster,
                   assumptions: Assumptions | None, transport: str) -> dict | None:
    """The preflight's expectations on the planned pods, on the network the job gets."""
    if not spec.runs_preflight or not spec.gpus_per_worker:
        return None
    from mpijob.perf import preflight
    from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS

    by_name = {n.name: n for n in cluster.nodes}
    if any(a.node not in by_name for a in placement.assignments):
        return None
    base = dataclasses.replace(assumptions or DEFAULT_ASSUMPTIONS, transport=transport,
                               nvlink_channel=bool(placement.compute_domain))
    try:
        return preflight.gpu_plan([(by_name[a.node], tuple(a.gpus)) for a in placement.assignments],
                                  [a.slots for a in placement.assignments], assumptions=base)
    except ValueError:  # a placement the model cannot price: figures reported, not judged
        return None


def _with_shares(plan: Plan, cluster: Cluster | None) -> Plan:
    """The workers' default CPU/memory requests where --cpu/--memory leave them open."""
    if plan.spec.cpu is None or plan.spec.memory is None:
        from mpijob.jobspec.worker_share import plan_shares
        from mpijob.k8s import start_gate

        # The start gate's pod is scheduled before the workers, on any node.
        gate = start_gate.GATE_RESOURCES["requests"]
        beside = ((gate["cpu"], gate["memory"], "the start gate's pod")
                  if start_gate.applies(plan.spec) else None)
        shares = plan_shares(cluster, plan.placement, plan.spec.gpus_per_worker, beside)
        plan.spec = plan.spec.model_copy(update={"worker_shares": shares})
    return plan


def describe_requests(spec: JobSpec, placement: Placement | None) -> list[str]:
    """One line per distinct worker request the defaults give, with where it came from."""
    from mpijob.jobspec.worker_share import pod_defaults

    pods: list[tuple[str | None, int]] = ([(a.node, a.slots) for a in placement.assignments]
                                          if placement is not None and not spec.elastic
                                          else [])
    # An elastic job's workers come from one template, one worker a pod, on any node.
    pods = pods or [(None, spec.gpus_per_worker or 1)]
    lines = []
    for node, slots in pods:
        default = pod_defaults(spec.worker_shares, node, slots)
        if default is None:
            continue
        cpu, memory, source = default
        cpu = f"{spec.cpu} per worker (--cpu)" if spec.cpu else (cpu or "none")
        memory = f"{spec.memory} per worker (--memory)" if spec.memory else (memory or "none")
        where = (f"pod on {node}" if node else "each worker's pod" if spec.elastic
                 else "each pod")
        line = (f"worker requests ({where}): cpu {cpu}, memory {memory} + --shm-size "
                f"{spec.shm_size} in its limit ({source})")
        if line not in lines:
            lines.append(line)
    if len(lines) > 1:
        lines.append("  (in operator mode every worker, from one template, requests the smallest of these)")
    return lines


def _predict_cpu_workers(plan: Plan, spec, placement, cluster, assumptions) -> None:
    """CPU workers: predicted only from a calibration (the perf model says so otherwise)."""
    from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, predict

    try:
        plan.prediction = predict(model=spec.benchmark.model,
                                  batch_size=spec.benchmark.batch_size,
                                  precision=spec.benchmark.precision, placement=placement,
                                  cluster=cluster, assumptions=assumptions or DEFAULT_ASSUMPTIONS)
    except ValueError as exc:
        plan.notes.append(f"no prediction: {exc}")
