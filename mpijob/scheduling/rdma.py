"""RDMA devices a node offers to pods, and whether a job's worker pods request them.

Kubernetes hands RDMA to a pod as an extended resource of a device plugin (a NIC through DRA
is mpijob.k8s.dra's business). Two kinds, told apart by the resource's name:

- shared HCA: the NVIDIA Network Operator's k8s-rdma-shared-dev-plugin advertises every HCA
  (or group of HCAs) as `rdma/<name>` with a number of "slots" (`rdmaHcaMax`, 1000 in its
  examples); one slot gives a pod the whole HCA's RDMA devices (github.com/Mellanox/
  k8s-rdma-shared-dev-plugin README: resourcePrefix "rdma", resourceName
  rdma_shared_device_a, hca_shared_devices_a). A worker pod takes one, whatever its GPUs.
- SR-IOV virtual functions (and host devices): the SR-IOV network device plugin's pools,
  `<prefix>/<pool>` with the prefix the deployment chose: `intel.com` (the plugin's default),
  `openshift.io` (the OpenShift SR-IOV operator), `nvidia.com` (the Network Operator's
  SR-IOV and HostDevice networks). One VF is one NIC port for one process, so a worker pod
  takes one per GPU: each rank gets its own (github.com/k8snetworkplumbingwg/
  sriov-network-device-plugin README, "resourcePrefix"; NVIDIA Network Operator docs,
  "SR-IOV network" and "HostDeviceNetwork").

Under `nvidia.com/` the GPU plugin's own names (gpu, gpu.shared, mig-..., vgpu, pgpu) are
GPUs, not pools.

NCCL then needs the RDMA verbs devices (`/dev/infiniband`, which the plugins mount), its
settings (mpijob.jobspec.environment) and `IPC_LOCK` to pin its buffers (NCCL's "Troubleshooting" docs: ibv_reg_mr fails with the
default memlock limit; the Network Operator's examples add IPC_LOCK).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from mpijob.wellknown import GPU_RESOURCE

if TYPE_CHECKING:  # a type only
    from mpijob.scheduling.nic_pairing import Pairing

SHARED_PREFIXES = ("rdma/",)
VF_PREFIXES = ("nvidia.com/", "openshift.io/", "intel.com/")
# nvidia.com resources of the GPU device plugin (and its MIG / time-slicing / vGPU names).
NOT_POOLS = (GPU_RESOURCE, "nvidia.com/mig-", "nvidia.com/vgpu", "nvidia.com/pgpu")
Kind = Literal["shared", "vf"]
Link = Literal["infiniband", "roce"]


def kind_of(resource: str) -> Kind | None:
    """The kind of RDMA device a resource name stands for, or None for anything else."""
    if resource.startswith(SHARED_PREFIXES):
        return "shared"
    if resource.startswith(NOT_POOLS) or "/" not in resource:
        return None
    if resource.startswith(VF_PREFIXES):
        return "vf"
    return None


@dataclass(frozen=True)
class RdmaResource:
    """An RDMA device resource of one node: how many the node has and how many are free."""

    name: str
    allocatable: int
    free: int
    link: Link | None = None  # InfiniBand or RoCE when known (cluster file); None: unknown
    hcas: tuple[str, ...] = ()  # verbs device names (mlx5_0 ...) when known

    @property
    def kind(self) -> Kind:
        return kind_of(self.name) or "vf"

    def per_pod(self, gpus: int) -> int:
        """Devices one worker pod with `gpus` GPUs takes: one shared HCA, or one VF per GPU."""
        return 1 if self.kind == "shared" else max(1, gpus)


def from_allocatable(allocatable: Mapping[str, object], free: Mapping[str, int] | None = None
                     ) -> tuple[RdmaResource, ...]:
    """The RDMA resources in a node's status.allocatable (quantities as strings)."""
    out = []
    for name, value in sorted(allocatable.items()):
        if kind_of(name) is None:
            continue
        try:
            count = int(str(value))
        except ValueError:
            continue
        if count > 0:
            left = count if free is None else max(0, count - free.get(name, 0))
            out.append(RdmaResource(name, count, left))
    return tuple(out)


@dataclass(frozen=True)
class RdmaDecision:
    """What the job's worker pods get, and why (for plan and submit to say)."""

    use: bool
    resource: RdmaResource | None  # the resource requested (use), or the one offered (not use)
    reason: str
    offered: bool  # every planned node offers a common RDMA resource
    # GPU-NIC pairs through DRA (mpijob.scheduling.nic_pairing), where the nodes publish
    # NICs that way; used when complete, else shown with why not (`pairing_note`).
    pairing: Pairing | None = None
    pairing_note: str | None = None

    @property
    def transport(self) -> str:
        return "rdma" if self.use else "tcp"

    @property
    def paired(self) -> bool:
        """The workers' claims pair each GPU with a NIC (the RDMA this job gets)."""
        return self.use and self.pairing is not None and self.pairing.complete


class Node(Protocol):
    """A node's RDMA offer (mpijob.scheduling.cluster.Node, which holds RdmaResources)."""

    @property
    def name(self) -> str: ...
    @property
    def rdma(self) -> tuple[RdmaResource, ...]: ...


def common_resource(pods: Sequence[tuple[Node, int]]) -> tuple[RdmaResource | None, str]:
    """The RDMA resource every pod's node offers, enough of it free for the pod, preferring a
    shared HCA (it takes one slot per pod); or None and why not. pods: (Node, GPUs)."""
    if not pods:
        return None, "no worker pod is planned"
    first_node = pods[0][0]
    for res in sorted(first_node.rdma, key=lambda r: (r.kind != "shared", r.name)):
        problem = None
        need: dict[str, int] = {}
        for node, gpus in pods:
            need[node.name] = need.get(node.name, 0) + res.per_pod(gpus)
        for node, _ in pods:
            mine = next((r for r in node.rdma if r.name == res.name), None)
            if mine is None:
                problem = f"node {node.name} offers no {res.name}"
                break
            if mine.free < need[node.name]:
                problem = (f"node {node.name} has {mine.free} {res.name} free, the job's pods "
                           f"there need {need[node.name]}")
                break
        if problem is None:
            return res, ""
    if not first_node.rdma:
        return None, f"node {first_node.name} offers no RDMA device resource"
    return None, problem or "no RDMA resource is common to the planned nodes"


def decide(choice: str, pods: Sequence[tuple[Node, int]]) -> RdmaDecision:
    """--rdma: on requests RDMA or raises ValueError with the reason; auto requests it when
    the job spans several nodes and every planned node offers it; off never."""
    res, why_not = common_resource(pods)
    nodes = {node.name for node, _ in pods}
    if choice == "off":
        return RdmaDecision(False, res, "--rdma off", res is not None)
    if res is None:
        if choice == "on":
            raise ValueError(f"--rdma on: {why_not}; use --rdma auto or off, or plan on nodes "
                             "whose device plugin advertises RDMA (rdma/..., an SR-IOV pool)")
        return RdmaDecision(False, None, why_not, False)
    if choice == "auto" and len(nodes) < 2:
        return RdmaDecision(False, res, "the job runs on one node (no traffic between nodes)",
                            True)
    return RdmaDecision(True, res, f"every planned node offers {res.name}", True)

