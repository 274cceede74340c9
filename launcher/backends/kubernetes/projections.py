"""What placement reads of a Pod and of a Node, as msgspec types: a list decoded into
these keeps only these fields, and skips the rest of each object (managed fields, env,
volumes, container statuses, node images) in C without building it.

A pod of a real cluster is 4-8 KB of JSON of which placement reads a few hundred bytes;
decoding all of it with the standard library was most of submit's CPU at 2,000 nodes and
more than 4 s at 150,000 pods (benchmarks/cli/README.md). The decoded values are plain
dicts and lists shaped like the API objects, with the absent fields absent, so what reads
them (snapshot.slim_pod, slim_node, PodReader) reads a full object the same way.

Each field here is one that snapshot.py reads: a field read there and not declared here
would be silently missing, which
tests/launcher/backends/kubernetes/test_snapshot_streamed.py guards against by planning from
projected and from full lists alike.
"""

from __future__ import annotations

from typing import Any, TypedDict


class _Meta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, Any]
    annotations: dict[str, Any]


class _Resources(TypedDict, total=False):
    requests: dict[str, Any]
    limits: dict[str, Any]


class _Port(TypedDict, total=False):
    containerPort: Any
    hostPort: Any


class _Container(TypedDict, total=False):
    resources: _Resources
    ports: list[_Port]


class _PodSpec(TypedDict, total=False):
    nodeName: str
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: dict[str, Any]
    hostNetwork: bool


class _PodStatus(TypedDict, total=False):
    phase: str


class PlacementPod(TypedDict, total=False):
    """snapshot.slim_pod and PodReader.keep: node, phase, requests, host ports, job labels
    and the GPU annotation."""

    metadata: _Meta
    spec: _PodSpec
    status: _PodStatus


class _NodeSpec(TypedDict, total=False):
    taints: list[dict[str, Any]]
    unschedulable: bool


class _NodeStatus(TypedDict, total=False):
    allocatable: dict[str, Any]
    conditions: list[dict[str, Any]]


class PlacementNode(TypedDict, total=False):
    """snapshot.slim_node: labels, the topology annotation, taints, allocatable, Ready."""

    metadata: _Meta
    spec: _NodeSpec
    status: _NodeStatus


class _StatusMeta(_Meta, total=False):
    creationTimestamp: Any
    deletionTimestamp: Any


class _StatusPodSpec(TypedDict, total=False):
    nodeName: str
    hostname: str  # a JobSet pod's: where its ranks say they run (status.name_rank_pods)


class StatusPod(TypedDict, total=False):
    """What `list` reads of a job's pods (status.py: replica, is_scheduled, the phase
    decision): names, labels, annotations, times, the node, and the whole status; not the
    containers' spec, which is most of a pod's bytes."""

    metadata: _StatusMeta
    spec: _StatusPodSpec
    status: dict[str, Any]
