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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.errors import Refused, UsageError
from launcher.output import note

if TYPE_CHECKING:  # types only: the models load when a job is planned (lazy imports below)
    from launcher.preparing.network_plan import NetworkPlan
    from mpijob.jobspec.decisions import Choices, Decisions
    from mpijob.jobspec.defaults import GpuRequest, GpuRequestChoice, PreflightMode
    from mpijob.jobspec.spec import JobSpec, Network, RdmaRequest
    from mpijob.jobspec.worker_share import ResourceShare
    from mpijob.perf.perfmodel import Assumptions, Prediction
    from mpijob.scheduling.cluster import Cluster
    from mpijob.scheduling.placement import Placement


@dataclass(frozen=True)
class Plan:
    """Where a job runs and how fast: the placement (None: the scheduler places it) and the
    prediction (None: nothing to predict from), with what planning could not check. Built
    once: `spec` is the job as asked, `decisions` what the plan decided for it
    (mpijob.jobspec.decisions; a plan made without planning decides what the spec names)."""

    spec: JobSpec
    placement: Placement | None = None
    prediction: Prediction | None = None
    notes: tuple[str, ...] = ()
    # RDMA or TCP between nodes, and what to say (launcher.preparing.network_plan).
    network: NetworkPlan | None = None
    # What the preflight expects of each path on this placement (mpijob.perf.preflight);
    # None: off, or nothing placed (the ranks' figures are then reported, not judged).
    preflight: dict | None = None
    decisions: Decisions = None  # type: ignore[assignment]  # set in __post_init__

    def __post_init__(self) -> None:
        if self.decisions is None and self.spec is not None:
            from mpijob.jobspec.decisions import Decisions

            object.__setattr__(self, "decisions", Decisions.undecided(self.spec))


def fits_when_idle(cluster: Cluster, spec: JobSpec) -> bool:
    """Would the job fit once the pods running now are gone (taints, labels, sizes kept)?"""
    # lazy: placement and the perf model (~25 ms) only when there is a cluster to plan on
    from mpijob.scheduling.placement import PlacementRequest, place

    idle = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, allocated=frozenset(), free_cpu=None, free_memory=None)
        for n in cluster.nodes))
    return place(idle, PlacementRequest.from_spec(spec), policy=spec.placement_policy).feasible


def plan_job(spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None = None,
             pod_security: str | None = None, rdma_fix: str | None = None, *,
             choices: Choices | None = None, networks: tuple[Network, ...] | None = None,
             host_ssh_port: bool = False) -> Plan:
    """submit's plan: place the job on the snapshot (refusing what cannot fit), then
    `plan_placed`; say what the workers' default requests are. `pod_security`: the
    namespace's enforced Pod Security level, where known. An elastic job is placed for the
    workers it starts with (launcher.preparing.elastic_plan). `choices`: the --rdma and
    --gpu-request to plan from (None: the spec's); `networks`: the Multus networks with
    their device resources, where read (None: as the spec names them); `host_ssh_port`: on
    the host network, an sshd port free on the job's nodes (the Kubernetes backend's)."""
    from mpijob.jobspec.decisions import Choices
    from mpijob.jobspec.defaults import PREFLIGHT_KUBERNETES

    asked = _Asked(choices or Choices.of(spec),
                   spec.preflight if spec.preflight is not None else PREFLIGHT_KUBERNETES,
                   networks if networks is not None else spec.networks, host_ssh_port)
    elastic_lines: tuple[str, ...] = ()
    if spec.elastic:
        from launcher.preparing.elastic_plan import plan_elastic

        elastic_lines = plan_elastic(spec, cluster, assumptions).lines
    if cluster is None:
        if asked.choices.rdma == "on" and spec.gpus_per_worker:
            raise UsageError("--rdma on: no cluster snapshot to find the nodes' RDMA devices "
                             "in; pass --cluster FILE, or request the device with "
                             "--extra-resource NAME=N")
        return _unplaced(spec, cluster, asked, elastic_lines, "no cluster snapshot: the "
                         "scheduler places the workers (pass --cluster FILE to plan)")
    from mpijob.scheduling.placement import PlacementRequest, place

    placement = place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
    if placement.feasible:
        return _placed(spec, cluster, placement, assumptions, pod_security, rdma_fix, asked,
                       elastic_lines, describe=True)
    if spec.gang != "none" and fits_when_idle(cluster, spec):
        # A gang scheduler queues what does not fit now and places it when it does.
        return _unplaced(spec, cluster, asked, elastic_lines,
                         f"the job does not fit the cluster now ({placement.reason}); "
                         f"{spec.gang} queues it and places it when it fits")
    raise Refused(f"job {spec.name} cannot be placed: {placement.reason}")


@dataclass(frozen=True)
class _Asked:
    """What a plan decides from besides the spec and the cluster."""

    choices: Choices
    preflight: PreflightMode | None
    networks: tuple[Network, ...]
    host_ssh_port: bool = False


def _unplaced(spec: JobSpec, cluster: Cluster | None, asked: _Asked,
              elastic_lines: tuple[str, ...], why: str) -> Plan:
    gpu_request, said = resolve_gpu_request(spec, cluster, asked.choices.gpu_request)
    return _built(spec, cluster, None, asked, gpu_request, None,
                  [*said, why, *elastic_lines], describe=True)


def resolve_gpu_request(spec: JobSpec, cluster: Cluster | None,
                        choice: GpuRequestChoice | None = None) -> tuple[GpuRequest, list[str]]:
    """--gpu-request: auto takes DRA where the cluster's nodes publish DRA GPU devices (the
    network decision depends on it: GPUs and NICs paired through DRA); the choice made,
    and what to say about it. `choice`: the one to decide from (None: the spec's)."""
    if not spec.gpus_per_worker:
        return "device-plugin", []
    has_dra = cluster is not None and any(n.dra_devices for n in cluster.nodes)
    choice = choice or spec.gpu_request
    mode: GpuRequest = choice if choice != "auto" else ("dra" if has_dra else "device-plugin")
    if mode == "dra" and cluster is not None and not has_dra:
        raise UsageError("--gpu-request dra: no node of the cluster publishes DRA GPU devices "
                         "(no gpu.nvidia.com ResourceSlices); use --gpu-request device-plugin")
    said = (["gpus: requested through DRA ResourceClaims"
             + (" (elastic: each worker pod claims any free GPUs of its node, so that a "
                "worker joining later takes whichever freed up)" if spec.elastic else
                " selecting the planned devices" if has_dra else
                " (no device data: any GPUs sharing one PCIe root)")] if mode == "dra" else [])
    return mode, said


def plan_placed(spec: JobSpec, cluster: Cluster, placement: Placement,
                assumptions: Assumptions | None = None, pod_security: str | None = None, *,
                rdma_fix: str | None = None) -> Plan:
    """The one plan of a job on a feasible placement, for `submit` and `plan` alike: how
    its GPUs are requested (DRA where the nodes publish it), its network (--rdma: the
    device the workers request, or TCP), its throughput on that network, and the workers'
    default CPU/memory requests (a share of each planned node)."""
    from mpijob.jobspec.decisions import Choices

    return _placed(spec, cluster, placement, assumptions, pod_security, rdma_fix,
                   _Asked(Choices.of(spec), spec.preflight, spec.networks), ())


def _placed(spec: JobSpec, cluster: Cluster, placement: Placement,
            assumptions: Assumptions | None, pod_security: str | None, rdma_fix: str | None,
            asked: _Asked, elastic_lines: tuple[str, ...], *, describe: bool = False) -> Plan:
    gpu_request, notes = resolve_gpu_request(spec, cluster, asked.choices.gpu_request)
    if not spec.gpus_per_worker:
        prediction = _predict_cpu_workers(notes, spec, placement, cluster, assumptions)
        return _built(spec, cluster, placement, asked, gpu_request, None,
                      [*notes, *elastic_lines], describe=describe, prediction=prediction)
    from launcher.preparing import network_plan
    from mpijob.jobspec.spec import RdmaRequest

    rdma = asked.choices.rdma
    try:
        decision = network_plan.decide(rdma, placement, cluster, pod_security=pod_security,
                                       gpu_request=gpu_request)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    res = decision.resource
    rdma_request = None
    if decision.paired and res is not None and decision.pairing is not None:
        rdma_request = RdmaRequest(resource=res.name, per_gpu=True,
                                   nic_driver=decision.pairing.driver)
    elif decision.use and res is not None:
        rdma_request = RdmaRequest(resource=res.name, per_gpu=res.kind == "vf", link=res.link,
                                   hcas=res.hcas)
    try:
        network = network_plan.plan_network(
            rdma, model=spec.benchmark.model, batch_size=spec.benchmark.batch_size,
            precision=spec.benchmark.precision, placement=placement, cluster=cluster,
            assumptions=assumptions, decision=decision, rdma_fix=rdma_fix)
        prediction = network.prediction
    except ValueError as exc:
        network, prediction = network_plan.NetworkPlan(decision), None
        notes.append(f"no prediction: {exc}")
    preflight = preflight_plan(spec, placement, cluster, assumptions, decision.transport,
                               policy=asked.preflight)
    if preflight is not None:
        from mpijob.perf.preflight import describe as describe_preflight

        notes.append(describe_preflight(preflight, str(asked.preflight)))
    return _built(spec, cluster, placement, asked, gpu_request, rdma_request,
                  [*notes, *elastic_lines], describe=describe, prediction=prediction,
                  network=network, preflight=preflight)


def _built(spec: JobSpec, cluster: Cluster | None, placement: Placement | None, asked: _Asked,
           gpu_request: GpuRequest, rdma_request: RdmaRequest | None, notes: list[str], *,
           describe: bool, prediction: Prediction | None = None,
           network: NetworkPlan | None = None, preflight: dict | None = None) -> Plan:
    """The plan, built once, with its decisions: the workers' default CPU/memory requests
    where --cpu/--memory leave them open and, on the host network, the sshd port."""
    from mpijob.jobspec.decisions import Decisions

    shares = _shares(spec, cluster, placement)
    ssh_port = (_free_host_ssh_port(spec, cluster, placement)
                if asked.host_ssh_port and spec.host_network and cluster is not None
                else spec.ssh_port)
    decisions = Decisions(gpu_request=gpu_request, preflight=asked.preflight, ssh_port=ssh_port,
                          networks=asked.networks, rdma_request=rdma_request,
                          worker_shares=shares)
    if describe and shares:
        notes = [*notes, *describe_requests(spec, shares, placement)]
    return Plan(spec, placement=placement, prediction=prediction, notes=tuple(notes),
                network=network, preflight=preflight, decisions=decisions)


def preflight_plan(spec: JobSpec, placement: Placement, cluster: Cluster,
                   assumptions: Assumptions | None, transport: str, *,
                   policy: PreflightMode | None) -> dict | None:
    """The preflight's expectations on the planned pods, on the network the job gets;
    None where `policy` (the plan's --preflight) is off or unset."""
    if policy not in ("warn", "fail") or not spec.gpus_per_worker:
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


def _shares(spec: JobSpec, cluster: Cluster | None,
            placement: Placement | None) -> tuple[ResourceShare, ...]:
    """The workers' default CPU/memory requests where --cpu/--memory leave them open."""
    if spec.cpu is not None and spec.memory is not None:
        return ()
    from mpijob.jobspec.worker_share import plan_shares
    from mpijob.k8s import start_gate

    # The start gate's pod is scheduled before the workers, on any node.
    gate = start_gate.GATE_RESOURCES["requests"]
    beside = ((gate["cpu"], gate["memory"], "the start gate's pod")
              if start_gate.applies(spec) else None)
    return plan_shares(cluster, placement, spec.gpus_per_worker, beside)


def _free_host_ssh_port(spec: JobSpec, cluster: Cluster, placement: Placement | None) -> int:
    """On the host network the job's sshd port is a port of its nodes: past ports the
    snapshot shows in use there (mpijob.jobspec.ssh_port)."""
    from mpijob.jobspec.ssh_port import free_ssh_port

    used_on = {a.node for a in placement.assignments} if placement is not None else None
    taken = {port for n in cluster.nodes if used_on is None or n.name in used_on
             for port in n.host_ports}
    if spec.ssh_port not in taken:
        return spec.ssh_port
    port = free_ssh_port(spec.namespace, spec.name, taken)
    note(f"note: --host-network: sshd port {spec.ssh_port} is in use on the job's nodes; "
         f"using {port}")
    return port


def describe_requests(spec: JobSpec, shares: tuple[ResourceShare, ...],
                      placement: Placement | None) -> list[str]:
    """One line per distinct worker request the defaults give, with where it came from."""
    from mpijob.jobspec.worker_share import pod_defaults

    pods: list[tuple[str | None, int]] = ([(a.node, a.slots) for a in placement.assignments]
                                          if placement is not None and not spec.elastic
                                          else [])
    # An elastic job's workers come from one template, one worker a pod, on any node.
    pods = pods or [(None, spec.gpus_per_worker or 1)]
    lines = []
    for node, slots in pods:
        default = pod_defaults(shares, node, slots)
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


def _predict_cpu_workers(notes: list[str], spec: JobSpec, placement: Placement,
                         cluster: Cluster, assumptions: Assumptions | None) -> Prediction | None:
    """CPU workers: predicted only from a calibration (the perf model says so otherwise)."""
    from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, predict

    try:
        return predict(model=spec.benchmark.model, batch_size=spec.benchmark.batch_size,
                       precision=spec.benchmark.precision, placement=placement,
                       cluster=cluster, assumptions=assumptions or DEFAULT_ASSUMPTIONS)
    except ValueError as exc:
        notes.append(f"no prediction: {exc}")
        return None
