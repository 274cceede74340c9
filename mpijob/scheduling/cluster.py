"""A snapshot of the cluster as placement sees it: nodes, their GPUs and what is taken.

Built from a cluster file (`launcher.formats.clusterfile`), from the live API (the Kubernetes
backend) or from the local machine (the local backend). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpijob.scheduling.network import UNKNOWN, NetworkPosition
from mpijob.scheduling.rdma import RdmaResource
from mpijob.scheduling.topology import Topology

DEFAULT_NETWORK_GBPS = 10.0


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None = None
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    topology: Topology
    allocated: frozenset[int] = frozenset()
    gpu_model: str = "unknown"
    network_gbps: float = DEFAULT_NETWORK_GBPS
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # Allocatable minus requested, in cores and bytes; None when unknown (not checked).
    free_cpu: float | None = None
    free_memory: float | None = None
    # Allocatable, in cores and bytes (the default share of a worker pod,
    # mpijob.jobspec.worker_share); None when unknown.
    alloc_cpu: float | None = None
    alloc_memory: float | None = None
    ready: bool = True
    pcie_gen: int = 3
    # Zone, block and rack (mpijob.scheduling.network); unknown by default.
    network: NetworkPosition = UNKNOWN
    # GPUs a DRA driver publishes for this node (mpijob.scheduling.dra_devices), by index; () without DRA.
    dra_devices: tuple = ()
    # Free NICs a NIC DRA driver publishes here (mpijob.scheduling.dra_devices.DraNic); () without one.
    dra_nics: tuple = ()
    # Node ports live pods hold (hostPort, or containerPort on the host network).
    host_ports: frozenset[int] = frozenset()
    # RDMA device resources its device plugins advertise (mpijob.scheduling.rdma).
    rdma: tuple[RdmaResource, ...] = ()
    # Fraction of line rate NCCL's socket transport reaches here (measured, cluster file);
    # None: the published default (mpijob.perf.perfmodel.TCP_EFFICIENCY).
    tcp_efficiency: float | None = None
    # The NVLink partition the node's GPUs share with other nodes (an NVL72 rack's
    # `<cluster UUID>.<clique id>`, mpijob.scheduling.nvlink); None: NVLink ends at the node.
    nvlink_domain: str | None = None

    @property
    def free_gpus(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.gpus) if i not in self.allocated)


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    # The API serves NVIDIA's ComputeDomain (resource.nvidia.com): a job across nodes of one
    # NVLink partition can get the IMEX channel cross-node NVLink needs (mpijob.k8s.computedomain).
    compute_domains: bool = False

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)
