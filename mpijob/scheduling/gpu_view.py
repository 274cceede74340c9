"""Which GPUs each pod really holds, beside the ones hvdk8s planned for it.

The planned indices (the `hvdk8s.io/gpus` annotation, the root's placement) are a
prediction: the NVIDIA device plugin picks the devices at admission and may pick others.
What a pod really got comes from a reporter — the topology agent's PodResources data in the
node annotation (docs/agent.md), or a DRA driver's claim allocation — and wins over the plan
wherever one reports. Pure: callers bring the pods' plans and the reports.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_AGENT = "topology agent (kubelet PodResources)"


@dataclass(frozen=True)
class PodGpus:
    """One pod: its planned GPU indices and, when a reporter says, what it was allocated."""

    pod: str
    node: str | None
    planned: tuple[int, ...]
    allocated: tuple[int, ...] | None = None  # None: nothing reported it
    source: str | None = None

    @property
    def known(self) -> bool:
        return self.allocated is not None

    @property
    def differs(self) -> bool:
        return (self.known and self.allocated is not None and bool(self.planned)
                and sorted(self.allocated) != sorted(self.planned))

    @property
    def held(self) -> tuple[int, ...]:
        """What the pod holds as far as anyone knows: the report, else the plan."""
        return self.allocated if self.allocated is not None else self.planned

    def describe(self) -> str | None:
        """One line for people when the report tells something the plan does not."""
        if not self.known:
            return None
        got = _indices(self.allocated)
        if self.differs:
            return (f"{self.pod}: allocated GPUs {got} ({self.source}), not the planned "
                    f"{_indices(self.planned)}: the device plugin chose other devices")
        if not self.planned:
            return f"{self.pod}: allocated GPUs {got} ({self.source})"
        return None

    def to_json(self) -> dict:
        return {"pod": self.pod, "node": self.node, "planned": list(self.planned),
                "allocated": list(self.allocated) if self.allocated is not None else None,
                "source": self.source, "differs": self.differs}


def _indices(gpus) -> str:
    return ",".join(map(str, gpus)) if gpus else "none"


def allocation_view(planned: list[tuple[str, str | None, tuple[int, ...]]],
                    reports: dict[str, tuple[tuple[int, ...], str]]) -> list[PodGpus]:
    """planned: (pod name, node, planned indices) per pod; reports: pod name ->
    (allocated indices, who reported them). One PodGpus per planned pod, in order."""
    out = []
    for pod, node, gpus in planned:
        got = reports.get(pod)
        out.append(PodGpus(pod, node, tuple(gpus),
                           tuple(got[0]) if got else None, got[1] if got else None))
    return out


def agent_reports(namespace: str, pods_by_node: dict[str, list[str]],
                  agent_allocated: dict[str, dict]) -> dict[str, tuple[tuple[int, ...], str]]:
    """Reports from the topology agent: `agent_allocated` maps a node to its annotation's
    `allocated` field ({"<ns>/<pod>": [indices]}). A pod on a node the agent covers but
    absent from its map holds no device the agent saw (yet): not reported, the plan stands."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for node, pods in pods_by_node.items():
        allocated = agent_allocated.get(node)
        if not isinstance(allocated, dict):
            continue
        for pod in pods:
            got = allocated.get(f"{namespace}/{pod}")
            if isinstance(got, list) and all(isinstance(i, int) for i in got):
                out[pod] = (tuple(sorted(got)), SOURCE_AGENT)
    return out
