"""`get`: the GPUs each worker pod really holds, from the topology agent's node annotation
(its PodResources data, docs/agent.md), beside the planned ones (mpijob.scheduling.gpu_view)."""

from __future__ import annotations

from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes.client import NODE, ApiError
from mpijob.scheduling.gpu_view import PodGpus, agent_reports, allocation_view
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, parse_annotation


def agent_allocations(client, nodes) -> dict[str, dict]:
    """node -> the agent annotation's `allocated` map, for the nodes that carry one. A node
    the user may not read, or an unreadable annotation, is left out: the plan stands there."""
    out: dict[str, dict] = {}
    for name in sorted(set(nodes)):
        try:
            node = client.get(NODE, name)
        except ApiError as exc:
            if exc.status in (401, 403):
                continue
            raise
        text = st.annotations_of(node).get(ANNOTATION_TOPOLOGY)
        if not text:
            continue
        try:
            _, _, meta = parse_annotation(text)
        except ValueError:
            continue
        if isinstance(meta.get("allocated"), dict):
            out[name] = meta["allocated"]
    return out


def worker_gpu_view(namespace: str, replicas, agent_allocated: dict[str, dict]) -> list[PodGpus]:
    """Per worker pod: planned vs allocated GPUs (replicas: k8s_status.ReplicaStatus)."""
    workers = [r for r in replicas if r.role != "launcher"]
    pods_by_node: dict[str, list[str]] = {}
    for r in workers:
        if r.node:
            pods_by_node.setdefault(r.node, []).append(r.name)
    reports = agent_reports(namespace, pods_by_node, agent_allocated)
    return allocation_view([(r.name, r.node, tuple(r.gpus)) for r in workers], reports)


def apply_view(status, view: list[PodGpus]) -> None:
    """Show what the pods hold: GPUS column and placement from the reports, plan kept."""
    by_pod = {v.pod: v for v in view}
    for r in status.replicas:
        v = by_pod.get(r.name)
        if v is not None and v.known:
            r.gpus = list(v.held)
    for row in status.placement:
        v = by_pod.get(row.get("pod"))
        if v is not None and v.known:
            row["planned_gpus"] = list(v.planned)
            row["gpus"] = list(v.held)
            row["allocated_by"] = v.source
    status.gpu_allocation = [{**v.to_json(), "note": v.describe()} for v in view if v.known]
