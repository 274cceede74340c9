"""The job as Kubernetes runs it, decided once: its worker pods (where each goes, its GPUs
and MPI slots), what each requests (CPU, memory, GPUs through the device plugin or a DRA
claim, RDMA and other device resources, the IMEX channel), and what every pod of the job
shares (data volumes, the RDMA capability, Multus networks, the gang scheduler's network
domain).

The builders (mpijob.k8s.render_pods, mpijob.k8s.render_operator,
mpijob.k8s.render_trainjob) turn this into objects, each object in one place, as the MPI
Operator's newLauncherJob/newWorker build theirs (pkg/controller/mpi_job_controller.go);
none of them reads back what another wrote. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mpijob import gang as gangs
from mpijob.jobspec import names
from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.quantity import scale_quantity
from mpijob.jobspec.worker_share import ResourceShare, add_bytes, pod_defaults
from mpijob.k8s.computedomain import CLAIM as CHANNEL_CLAIM
from mpijob.k8s.computedomain import channel_template_name
from mpijob.k8s.dra import REQUEST as GPU_CLAIM
from mpijob.k8s.dra import claim_template
from mpijob.wellknown import GPU_RESOURCE

if TYPE_CHECKING:  # only types here
    from mpijob.jobspec.spec import JobSpec
    from mpijob.scheduling.placement import Placement


@dataclass(frozen=True)
class GpuClaim:
    """GPUs through DRA (mpijob.k8s.dra): the ResourceClaimTemplate the pod's claim names,
    exactly the planned GPUs where their UUIDs are known, each paired with a NIC of
    `nic_driver` under its PCIe root where the plan paired them. Without UUIDs, `count`
    GPUs under one PCIe root, or any free ones (`same_root` False)."""

    template: str
    count: int
    uuids: tuple[str, ...]
    nic_driver: str | None
    same_root: bool = True

    def template_object(self, namespace: str, labels: dict) -> dict:
        return claim_template(self.template, namespace, labels, self.count, list(self.uuids),
                              self.nic_driver, same_root=self.same_root)


@dataclass(frozen=True)
class Resources:
    """What a worker container requests. Extended resources (GPUs, devices) are requested
    as limits and requests alike: the API server requires them equal for resources that
    cannot be overcommitted (k8s.io/kubernetes pkg/apis/core/validation)."""

    cpu: str | None = None
    memory: str | None = None
    # /dev/shm is a Memory-backed emptyDir, charged to the pod's memory cgroup: the limit
    # is the request plus its sizeLimit, so a full /dev/shm does not OOM-kill the ranks
    # (kubernetes.io/docs/concepts/storage/volumes/#emptydir).
    memory_limit: str | None = None
    gpus: int = 0  # nvidia.com/gpu, the device plugin's count (0 with a DRA claim)
    devices: tuple[tuple[str, str], ...] = ()  # --extra-resource, RDMA, Multus networks
    claims: tuple[str, ...] = ()  # the pod's resourceClaims the container uses

    @property
    def requests(self) -> dict[str, str]:
        out = {}
        if self.cpu:
            out["cpu"] = self.cpu
        if self.memory:
            out["memory"] = self.memory
        if self.gpus:
            out[GPU_RESOURCE] = str(self.gpus)
        return {**out, **dict(self.devices)}

    @property
    def limits(self) -> dict[str, str]:
        # cpu: a limit too, so a quota on limits.cpu admits the pod; equal to the request,
        # the share the plan gave it. memory: the request plus /dev/shm.
        limits = self.requests
        if self.memory:
            limits["memory"] = self.memory_limit or self.memory
        return limits

    def to_k8s(self) -> dict:
        requests, limits = self.requests, self.limits
        out: dict = {}
        if requests:
            out["requests"] = requests
        if limits:
            out["limits"] = limits
        if self.claims:
            out["claims"] = [{"name": c} for c in self.claims]
        return out


# Modes whose workers come from one template (an MPIJob's Worker, a TrainJob's node job):
# uniform pods, replicas x slots (operator_shape).
TEMPLATE_MODES = ("operator", "trainjob")


@dataclass(frozen=True)
class WorkerPod:
    """One worker pod (built-in mode), or the one worker template (operator, Trainer mode)."""

    index: int
    node: str | None
    gpus: tuple[int, ...]  # the planned GPU indices on its node
    gpu_count: int
    workers: int  # request workers merged into this pod (scales cpu/memory)
    resources: Resources = Resources()
    gpu_claim: GpuClaim | None = None

    @property
    def slots(self) -> int:
        return self.gpu_count or self.workers


@dataclass(frozen=True)
class OperatorShape:
    replicas: int
    slots: int
    nodes: tuple[str, ...]
    note: str | None


@dataclass(frozen=True)
class Workload:
    """A job's pods as decided from its spec, the plan's decisions and the placement,
    before any object exists."""

    spec: JobSpec
    decisions: Decisions
    mode: str
    placement: Placement | None
    workers: tuple[WorkerPod, ...]  # built-in: one per pod; TEMPLATE_MODES: the template's one
    shape: OperatorShape | None  # TEMPLATE_MODES: replicas x slots per worker
    compute_domain_nodes: int | None  # the ComputeDomain's size, where the job gets one
    ipc_lock: bool  # NCCL pins RDMA buffers (ibv_reg_mr) past the default memlock limit
    networks: tuple[str, ...]  # Multus networks of the workers
    network_domain: object  # the placement's domain, where the job's gang scheduler keeps it
    # Elastic built-in jobs: the one worker the Indexed worker Job's template describes,
    # requesting one worker's share (mpijob.k8s.render_elastic).
    elastic_worker: WorkerPod | None = None

    def pod_claims(self, pod: WorkerPod) -> list[dict]:
        """A worker's spec.resourceClaims: its GPUs' claim, then the IMEX channel of the
        job's ComputeDomain (mpijob.k8s.computedomain)."""
        out = []
        if pod.gpu_claim is not None:
            out.append({"name": GPU_CLAIM, "resourceClaimTemplateName": pod.gpu_claim.template})
        if self.compute_domain_nodes is not None:
            out.append({"name": CHANNEL_CLAIM,
                        "resourceClaimTemplateName": channel_template_name(self.spec.name)})
        return out


def operator_shape(spec: JobSpec, placement: Placement | None) -> OperatorShape:
    """The operator's workers are uniform: replicas x slotsPerWorker.

    The placement's one-pod-per-node shape fits when every node got the same number of
    slots; otherwise fall back to one pod per requested worker, pinned to the chosen nodes.
    """
    per_worker = spec.gpus_per_worker or 1
    if placement is None or not placement.feasible:
        return OperatorShape(spec.workers, per_worker, (), None)
    sizes = {a.slots for a in placement.assignments}
    nodes = tuple(a.node for a in placement.assignments)
    if len(sizes) == 1:
        return OperatorShape(len(placement.assignments), sizes.pop(), nodes, None)
    return OperatorShape(
        spec.workers, per_worker, nodes,
        "operator mode needs uniform worker pods, so the placement's one-pod-per-node shape "
        f"({'+'.join(str(len(a.gpus)) for a in placement.assignments)} GPUs) becomes "
        f"{spec.workers} pods of {per_worker}; pods on one node cannot share NVLink "
        "(use --mode pods to keep one pod per node)",
    )


@dataclass(frozen=True)
class PodRequests:
    cpu: str | None
    memory: str | None
    memory_limit: str | None  # the request plus /dev/shm (Resources.memory_limit)
    source: str  # where the figures came from, for people


def pod_requests(spec: JobSpec, shares: tuple[ResourceShare, ...], node: str | None, slots: int,
                 workers: int) -> PodRequests:
    """What a worker pod requests: --cpu/--memory per worker, else the plan's share of its
    node (`shares`: mpijob.jobspec.worker_share); `plan` shows it, the builders render it."""
    cpu = scale_quantity(spec.cpu, workers) if spec.cpu else None
    memory = scale_quantity(spec.memory, workers) if spec.memory else None
    sources = [f"{o} per worker" for o, v in (("--cpu", spec.cpu), ("--memory", spec.memory)) if v]
    default = pod_defaults(shares, node, slots)
    if default is not None:
        cpu = cpu or default[0]
        memory = memory or default[1]
        if default[2] and not (spec.cpu and spec.memory):
            sources.append(default[2])
    return PodRequests(cpu, memory, add_bytes(memory, spec.shm_size) if memory else None,
                       "; ".join(sources))


def _devices(spec: JobSpec, decided: Decisions, gpus: int) -> tuple[tuple[str, str], ...]:
    """Extended resources one worker pod with `gpus` GPUs requests besides its GPUs:
    --extra-resource, the plan's RDMA device (one shared HCA per pod, or a VF per GPU;
    NICs paired through DRA are in the GPU claim instead), and one unit of each Multus
    network's resource per network listed: a NetworkAttachmentDefinition naming a device
    resource gives the pod an interface only if the pod requests it (the SR-IOV network
    resources injector's job, github.com/k8snetworkplumbingwg/network-resources-injector).
    Where RDMA and a network want the same resource, the larger count stays."""
    out = {name: str(count) for name, count in spec.extra_resources.items()}
    req = decided.rdma_request
    if req is not None and req.nic_driver is None:
        out[req.resource] = str(max(1, gpus) if req.per_gpu else 1)
    per_network: dict[str, int] = {}
    for net in decided.networks:
        if net.resource:
            per_network[net.resource] = per_network.get(net.resource, 0) + 1
    for name, count in per_network.items():
        out[name] = str(max(count, int(out.get(name, 0))))
    return tuple(out.items())


def _worker(spec: JobSpec, decided: Decisions, index: int, node: str | None,
            gpus: tuple[int, ...], workers: int, claim: tuple[str, tuple[str, ...]],
            channel: bool) -> WorkerPod:
    """One pod of `workers` workers with what it requests: --gpus for each of them (the
    placement says where they go and which GPUs they get, not how many); `claim`: its GPU
    claim template's name and the planned GPUs' UUIDs, should it take its GPUs through DRA."""
    gpu_count = spec.gpus_per_worker * workers
    pod = WorkerPod(index, node, gpus, gpu_count, workers)
    requests = pod_requests(spec, decided.worker_shares, node, pod.slots, workers)
    nic_driver = decided.rdma_request.nic_driver if decided.rdma_request else None
    gpu_claim = (GpuClaim(claim[0], gpu_count, claim[1], nic_driver)
                 if decided.gpu_request == "dra" and gpu_count > 0 else None)
    claims = (*((GPU_CLAIM,) if gpu_claim else ()), *((CHANNEL_CLAIM,) if channel else ()))
    resources = Resources(cpu=requests.cpu, memory=requests.memory,
                          memory_limit=requests.memory_limit, gpus=0 if gpu_claim else gpu_count,
                          devices=_devices(spec, decided, gpu_count), claims=claims)
    return replace(pod, resources=resources, gpu_claim=gpu_claim)


def _elastic_worker(spec: JobSpec, decided: Decisions, channel: bool) -> WorkerPod:
    """One worker per pod, on any node: --cpu/--memory, else one worker's share of the
    planned nodes (the smallest: one template, mpijob.jobspec.worker_share), with /dev/shm
    in its memory limit as for any worker; and a DRA
    claim asks for a count, each pod from the template getting its own: any free GPUs of
    its node, as the device plugin's count would, since a worker that joins later takes
    whichever freed up (not the plan's, nor necessarily GPUs under one PCIe root, which a
    driver may not even publish)."""
    gpus = spec.gpus_per_worker
    pod = WorkerPod(0, None, (), gpus, 1)
    gpu_claim = (GpuClaim(f"{names.service(spec.name)}-gpus", gpus, (),
                          decided.rdma_request.nic_driver if decided.rdma_request else None,
                          same_root=False)
                 if decided.gpu_request == "dra" and gpus > 0 else None)
    claims = (*((GPU_CLAIM,) if gpu_claim else ()), *((CHANNEL_CLAIM,) if channel else ()))
    requests = pod_requests(spec, decided.worker_shares, None, gpus or 1, 1)
    resources = Resources(cpu=requests.cpu, memory=requests.memory,
                          memory_limit=requests.memory_limit,
                          gpus=0 if gpu_claim else gpus, devices=_devices(spec, decided, gpus),
                          claims=claims)
    return replace(pod, resources=resources, gpu_claim=gpu_claim)


def workload(spec: JobSpec, placement: Placement | None, mode: str,
             decisions: Decisions | None = None) -> Workload:
    """Decide the job's pods: one per placement assignment (built-in), or one uniform
    template (TEMPLATE_MODES), each with what it requests. `decisions`: the plan's (None:
    a spec rendered without a plan, Decisions.undecided)."""
    decided = decisions if decisions is not None else Decisions.undecided(spec)
    placed = placement is not None and placement.feasible
    assignments = list(placement.assignments) if placement is not None and placed else []
    channel = bool(placement is not None and placement.compute_domain)
    shape = None
    if mode in TEMPLATE_MODES:
        shape = operator_shape(spec, placement)
        # slots are GPUs (whole workers' worth) or, for a CPU job, workers
        workers_each = shape.slots // (spec.gpus_per_worker or 1)
        # One template for every worker: UUIDs are unique, so a selector over every planned
        # GPU gives each node-pinned pod its own node's planned GPUs.
        claim = (f"{spec.name}-worker-gpus", tuple(u for a in assignments for u in a.device_uuids))
        pods: tuple[WorkerPod, ...] = (_worker(spec, decided, 0, None, (), workers_each, claim,
                                               channel),)
    elif placed:
        pods = tuple(_worker(spec, decided, i, a.node, tuple(a.gpus), a.workers,
                             (f"{names.worker(spec.name, i)}-gpus", tuple(a.device_uuids)),
                             channel)
                     for i, a in enumerate(assignments))
    else:
        pods = tuple(_worker(spec, decided, i, None, (), 1, (f"{names.worker(spec.name, i)}-gpus", ()),
                             channel)
                     for i in range(spec.workers))
    domain = getattr(placement, "network_domain", None) if placement is not None else None
    scheduler = gangs.get(spec.gang)
    if domain is not None and (scheduler is None or domain.scheduler != scheduler.name):
        domain = None
    return Workload(
        spec=spec, decisions=decided, mode=mode, placement=placement, workers=pods, shape=shape,
        compute_domain_nodes=placement.nodes_used if placement is not None and channel else None,
        ipc_lock=decided.rdma_request is not None,
        networks=tuple(n.name for n in decided.networks), network_domain=domain,
        elastic_worker=_elastic_worker(spec, decided, channel) if spec.elastic and mode == "pods"
        else None)


def data_pod_nodes(spec: JobSpec, placement: Placement | None,
                   mode: str) -> tuple[list[str | None], bool]:
    """The planned node of every pod that mounts the job's claims (None: not known), and
    whether the pods are held there (required node affinity: no gang scheduler)."""
    pinned = spec.gang == "none"
    if mode in TEMPLATE_MODES:
        shape = operator_shape(spec, placement)
        nodes: list[str | None] = (list(shape.nodes) if len(shape.nodes) == shape.replicas
                                   else [None] * shape.replicas)
    else:
        nodes = [p.node for p in workload(spec, placement, mode).workers]
    if spec.user_gives_mpirun:  # the launcher mounts them too (mpijob.k8s.render)
        nodes.append(None)  # the launcher goes where the default scheduler puts it
    return nodes, pinned
