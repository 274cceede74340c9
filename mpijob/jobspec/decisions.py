"""What a backend's plan decides for a job, carried beside its spec.

The spec is what the user asked for and stays so; the plan decides, each once and where it
is decided, how the GPUs are requested, whether the preflight runs, the sshd port, the RDMA
device and the workers' default requests, and the device resource of each Multus network.
The renderers read these here, never from a spec rewritten after it was built.

The root's spec annotation records both, in the one JSON object `get`, `scale` and the
experiment runner read back (`record`, `asked_of_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpijob.jobspec.defaults import GpuRequest, GpuRequestChoice, PreflightMode, RdmaChoice
from mpijob.jobspec.environment import DEFAULT_JOB_ENV, nccl_env

if TYPE_CHECKING:  # types only: `list` and `get` load this without the spec's models
    from mpijob.jobspec.spec import JobSpec, Network, RdmaRequest
    from mpijob.jobspec.worker_share import ResourceShare



@dataclass(frozen=True)
class Choices:
    """The --rdma and --gpu-request a plan decides from: the spec's (`of`), or what the
    job's mode can carry of them (a TrainJob's: mpijob.k8s.render_trainjob.within_trainjob)."""

    rdma: RdmaChoice
    gpu_request: GpuRequestChoice

    @classmethod
    def of(cls, spec: JobSpec) -> Choices:
        return cls(rdma=spec.rdma, gpu_request=spec.gpu_request)


@dataclass(frozen=True)
class Decisions:
    """The plan's decisions. `preflight` None: off (a spec rendered without a plan)."""

    gpu_request: GpuRequest
    preflight: PreflightMode | None
    ssh_port: int
    networks: tuple[Network, ...] = ()  # each with the device resource its NAD names
    rdma_request: RdmaRequest | None = None  # the RDMA device the workers request
    worker_shares: tuple[ResourceShare, ...] = ()  # where --cpu/--memory leave them open

    @classmethod
    def undecided(cls, spec: JobSpec) -> Decisions:
        """What a spec rendered without a plan gets: what it names, nothing more (auto
        GPUs by the device plugin, no preflight, no RDMA device, no default requests)."""
        return cls(gpu_request="dra" if spec.gpu_request == "dra" else "device-plugin",
                   preflight=spec.preflight, ssh_port=spec.ssh_port, networks=spec.networks)

    @property
    def runs_preflight(self) -> bool:
        return self.preflight in ("warn", "fail")

    def job_env(self, spec: JobSpec) -> dict[str, str]:
        return job_env(spec, self.rdma_request)


def job_env(spec: JobSpec, rdma: RdmaRequest | None = None) -> dict[str, str]:
    """The environment of every rank: hvdk8s's defaults, NCCL's RDMA settings when the
    workers get an RDMA device, then the user's -e (which win)."""
    fabric = nccl_env(rdma.link, rdma.hcas, pod_network=not spec.host_network) if rdma else {}
    return {**DEFAULT_JOB_ENV, **fabric, **spec.env}


# Keys of the record at these values are left out, so that a job that does not use them
# records what it recorded before they were decisions.
_OMIT_AT: dict[str, tuple[object, ...]] = {
    "gpu_request": ("auto", "device-plugin"), "preflight": (None,), "rdma_request": (None,),
    "worker_shares": ((), []), "networks": ((), [])}
# Decided keys of the record the spec itself does not hold.
DECIDED_ONLY = ("rdma_request", "worker_shares")


def record(spec: JobSpec, decisions: Decisions) -> dict[str, Any]:
    """The spec and its decisions as one JSON object (the root's spec annotation)."""
    out = spec.model_dump(mode="json")
    decided = {"gpu_request": decisions.gpu_request, "preflight": decisions.preflight,
               "ssh_port": decisions.ssh_port,
               "networks": [n.model_dump(mode="json") for n in decisions.networks],
               "rdma_request": (decisions.rdma_request.model_dump(mode="json")
                                if decisions.rdma_request is not None else None),
               "worker_shares": [s.model_dump(mode="json") for s in decisions.worker_shares]}
    for key, value in decided.items():
        if value in _OMIT_AT.get(key, ()):
            out.pop(key, None)
        else:
            out[key] = value
    return out


def asked_of_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's fields of a record (its decided values in place of what was asked)."""
    return {k: v for k, v in data.items() if k not in DECIDED_ONLY}
