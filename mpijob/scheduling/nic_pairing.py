"""Which NIC each planned GPU gets when both are published through DRA: the one under the
same PCIe root (`resource.kubernetes.io/pcieRoot`), as the claim's matchAttribute
constraints make the scheduler choose (mpijob.k8s.dra.paired_request).

The plan pairs the GPUs itself, on the snapshot's free NICs, so that `plan` can show the
pairs and say which GPU has none before anything is created; the scheduler makes the same
kind of choice from the claims (it may pick another free NIC under the same root). A NIC
is one device of a claim: GPUs sharing a root need as many free NICs there. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mpijob.scheduling.dra_devices import DraDevice, DraNic


@dataclass(frozen=True)
class Pair:
    gpu: DraDevice
    nic: DraNic

    def to_json(self) -> dict:
        return {"gpu": self.gpu.name, "gpu_index": self.gpu.index, "nic": self.nic.name,
                "driver": self.nic.driver, "pcie_root": self.nic.pcie_root}


@dataclass(frozen=True)
class WorkerPairs:
    worker: int
    node: str
    pairs: tuple[Pair, ...]

    def to_json(self) -> dict:
        return {"worker": self.worker, "node": self.node,
                "pairs": [p.to_json() for p in self.pairs]}

    def describe(self) -> str:
        each = ", ".join(f"{p.gpu.name}+{p.nic.name}" for p in self.pairs)
        return f"worker {self.worker} ({self.node}): {each}"


@dataclass(frozen=True)
class Pairing:
    """The pairs of every worker, or why some GPU has no NIC under its root (`missing`)."""

    workers: tuple[WorkerPairs, ...] = ()
    missing: tuple[str, ...] = ()
    driver: str | None = None  # the NIC driver (one per job: one DeviceClass in the claims)

    @property
    def complete(self) -> bool:
        return bool(self.workers) and not self.missing

    def to_json(self) -> dict:
        return {"driver": self.driver, "workers": [w.to_json() for w in self.workers],
                "missing": list(self.missing)}


def offered(nodes: Sequence) -> bool:
    """Every given node publishes both its GPUs and NICs through DRA."""
    return bool(nodes) and all(n.dra_devices and n.dra_nics for n in nodes)


def pair(assignments: Sequence, nodes_by_name: dict) -> Pairing:
    """assignments: the placement's (node, gpus) per worker, in worker order."""
    nodes = [nodes_by_name[a.node] for a in assignments if a.node in nodes_by_name]
    drivers = sorted({nic.driver for n in nodes for nic in n.dra_nics})
    if not drivers:
        return Pairing()
    driver = drivers[0]
    free: dict[str, list[DraNic]] = {
        n.name: [nic for nic in n.dra_nics if nic.driver == driver] for n in nodes}
    workers, missing = [], []
    for w, a in enumerate(assignments):
        node = nodes_by_name.get(a.node)
        if node is None:
            continue
        gpus = {d.index: d for d in node.dra_devices}
        pairs = []
        for index in a.gpus:
            gpu = gpus.get(index)
            if gpu is None:
                missing.append(f"GPU {index} of node {a.node} is not published through DRA")
                continue
            if not gpu.pcie_root:
                missing.append(f"{gpu.name} of node {a.node} publishes no PCIe root "
                               "(resource.kubernetes.io/pcieRoot)")
                continue
            nic = next((x for x in free[a.node] if x.pcie_root == gpu.pcie_root), None)
            if nic is None:
                missing.append(f"{gpu.name} of node {a.node} has no free {driver} NIC under "
                               f"its PCIe root {gpu.pcie_root}")
                continue
            free[a.node].remove(nic)
            pairs.append(Pair(gpu, nic))
        workers.append(WorkerPairs(w, a.node, tuple(pairs)))
    return Pairing(tuple(workers), tuple(missing), driver)
