"""The cluster as placement sees it, read from the API in two list calls (nodes, live pods).

Which GPU *indices* a pod holds is known only from the topology agent's node annotation
(`hvdk8s.io/gpu-topology`, written from the kubelet's pod-resources API) or, for hvdk8s's
own pods, from their `hvdk8s.io/gpus` annotation. For any other pod the API tells only how
many GPUs it requested; those are marked allocated lowest indices first, and the snapshot
says so in its notes, because a different guess about which GPUs are taken can change
which NVLink groups look free.
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal

from launcher.backends.kubernetes.client import (
    COMPUTE_DOMAIN,
    HYPERNODE,
    KUEUE_TOPOLOGIES,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ApiError,
    api_kind,
)
from launcher.backends.kubernetes.projections import PlacementNode, PlacementPod
from launcher.errors import UsageError, UserError
from mpijob.gang import kai, kueue, volcano
from mpijob.jobspec import names
from mpijob.jobspec.quantity import QuantityError, parse_quantity
from mpijob.scheduling import rdma
from mpijob.scheduling.cluster import DEFAULT_NETWORK_GBPS, Cluster, Node, Taint
from mpijob.scheduling.dra_slices import free_nics, inventory, slice_cliques
from mpijob.scheduling.hypernodes import positions as hypernode_positions
from mpijob.scheduling.network import DEFAULT_LABEL_KEYS, parse_label_keys, position_from_labels
from mpijob.scheduling.nvlink import CLIQUE_ATTRIBUTE, clique_from_labels, parse_clique
from mpijob.scheduling.presets import preset_for
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, Topology, parse_annotation
from mpijob.wellknown import (
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    OPERATOR_JOB_LABEL,
    UNSCHEDULABLE_TAINT,
)

LABEL_NETWORK_GBPS = "hvdk8s.io/network-gbps"
# Fraction of line rate NCCL's sockets reach on this node, where an admin measured it.
LABEL_TCP_EFFICIENCY = "hvdk8s.io/tcp-efficiency"
# Pods in these phases hold nothing: the scheduler frees their requests.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class PodUsage:
    """A live pod bound to a node and what it holds there."""

    namespace: str
    name: str
    node: str
    gpus: int
    indices: tuple[int, ...] = ()
    job: str | None = None
    role: str | None = None
    phase: str | None = None


@dataclass(frozen=True)
class Snapshot:
    cluster: Cluster
    pods: tuple[PodUsage, ...] = ()
    notes: tuple[str, ...] = ()
    # Node name -> True when its topology came from the agent, False when from a preset.
    measured: dict[str, bool] = field(default_factory=dict)
    # What RBAC kept the snapshot from reading, one line each, for the user.
    skipped: tuple[str, ...] = ()


class SnapshotUnreadable(UserError):
    """The user may not list nodes: there is no cluster to plan on."""


# --- quantities of pods -----------------------------------------------------------------------
def _q(value) -> Decimal:
    if isinstance(value, Decimal):  # PodReader's per-node sums
        return value
    try:
        return _cached_quantity(value)
    except (QuantityError, TypeError):  # TypeError: unhashable (a list or map), no quantity
        return Decimal(0)


# A cluster's pods repeat a few dozen request values ("500m", "4Gi") tens of thousands of
# times; parsing each once took a fifth of a 2,000-node snapshot. Decimals are immutable.
_cached_quantity = functools.lru_cache(maxsize=4096, typed=True)(parse_quantity)


def pod_requests(pod: dict) -> dict[str, Decimal]:
    """What the scheduler charges a pod: containers summed, at least the largest init
    container, plus overhead. Extended resources default their request to the limit."""

    def container_requests(c: dict) -> dict[str, Decimal]:
        res = c.get("resources") or {}
        out = {k: _q(v) for k, v in (res.get("limits") or {}).items()
               if "/" in k}  # extended resources: request = limit when not given
        out.update({k: _q(v) for k, v in (res.get("requests") or {}).items()})
        for k, v in (res.get("limits") or {}).items():
            if k in ("cpu", "memory") and k not in out:
                out[k] = _q(v)  # an unset request defaults to the limit
        return out

    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] += v
    for c in spec.get("initContainers") or []:
        for k, v in container_requests(c).items():
            total[k] = max(total[k], v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += _q(v)
    return dict(total)


def pod_host_ports(pod: dict) -> set[int]:
    """Node ports a pod holds: hostPort, which the API server defaults to containerPort
    for a pod on the host network."""
    spec = pod.get("spec") or {}
    out: set[int] = set()
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for port in c.get("ports") or []:
            value = port.get("hostPort") or (port.get("containerPort")
                                             if spec.get("hostNetwork") else None)
            if isinstance(value, int):
                out.add(value)
    return out


def parse_index_list(text: str | None) -> tuple[int, ...]:
    """'0,1,2,3' -> (0, 1, 2, 3); anything unparsable -> ()."""
    if not text:
        return ()
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        return ()


# --- nodes ------------------------------------------------------------------------------------
def _node_ready(node: dict) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _taints(node: dict) -> tuple[Taint, ...]:
    spec = node.get("spec") or {}
    taints = [Taint(t.get("key", ""), t.get("value"), t.get("effect", "NoSchedule"))
              for t in spec.get("taints") or []]
    # A cordoned node: the node lifecycle controller adds this taint; older or test
    # clusters may only set the flag, and placement must treat both alike.
    if spec.get("unschedulable") and not any(t.key == UNSCHEDULABLE_TAINT for t in taints):
        taints.append(Taint(UNSCHEDULABLE_TAINT, None, "NoSchedule"))
    return tuple(taints)


def _network_gbps(labels: dict) -> float:
    try:
        return float(labels[LABEL_NETWORK_GBPS])
    except (KeyError, ValueError):
        return DEFAULT_NETWORK_GBPS


def _empty_topology():
    return Topology(links=())


def _topology(node: dict, allocatable_gpus: int, notes: list[str]):
    """(topology, agent allocations or None, meta, measured)."""
    meta_ = node.get("metadata") or {}
    labels = meta_.get("labels") or {}
    name = meta_.get("name", "?")
    text = (meta_.get("annotations") or {}).get(ANNOTATION_TOPOLOGY)
    if text:
        try:
            topo, allocated, meta = parse_annotation(text)
            return topo, allocated, meta, True
        except (ValueError, TypeError, KeyError) as exc:
            notes.append(f"{name}: ignoring an unreadable {ANNOTATION_TOPOLOGY} annotation ({exc})")
    try:
        count = int(labels.get(GPU_COUNT_LABEL, allocatable_gpus))
    except ValueError:
        count = allocatable_gpus
    count = max(count, allocatable_gpus)
    if count <= 0:
        return _empty_topology(), None, {}, False
    try:
        return preset_for(labels.get(GPU_PRODUCT_LABEL), count), None, {}, False
    except ValueError as exc:  # e.g. a count past MAX_GPUS_PER_NODE: plan around the node
        notes.append(f"{name}: not planned on ({exc})")
        return _empty_topology(), None, {}, False


# --- the snapshot -----------------------------------------------------------------------------
def _positions(nodes: list[dict], hypernodes: list[dict] | None, label_keys,
               kueue_topologies: list[dict] | None = None,
               kai_topologies: list[dict] | None = None) -> dict:
    """Each node's network position: labels (by `label_keys`), Volcano HyperNodes over them.
    A level whose label a Kueue Topology lists is marked for Kueue (mpijob.gang: GangScheduler.keeps_network_domain)."""
    labels_of = {n["metadata"]["name"]: (n.get("metadata") or {}).get("labels") or {} for n in nodes}
    out = {name: position_from_labels(labels, label_keys or DEFAULT_LABEL_KEYS)
           for name, labels in labels_of.items()}
    kueue_levels = {level.get("nodeLabel") for t in kueue_topologies or []
                    for level in (t.get("spec") or {}).get("levels") or []}
    for name, pos in out.items():
        if pos.rack_label in kueue_levels or pos.block_label in kueue_levels:
            out[name] = replace(pos, scheduler=kueue.NAME)
    # A level a KAI Topology lists is marked for KAI, with the Topology's name.
    kai_levels = {level.get("nodeLabel"): t["metadata"]["name"] for t in kai_topologies or []
                  for level in (t.get("spec") or {}).get("levels") or []}
    for name, pos in out.items():
        for label in (pos.rack_label, pos.block_label):
            if label in kai_levels:
                out[name] = replace(pos, scheduler=kai.NAME, topology=kai_levels[label])
                break
    for name, where in hypernode_positions(hypernodes or [], labels_of).items():
        out[name] = replace(out[name], rack=where["rack"], block=where["block"] or out[name].block,
                            rack_label=None, block_label=None, scheduler=volcano.NAME)
    return out


def build_snapshot(nodes: list[dict], pods: list[dict], hypernodes: list[dict] | None = None,
                   label_keys=None, kueue_topologies: list[dict] | None = None,
                   resource_slices: list[dict] | None = None,
                   resource_claims: list[dict] | None = None,
                   compute_domains: bool = False,
                   kai_topologies: list[dict] | None = None) -> Snapshot:
    """Pure: Node/Pod (and Volcano HyperNode) dicts as the API returns them -> Snapshot."""
    notes: list[str] = []
    network = _positions(nodes, hypernodes, label_keys, kueue_topologies, kai_topologies)

    # Devices published by the GPU DRA driver, and those its claims hold: really free
    # GPUs with their UUIDs, without the topology agent.
    dra = inventory(resource_slices or [], resource_claims or [])
    slice_clique = slice_cliques(resource_slices or [], CLIQUE_ATTRIBUTE)
    nics = free_nics(resource_slices or [], resource_claims or [])  # for GPU-NIC pairing
    usage_by_node: dict[str, list[dict]] = defaultdict(list)
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if node_name and phase not in ("Succeeded", "Failed"):
            usage_by_node[node_name].append(pod)

    out_nodes: list[Node] = []
    usages: list[PodUsage] = []
    measured: dict[str, bool] = {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        labels = dict((node.get("metadata") or {}).get("labels") or {})
        alloc = (node.get("status") or {}).get("allocatable") or {}
        gpus = int(_q(alloc.get(GPU_RESOURCE, 0)))
        # GPUs a DRA driver publishes are the node's too (no nvidia.com/gpu count for them).
        dra_devices = tuple(dra.devices.get(name, ()))
        gpus = max(gpus, len(dra_devices))
        topo, agent_alloc, meta, is_measured = _topology(node, gpus, notes)
        measured[name] = is_measured
        node_pods = usage_by_node.get(name, [])
        pod_reqs = [pod_requests(p) for p in node_pods]  # once a pod: the costly part
        allocated, pod_usage = _allocate(
            name, topo.gpus, gpus,
            [(p, int(r.get(GPU_RESOURCE, 0))) for p, r in zip(node_pods, pod_reqs, strict=True)],
            agent_alloc, meta, notes)
        allocated = set(allocated) | {i for i in dra.allocated.get(name, ()) if i < topo.gpus}
        usages.extend(pod_usage)
        requested: defaultdict[str, Decimal] = defaultdict(Decimal)
        for r in pod_reqs:
            for k, v in r.items():
                requested[k] += v
        free_cpu = float(_q(alloc["cpu"]) - requested["cpu"]) if "cpu" in alloc else None
        free_mem = float(_q(alloc["memory"]) - requested["memory"]) if "memory" in alloc else None
        try:
            pcie_gen = int(meta.get("pcie_gen") or 3)
        except (TypeError, ValueError):
            pcie_gen = 3
        out_nodes.append(Node(
            name=name, gpus=topo.gpus, topology=topo, allocated=frozenset(allocated),
            gpu_model=labels.get(GPU_PRODUCT_LABEL) or meta.get("gpu_model") or "unknown",
            network_gbps=_network_gbps(labels), labels=labels, taints=_taints(node),
            free_cpu=free_cpu, free_memory=free_mem, ready=_node_ready(node), pcie_gen=pcie_gen,
            alloc_cpu=float(_q(alloc["cpu"])) if "cpu" in alloc else None,
            alloc_memory=float(_q(alloc["memory"])) if "memory" in alloc else None,
            network=network[name], dra_devices=dra_devices, dra_nics=tuple(nics.get(name, ())),
            host_ports=frozenset(port for p in node_pods for port in pod_host_ports(p)),
            rdma=rdma.from_allocatable(alloc, {k: int(v) for k, v in requested.items()}),
            tcp_efficiency=_tcp_efficiency(labels),
            nvlink_domain=_nvlink_domain(name, labels, slice_clique.get(name), notes),
        ))
    cluster = Cluster(tuple(out_nodes), compute_domains=compute_domains)
    return Snapshot(cluster, tuple(usages), tuple(notes), measured)


def _nvlink_domain(node: str, labels: dict, from_slices: str | None, notes: list[str]) -> str | None:
    """The node's NVLink partition: GFD's clique label, else a ResourceSlice attribute
    (mpijob.scheduling.nvlink). A value that is no clique is said, and NVLink taken to end
    at the node."""
    try:
        found = clique_from_labels(labels)
        return found if found else (parse_clique(from_slices) if from_slices else None)
    except ValueError as exc:
        notes.append(f"node {node}: {exc}; planned as if NVLink ended at the node")
        return None


def _tcp_efficiency(labels: dict) -> float | None:
    """The socket efficiency an admin measured on this node (label LABEL_TCP_EFFICIENCY)."""
    try:
        value = float(labels.get(LABEL_TCP_EFFICIENCY, ""))
    except ValueError:
        return None
    return value if 0 < value <= 1 else None


def _allocate(node: str, topo_gpus: int, allocatable: int, pods: list[tuple[dict, int]],
              agent_alloc, meta: dict, notes: list[str]) -> tuple[set[int], list[PodUsage]]:
    """Which GPU indices of one node are taken, and by which pod (`pods`: each with the
    GPUs it requests).

    The agent's PodResources data is what the device plugin really allocated; hvdk8s's
    `hvdk8s.io/gpus` annotation is only the plan, so it counts only for pods the agent has
    not reported (yet), and never for indices the agent says another pod holds.
    """
    taken: set[int] = set()
    agent_by_pod = meta.get("allocated") if isinstance(meta.get("allocated"), dict) else None
    usages: list[PodUsage] = []
    unknown: list[tuple[dict, int]] = []
    reported: list[tuple[dict, int, tuple[int, ...]]] = []
    planned: list[tuple[dict, int, tuple[int, ...]]] = []
    for pod, count in sorted(pods, key=lambda pc: (pc[0]["metadata"].get("namespace", ""),
                                                   pc[0]["metadata"]["name"])):
        if not count:
            continue
        m = pod["metadata"]
        key = f"{m.get('namespace', '')}/{m['name']}"
        if agent_by_pod is not None and key in agent_by_pod:
            try:
                reported.append((pod, count, tuple(int(i) for i in agent_by_pod[key])))
            except (TypeError, ValueError):
                unknown.append((pod, count))
        else:
            planned.append((pod, count, parse_index_list(
                (m.get("annotations") or {}).get(names.ANNOTATION_GPUS))))
    overridden: list[str] = []
    for pod, count, indices in reported + planned:
        valid = (len(indices) == count and all(0 <= i < topo_gpus for i in indices)
                 and not taken & set(indices))
        if valid:
            taken |= set(indices)
            usages.append(_usage(pod, node, count, indices))
        else:
            if agent_by_pod is not None and indices and taken & set(indices):
                overridden.append(pod["metadata"]["name"])
            unknown.append((pod, count))
    if overridden:
        notes.append(f"{node}: the topology agent reports GPUs planned for "
                     f"{', '.join(overridden)} as held by other pods; counted elsewhere")
    if agent_alloc and agent_by_pod is None:
        # Old agent payloads carry only the set of taken indices.
        taken |= {i for i in agent_alloc if 0 <= i < topo_gpus}
    guessed: list[int] = []
    for pod, count in unknown:
        free = [i for i in range(topo_gpus) if i not in taken]
        indices = tuple(free[:count])
        taken |= set(indices)
        guessed.extend(indices)
        usages.append(_usage(pod, node, count, indices))
    if guessed:
        notes.append(f"{node}: {len(guessed)} GPU(s) are held by pods whose GPU indices the API "
                     f"does not show (no topology agent data); counted as GPUs "
                     f"{','.join(map(str, sorted(guessed)))}")
    if allocatable < topo_gpus:
        # Unhealthy GPUs drop out of allocatable; without the agent we cannot tell which.
        missing = [i for i in reversed(range(topo_gpus)) if i not in taken][: topo_gpus - allocatable]
        if missing:
            taken |= set(missing)
            notes.append(f"{node}: only {allocatable} of {topo_gpus} GPUs are allocatable; "
                         f"GPUs {','.join(map(str, sorted(missing)))} counted as unavailable")
    usages.sort(key=lambda u: (u.namespace, u.name))
    return taken, usages


def _usage(pod: dict, node: str, count: int, indices: tuple[int, ...]) -> PodUsage:
    m = pod["metadata"]
    labels = m.get("labels") or {}
    return PodUsage(namespace=m.get("namespace", ""), name=m["name"], node=node, gpus=count,
                    indices=tuple(sorted(indices)),
                    job=labels.get(names.LABEL_JOB) or labels.get(OPERATOR_JOB_LABEL),
                    role=labels.get(names.LABEL_ROLE),
                    phase=(pod.get("status") or {}).get("phase"))


NETWORK_LABELS_ENV = "HVDK8S_NETWORK_LABELS"


def network_label_keys():
    """The label keys of $HVDK8S_NETWORK_LABELS ('rack=KEY,block=KEY,zone=KEY'), else the
    defaults (mpijob.scheduling.network)."""
    text = os.environ.get(NETWORK_LABELS_ENV, "").strip()
    if not text:
        return DEFAULT_LABEL_KEYS
    try:
        return parse_label_keys(text)
    except ValueError as exc:
        raise UsageError(f"${NETWORK_LABELS_ENV}: {exc}") from None


def take_snapshot(client, namespace: str | None = None, *, cached: bool = False,
                  gpu_nodes_only: bool = False) -> Snapshot:
    """Two lists: every node, and every live pod in every namespace (more for Volcano
    HyperNodes, Kueue Topologies, DRA slices where the API serves them), paged and parsed
    as they arrive, keeping of each object only what placement reads (slim_node, slim_pod).

    `cached` reads the API server's watch cache (resourceVersion=0), as controllers do:
    planning tolerates a view a moment old, and submit re-checks the planned nodes
    (planned_nodes_view) before creating. `gpu_nodes_only` drops, while streaming, the pods
    of nodes without GPUs, which a GPU job cannot use.

    A user RBAC does not let list pods in all namespaces gets the pods of `namespace` (or
    none) and a `skipped` line saying so; one who may not list nodes gets
    SnapshotUnreadable, never a bare 403.
    """
    keys = network_label_keys()
    try:
        nodes = client.items(NODE, keep=slim_node, cached=cached, item_type=PlacementNode)
    except ApiError as exc:
        if exc.status != 403:
            raise
        raise SnapshotUnreadable(
            "skipped the cluster snapshot: RBAC does not let you list nodes, so there is no "
            "topology-aware plan (pass --cluster FILE to plan on a cluster file)") from None
    groups = client.api_groups()  # one discovery call, cached by the client
    hypernodes = _optional_items(client, HYPERNODE) if HYPERNODE.group in groups else []
    topologies: list[dict] = []
    if KUEUE_TOPOLOGIES[0].group in groups:
        for kind in KUEUE_TOPOLOGIES:  # served under v1beta1 by newer Kueue, v1alpha1 before
            topologies = _optional_items(client, kind)
            if topologies:
                break
    kai_topologies = (_optional_items(client, api_kind(kai.TOPOLOGY))
                      if kai.TOPOLOGY.group in groups else [])
    slices: list[dict] = []
    claims: list[dict] = []
    if RESOURCE_SLICE.group in groups and client.serves(RESOURCE_SLICE):
        slices = _optional_items(client, RESOURCE_SLICE)
        if slices:
            claims = _optional_items(client, RESOURCE_CLAIM, all_namespaces=True)
    reader = PodReader(gpu_nodes(nodes, slices) if gpu_nodes_only else None)
    kept, skipped = _readable_pods(client, POD, namespace, keep=reader.keep, cached=cached,
                                   item_type=PlacementPod)
    pods = reader.pods(kept)
    # A job across nodes of one NVLink partition gets a ComputeDomain where the driver serves it.
    domains = COMPUTE_DOMAIN.group in groups and client.serves(COMPUTE_DOMAIN)
    snap = build_snapshot(nodes, pods, hypernodes, keys, topologies, slices, claims, domains,
                          kai_topologies)
    return replace(snap, skipped=skipped) if skipped else snap


def planned_nodes_view(client, nodes: list[str]) -> tuple[list, list]:
    """(nodes, live pods) of the planned nodes only, for submit's re-check: one list of
    nodes and one of pods, each read from the API server's watch cache in one answer, not
    older than the snapshot the plan came from (KubeClient.list `cached`). Two requests
    whatever the plan's size, where a GET and a `spec.nodeName` pod list per node made 128
    at 64 nodes; of the bytes (the cluster's pods once more) only the planned nodes' objects
    are decoded, picked by their name and nodeName (named_nodes, pods_on)."""
    wanted = set(nodes)
    found = client.items(NODE, keep=lambda n: slim_node(n) if n["metadata"]["name"] in wanted
                         else None, item_type=PlacementNode, cached=True,
                         select=named_nodes(wanted))
    reader = PodReader(wanted)
    return found, reader.pods(client.items(POD, all_namespaces=True, field_selector=LIVE_PODS,
                                           keep=reader.keep, item_type=PlacementPod,
                                           cached=True, select=pods_on(wanted)))


_NODE_NAME = b'{"metadata":{"name":"'
_POD_NODE = b'"nodeName":"'


def named_nodes(names: set[str]):
    """A list item's bytes (buf[start:end]) -> whether it may be one of these Nodes: the API server writes
    a Node's metadata first and its name first in that (Go's field order); any other shape
    is taken, to be decoded and judged by its fields."""
    wanted = {n.encode() for n in names}

    def select(buf: bytes, start: int, end: int) -> bool:
        if not buf.startswith(_NODE_NAME, start, end):
            return True
        name = start + len(_NODE_NAME)
        return buf[name:buf.find(b'"', name, end)] in wanted

    return select


def pods_on(names: set[str]):
    """A list item's bytes (buf[start:end]) -> whether it may be a Pod bound to one of these nodes: a
    compact `"nodeName":"X"` key (spec.nodeName is a Pod's only key of that name; inside a
    string its quotes would be escaped) with X not among them rules it out, and so does no
    nodeName at all (an unbound pod, which PodReader drops); anything else is taken."""
    wanted = {n.encode() for n in names}

    def select(buf: bytes, start: int, end: int) -> bool:
        # A slice cut at a false boundary (a nested object that begins with "metadata")
        # ends inside its item, its braces unbalanced: taken, so that decoding it fails and
        # the parser reads that stretch again in full, instead of losing it unseen.
        if buf.count(b"{", start, end) != buf.count(b"}", start, end):
            return True
        at = buf.find(_POD_NODE, start, end)
        if at < 0:
            return buf.find(b'"nodeName"', start, end) >= 0
        name = at + len(_POD_NODE)
        return buf[name:buf.find(b'"', name, end)] in wanted

    return select


# --- what placement reads of an object --------------------------------------------------------
def _pick(d: dict | None, keys) -> dict:
    return {k: d[k] for k in keys if d and k in d}


def slim_node(node: dict) -> dict:
    """The fields of a Node build_snapshot reads; real nodes carry far more (images alone
    are often tens of kilobytes)."""
    m = node.get("metadata") or {}
    status = node.get("status") or {}
    annotations = _pick(m.get("annotations"), (ANNOTATION_TOPOLOGY,))
    return {"metadata": {"name": m.get("name"), "labels": m.get("labels") or {},
                         "annotations": annotations},
            "spec": _pick(node.get("spec"), ("taints", "unschedulable")),
            "status": {"allocatable": status.get("allocatable") or {},
                       "conditions": [c for c in status.get("conditions") or []
                                      if c.get("type") == "Ready"]}}


_POD_LABELS = (names.LABEL_JOB, names.LABEL_ROLE, OPERATOR_JOB_LABEL)


def slim_pod(pod: dict) -> dict:
    """The fields of a Pod build_snapshot reads: where it runs, its phase, what it requests
    (pod_requests), its host ports, and which job and GPUs it is. Runs once per pod of the
    cluster while the list streams in, so it reads each field once, without helpers."""
    m = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    slim_spec = {"nodeName": spec.get("nodeName"),
                 "containers": [_slim_container(c) for c in spec.get("containers") or []]}
    if spec.get("initContainers"):
        slim_spec["initContainers"] = [_slim_container(c) for c in spec["initContainers"]]
    if spec.get("overhead"):
        slim_spec["overhead"] = spec["overhead"]
    if spec.get("hostNetwork"):
        slim_spec["hostNetwork"] = spec["hostNetwork"]
    labels = m.get("labels")
    annotations = m.get("annotations")
    status = pod.get("status")
    return {"metadata": {"name": m.get("name"), "namespace": m.get("namespace", ""),
                         "labels": {k: labels[k] for k in _POD_LABELS if k in labels}
                         if labels else {},
                         "annotations": {names.ANNOTATION_GPUS: annotations[names.ANNOTATION_GPUS]}
                         if annotations and names.ANNOTATION_GPUS in annotations else {}},
            "spec": slim_spec,
            "status": {"phase": status["phase"]} if status and "phase" in status else {}}


def _slim_container(c: dict) -> dict:
    out: dict = {}
    res = c.get("resources")
    if res:
        out["resources"] = {k: res[k] for k in ("requests", "limits") if k in res}
    ports = c.get("ports")
    if ports:
        out["ports"] = [{k: p[k] for k in ("hostPort", "containerPort") if k in p}
                        for p in ports]
    return out


class PodReader:
    """What placement needs of a cluster's pods, kept as they stream in (the `keep` of a
    pod list). A pod that holds GPUs or host ports is kept (slim_pod); every other pod only
    adds its requests to its node's, which is all build_snapshot reads of it: at 30 pods a
    node, holding each one (~3 KB as Python objects even slimmed) was most of submit's
    memory. `nodes`: only the pods of these nodes (None: all)."""

    def __init__(self, nodes: set[str] | None = None):
        self.nodes = nodes
        self.totals: dict[str, defaultdict[str, Decimal]] = {}

    def keep(self, pod: dict) -> dict | None:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (self.nodes is not None and node not in self.nodes):
            return None
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return None  # holds nothing (build_snapshot skips it too)
        requests = pod_requests(pod)
        if requests.get(GPU_RESOURCE) or pod_host_ports(pod):
            return slim_pod(pod)
        total = self.totals.get(node)
        if total is None:
            total = self.totals[node] = defaultdict(Decimal)
        for k, v in requests.items():
            total[k] += v
        return None

    def pods(self, kept: list[dict]) -> list[dict]:
        """The kept pods, and per node one pod requesting what its other pods request."""
        return kept + [
            {"metadata": {"name": f"(other pods on {node})", "namespace": ""},
             "spec": {"nodeName": node,
                      "containers": [{"resources": {"requests": dict(total)}}]},
             "status": {"phase": "Running"}}
            for node, total in sorted(self.totals.items())]


def gpu_nodes(nodes: list[dict], resource_slices: Iterable[dict] = ()) -> set[str]:
    """Nodes a GPU worker could run on: GPUs allocatable, labelled, measured by the agent,
    or published by a DRA driver."""
    out = {s_node for s in resource_slices
           if (s_node := (s.get("spec") or {}).get("nodeName"))}
    for node in nodes:
        m = node.get("metadata") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        labels = m.get("labels") or {}
        if (_q(alloc.get(GPU_RESOURCE, 0)) > 0 or _q(labels.get(GPU_COUNT_LABEL, 0)) > 0
                or ANNOTATION_TOPOLOGY in (m.get("annotations") or {})):
            out.add(m.get("name"))
    return out


def _readable_pods(client, pod_kind, namespace: str | None, **kw
                   ) -> tuple[list[dict], tuple[str, ...]]:
    """Live pods of every namespace, else of `namespace`, else none; and what was skipped."""
    try:
        return client.items(pod_kind, all_namespaces=True, field_selector=LIVE_PODS, **kw), ()
    except ApiError as exc:
        if exc.status != 403:
            raise
    unseen = "are not seen (the scheduler still counts them)"
    if namespace:
        try:
            pods = client.items(pod_kind, namespace, field_selector=LIVE_PODS, **kw)
            return pods, (f"RBAC does not let you list pods in all namespaces: planned with "
                          f"the pods of namespace {namespace} only; GPUs held in other namespaces {unseen}",)
        except ApiError as exc:
            if exc.status != 403:
                raise
    return [], (f"RBAC does not let you list pods{f' in namespace {namespace}' if namespace else ''}"
                f" or in all namespaces: planned as if no pod ran; GPUs pods hold {unseen}",)


def _optional_items(client, kind, **kw) -> list[dict]:
    """The objects of a kind an installed add-on may serve, or none (not served, or not
    readable by this user: the snapshot is still useful without them)."""
    try:
        return client.items(kind, **kw)
    except ApiError as exc:
        if exc.not_found or exc.status in (401, 403):
            return []
        raise
