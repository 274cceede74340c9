"""Load a cluster FILE (YAML or JSON) into an `mpijob.scheduling.cluster.Cluster` snapshot.

    defaults:            # optional, applied to every node (a node's own keys win)
      gpus: 8
      topology: dgx1-v100
    nodes:
      - name: gpu-node-1
        gpus: 8                      # default: the topology's GPU count, else 0; at most 64
        topology: dgx1-v100          # preset | path to `nvidia-smi topo -m` output
                                     # (relative to this file) | matrix of link codes
        allocated: [0, 1]            # GPU indices taken by other pods
        gpu_model: Tesla-V100-SXM2-16GB
        network_gbps: 10
        labels: {nvidia.com/gpu.product: Tesla-V100-SXM2-16GB}
        taints: ["nvidia.com/gpu=present:NoSchedule"]   # or [{key, value, effect}]
        cpu: "64"                    # free cpu (cores or a quantity such as 500m)
        memory: 256Gi                # free memory
        pcie_gen: 3
        ready: true
        network: {zone: z1, block: b1, rack: r1, oversubscription: 3, scheduler: kueue}
                                     # where it sits (mpijob.scheduling.network); default: from the
                                     # labels by the keys of network_labels
        resources:                   # free device-plugin resources other than GPUs, e.g.
          rdma/rdma_shared_device_a: 63   # RDMA (mpijob.scheduling.rdma: rdma/... shared HCAs,
                                          # nvidia.com|openshift.io|intel.com/... SR-IOV pools)
        rdma_link: roce              # infiniband | roce: RoCE sets NCCL_IB_GID_INDEX
        rdma_hcas: [mlx5_0]          # verbs devices the RDMA resource gives (NCCL_IB_HCA)
        tcp_efficiency: 0.6          # fraction of line rate NCCL's sockets reach (measured)
        nvlinkDomain: 8f2c...e1.0    # the NVLink partition it shares with other nodes (an
                                     # NVL72 rack: <cluster UUID>.<clique id>); default: the
                                     # nvidia.com/gpu.clique label (mpijob.scheduling.nvlink)
        dra:                         # GPUs published by a DRA driver (mpijob.k8s.dra):
          uuids: [GPU-0a..., GPU-1b...]   # by index; or devices: [{index, uuid, name,
                                          # pcie_root}]; driver: gpu.nvidia.com
          nics: [{name: eth1, pcie_root: pci0000:00}]  # free NICs of a NIC DRA driver,
          nic_driver: dra.net             # paired with the GPU under the same PCIe root
    computeDomains: true # optional: the cluster serves NVIDIA's ComputeDomain (DRA driver):
                         # a job across nodes of one NVLink partition gets one
    network_labels: {rack: example.com/tor}   # optional: label keys per level (zone, block,
                                              # rack); the Kueue/Topograph conventions by default
    generate:            # optional: synthetic nodes for large clusters (one block or a list)
      count: 2000
      prefix: node-               # names node-0001 ... (zero-padded to the count)
      allocated_fraction: 0.5     # each GPU taken with this probability
      seed: 1                     # same seed, same cluster
      # ...plus any node key (gpus, topology, labels, ...)

Without `topology`, a node gets `mpijob.scheduling.presets.preset_for(gpu product label or
gpu_model, gpus)`. A node with fewer GPUs than its topology uses the topology's first
GPUs.

The file's shape is the pydantic models below (strict: a string is no number, and no key
outside a model is taken); what needs more than one key or another file (the topology, GPU
indices against the GPU count) is checked while building each Node. Every problem is one
UsageError naming the file, the node and the key: "FILE: nodes[3] (n3): gpus: expected a
whole number of GPUs (0 or more), got -1", the expectation taken from the field's
description.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from launcher.errors import UsageError
from launcher.formats import yaml_errors
from mpijob.jobspec.defaults import NetworkScheduler
from mpijob.jobspec.quantity import QuantityError, parse_quantity
from mpijob.jobspec.toleration import TaintEffect
from mpijob.plural import plural
from mpijob.scheduling import rdma
from mpijob.scheduling.cluster import DEFAULT_NETWORK_GBPS, Cluster, Node, Taint
from mpijob.scheduling.dra_devices import DRIVER, NIC_DRIVERS, DraDevice, DraNic
from mpijob.scheduling.network import (
    DEFAULT_LABEL_KEYS,
    DEFAULT_OVERSUBSCRIPTION,
    LabelKeys,
    NetworkPosition,
    position_from_labels,
)
from mpijob.scheduling.nvlink import CLIQUE_LABEL, clique_from_labels, parse_clique
from mpijob.scheduling.presets import preset, preset_for
from mpijob.scheduling.topology import (
    MAX_GPUS_PER_NODE,
    Topology,
    TopologyParseError,
    parse_topo_matrix,
    too_many_gpus,
)
from mpijob.wellknown import GPU_PRODUCT_LABEL


class _Problem(Exception):
    """A problem in one node, turned into a UsageError with the file and node named."""


# --- the file's shape ---------------------------------------------------------------------------
class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _at_most_64(gpus: int | None) -> int | None:
    if gpus is not None and gpus > MAX_GPUS_PER_NODE:
        raise ValueError(too_many_gpus(gpus))
    return gpus


def _label_values(value: Any) -> Any:
    if not isinstance(value, dict):
        return value  # the type check says what is wrong
    out = {}
    for k, v in value.items():
        if isinstance(v, dict | list) or v is None:
            raise ValueError(f"{k}: expected a string value, got {v!r}")
        out[str(k)] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def _taint_text(value: Any) -> Any:
    """key=value:Effect or key:Effect, as kubectl taint writes them."""
    if not isinstance(value, str):
        return value
    body, colon, effect = value.rpartition(":")
    if not colon:
        raise ValueError(f"{value!r} has no effect; expected key=value:Effect or key:Effect")
    key, eq, val = body.partition("=")
    return {"key": key, "value": val if eq else None, "effect": effect}


def _quantity(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value  # the type check says what is wrong
    try:
        q = float(parse_quantity(value))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if q < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return q


def _name(value: Any) -> Any:
    """A name may be written as a number (rack: 12)."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _one_or_more(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Quantity = Annotated[float, BeforeValidator(_quantity)]
Name = Annotated[str, BeforeValidator(_name), Field(min_length=1)]
GpuUuid = Annotated[str, Field(pattern=r'^[^"\\ ]+$')]  # it goes into a CEL string
LabelKeyList = Annotated[list[Annotated[str, Field(min_length=1)]],
                         BeforeValidator(_one_or_more), Field(min_length=1)]


class TaintEntry(_Entry):
    expected: ClassVar[str] = "key=value:Effect or a mapping with key, value, effect"
    key: str = Field(min_length=1, description="a non-empty taint key")
    value: Annotated[str, BeforeValidator(_name)] | None = Field(None, description="a string")
    effect: TaintEffect = Field("NoSchedule", description=" or ".join(get_args(TaintEffect)))


class NetworkEntry(_Entry):
    zone: Name | None = Field(None, description="a name")
    block: Name | None = Field(None, description="a name")
    rack: Name | None = Field(None, description="a name")
    oversubscription: float = Field(
        DEFAULT_OVERSUBSCRIPTION, ge=1, description="a number of at least 1 (server bandwidth : "
                                                    "uplink bandwidth of the rack's switch)")
    scheduler: NetworkScheduler | None = Field(
        None, description=" or ".join(get_args(NetworkScheduler))
        + " (which gang scheduler knows these levels)")
    topology: Name | None = Field(None, description="a name (the scheduler's Topology object, "
                                                    "which KAI's constraint names)")


class DraDeviceEntry(_Entry):
    index: int = Field(description="a GPU index")  # below the node's GPU count: _dra
    uuid: GpuUuid = Field(description="the GPU's UUID (GPU-...)")
    name: str | None = Field(None, description="a device name")
    pcie_root: str | None = Field(None, description="a PCIe root name")


class DraNicEntry(_Entry):
    name: str = Field(min_length=1, description="a device name")
    pcie_root: str | None = Field(None, description="a PCIe root name such as pci0000:00")


class DraEntry(_Entry):
    driver: str = Field(DRIVER, min_length=1, description=f"a driver name such as {DRIVER}")
    nics: list[DraNicEntry] = Field([], description="a list of {name, pcie_root}")
    nic_driver: Literal["dra.net", "sriovnetwork.k8snetworkplumbingwg.io"] = Field(
        "dra.net", description=" or ".join(NIC_DRIVERS))
    uuids: list[GpuUuid] | None = Field(None, description="a GPU UUID (GPU-...) for each GPU index")
    devices: list[DraDeviceEntry] | None = Field(
        None, description="a list of {index, uuid, name, pcie_root}")

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("devices") is None \
                and not isinstance(value.get("uuids"), list):
            raise ValueError("give uuids (a list, one per GPU index) or devices")
        return value

    def device_list(self) -> list[DraDeviceEntry]:
        if self.devices is not None:
            found = self.devices
        else:
            found = [DraDeviceEntry(index=i, uuid=u) for i, u in enumerate(self.uuids or [])]
        seen: set[int] = set()
        for d in found:
            if d.index in seen:
                raise _Problem(f"dra: GPU index {d.index} appears twice")
            seen.add(d.index)
        return found


class NodeEntry(_Entry):
    name: str = Field(min_length=1, description="a non-empty string")
    gpus: Annotated[int | None, AfterValidator(_at_most_64)] = Field(
        None, ge=0, description="a whole number of GPUs (0 or more)")
    topology: Annotated[str, Field(min_length=1)] | list[Any] | None = Field(
        None, description="a preset name, a path to `nvidia-smi topo -m` output or a matrix "
                          "of link codes")
    allocated: list[int] | None = Field(None, description="a list of GPU indices")
    gpu_model: str | None = Field(None, description="a string")
    network_gbps: float = Field(DEFAULT_NETWORK_GBPS, gt=0,
                                description="a positive number (Gbit/s)")
    labels: Annotated[dict[str, str], BeforeValidator(_label_values)] = Field(
        {}, description="a mapping of label keys to values")
    taints: list[Annotated[TaintEntry, BeforeValidator(_taint_text)]] = Field(
        [], description="a list of key=value:Effect strings or {key, value, effect} mappings")
    cpu: Quantity | None = Field(None, description="a quantity such as 8 or 500m")
    memory: Quantity | None = Field(None, description="a quantity such as 64Gi")
    pcie_gen: int = Field(3, ge=1, le=6, description="1 to 6")
    ready: bool = Field(True, description="true or false")
    network: NetworkEntry | None = None
    nvlinkDomain: Annotated[str, BeforeValidator(_name)] | None = Field(  # noqa: N815 - the file's key
        None, description="<cluster UUID>.<clique id> (nvidia.com/gpu.clique)")
    dra: DraEntry | None = None
    resources: dict[Annotated[str, Field(pattern=r"^[^/\s]+/[^/\s]+$")],
                    Annotated[int, Field(ge=0)]] = Field(
        {}, description="a mapping of extended resource names (domain/name) to free counts")
    rdma_link: Literal["infiniband", "roce"] | None = Field(None, description="infiniband or roce")
    rdma_hcas: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]] = Field(
        [], description="a list of RDMA device names such as mlx5_0")
    tcp_efficiency: float | None = Field(
        None, gt=0, le=1, description="a fraction of line rate above 0, at most 1")


class GenerateEntry(BaseModel):
    """A block of synthetic nodes; its other keys are node keys for every one of them."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    count: int = Field(ge=0, description="a whole number of nodes")
    prefix: str = Field("node-", description="a string")
    start: int = Field(1, ge=0, description="a whole number")
    allocated_fraction: float = Field(0.0, ge=0, le=1, description="a number from 0 to 1")
    seed: int | str = Field(0, description="a number or a string")


class NetworkLabels(_Entry):
    """The node label keys of each network level (mpijob.scheduling.network.LabelKeys)."""

    zone: LabelKeyList | None = Field(None, description="a label key or a list of keys")
    block: LabelKeyList | None = Field(None, description="a label key or a list of keys")
    rack: LabelKeyList | None = Field(None, description="a label key or a list of keys")


class ClusterFile(_Entry):
    """The top level; each node and generate block is checked on its own, so that a problem
    names the node."""

    nodes: list[Any] | None = Field(None, description="a list of nodes")
    defaults: dict | None = Field(None, description="a mapping of node keys")
    generate: Any = None  # a GenerateEntry or a list of them
    network_labels: NetworkLabels | None = None
    computeDomains: bool = Field(False, description="true or false")  # noqa: N815 - the file's key


# --- one line per problem -----------------------------------------------------------------------
def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's type holds, and whether it holds a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in get_args(annotation):
        model, listed = _model_in(arg)
        if model is not None:
            return model, listed or get_origin(annotation) is list
    return None, False


def _expected(model: type[BaseModel] | None) -> str:
    if model is None:
        return "a mapping"
    return getattr(model, "expected", None) or f"a mapping with {', '.join(model.model_fields)}"


def _problem(exc: ValidationError, root: type[BaseModel]) -> str:
    """The first error as 'key: expected ..., got ...' (or 'unknown keys ...; expected ...'),
    the keys of its path named as in the file: `network: rack`, `taints[0]`."""
    errors = exc.errors()
    error = errors[0]
    # Walk the error's path down the models: `model` is the one the path ends in (None
    # past a plain value), `mapping` whether the error is about such a mapping itself.
    path: list[str] = []
    model: type[BaseModel] | None = root
    field, mapping = None, True
    for part in error["loc"]:
        if isinstance(part, int):
            path[-1] += f"[{part}]"
            mapping = True
        elif model is not None and part in model.model_fields:
            field = model.model_fields[part]
            path.append(part)
            model, listed = _model_in(field.annotation)
            mapping = not listed
        else:  # a union member's tag, or a key the model does not have
            break
    if error["type"] == "extra_forbidden":
        parent = error["loc"][:-1]
        unknown = {e["loc"][-1] for e in errors
                   if e["type"] == "extra_forbidden" and e["loc"][:-1] == parent}
        return ": ".join([*path, f"unknown {_keys(unknown)}; expected {_expected(model)}"])
    if error["type"] == "value_error":
        what = str(error["ctx"]["error"])
    else:
        if model is not None and mapping:
            expected = _expected(model)
        elif field is not None and field.description:
            expected = field.description
        else:
            expected = error["msg"].lower()
        what = f"expected {expected}"
        if error["type"] != "missing":
            what += f", got {error['input']!r}"
    return ": ".join([*path, what])


def _validated(model: type[BaseModel], data: Any, where: str):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{where}: {_problem(exc, model)}") from None


# --- loading ------------------------------------------------------------------------------------
# Cluster files shipped with hvdk8s, named `--cluster example:NAME` (what the help shows
# works from an installed wheel, not only from a checkout).
EXAMPLE_PREFIX = "example:"
EXAMPLES_DIR = Path(__file__).resolve().parent / "example_clusters"


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml"))


def resolve_cluster_path(path: str | Path) -> Path:
    """`example:NAME` is the shipped example NAME; anything else a path."""
    text = str(path)
    if not text.startswith(EXAMPLE_PREFIX):
        return Path(path)
    name = text[len(EXAMPLE_PREFIX):]
    found = EXAMPLES_DIR / f"{name}.yaml"
    if name not in example_names():
        raise UsageError(f"--cluster {text}: no example cluster {name!r}; the examples: "
                         + ", ".join(f"{EXAMPLE_PREFIX}{n}" for n in example_names()))
    return found


def load_cluster(path: str | Path):
    """The Cluster described by the file at `path` (or the shipped example it names)."""
    path = resolve_cluster_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--cluster: {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"--cluster: {path}: cannot read: {exc.strerror or exc}") from None
    data = _parse(text, path)
    return cluster_from_data(data, source=path)


def _parse(text: str, path: Path) -> Any:
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" or stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if path.suffix.lower() == ".json":
                raise UsageError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    import yaml  # lazy: a JSON cluster file needs no PyYAML (~8 ms)

    return yaml_errors.load(text, str(path), getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def cluster_from_data(data: Any, *, source: Path | str = "<cluster>"):
    """A Cluster from already-parsed data (what the file holds)."""
    source = Path(source)
    if isinstance(data, list):
        data = {"nodes": data}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping with a 'nodes' list (see `hvdk8s plan --help`)")
    unknown = set(data) - set(ClusterFile.model_fields)
    if unknown:
        raise UsageError(f"{source}: unknown top-level {_keys(unknown)}; "
                         f"expected {', '.join(ClusterFile.model_fields)}")
    top = _validated(ClusterFile, data, str(source))
    defaults = top.defaults or {}
    _check_keys(defaults, f"{source}: defaults")
    builder = _Builder(source, top.network_labels)
    nodes = []
    for i, raw in enumerate(top.nodes or []):
        nodes.append(builder.node(_merged(defaults, raw), f"nodes[{i}]"))
    blocks = top.generate if isinstance(top.generate, list) else [top.generate]
    for i, block in enumerate(b for b in blocks if b is not None):
        where = f"generate[{i}]" if isinstance(top.generate, list) else "generate"
        nodes.extend(_generate(block, defaults, builder, where))
    if not nodes:
        raise UsageError(f"{source}: no nodes (give a 'nodes' list or 'generate')")
    seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.name in seen:
            raise UsageError(f"{source}: node name {n.name!r} appears twice (entries {seen[n.name]} and {i})")
        seen[n.name] = i
    return Cluster(tuple(nodes), compute_domains=top.computeDomains)


def _merged(defaults: dict, raw: Any) -> Any:
    """The node's keys over the defaults; labels and network merge key by key."""
    if not isinstance(raw, dict):
        return raw  # NodeEntry says what is wrong
    merged = {**defaults, **raw}
    for key in ("labels", "network"):
        if isinstance(defaults.get(key), dict) and isinstance(raw.get(key), dict):
            merged[key] = {**defaults[key], **raw[key]}
    return merged


def _check_keys(raw: dict, where: str) -> None:
    unknown = set(raw) - set(NodeEntry.model_fields)
    if unknown:
        raise UsageError(f"{where}: unknown {_keys(unknown)}; expected {_expected(NodeEntry)}")


def _keys(unknown: set) -> str:
    return f"key{'s' if len(unknown) != 1 else ''} {', '.join(sorted(map(str, unknown)))}"


def _generate(raw: Any, defaults: dict, builder: _Builder, where: str) -> list:
    where = f"{builder.source}: {where}"
    block = _validated(GenerateEntry, raw, where)
    node_part = block.model_extra or {}
    _check_keys(node_part, where)
    rng = random.Random(block.seed)
    last = block.start + block.count - 1
    width = len(str(last)) if block.count else 1
    base = {**defaults, **node_part}
    out = []
    for i in range(block.count):
        node = builder.node(dict(base, name=f"{block.prefix}{block.start + i:0{width}d}"),
                            f"generate[{i}]")
        if block.allocated_fraction and node.gpus and "allocated" not in node_part:
            taken = frozenset(g for g in range(node.gpus) if rng.random() < block.allocated_fraction)
            node = replace(node, allocated=taken)
        out.append(node)
    return out


class _Builder:
    """Nodes from validated entries: what needs the topology, the GPU count or the file's
    folder."""

    def __init__(self, source: Path, network_labels: NetworkLabels | None):
        self.source = source
        given = {k: tuple(v) for k, v in (network_labels or NetworkLabels()) if v is not None}
        self.label_keys = LabelKeys(**{**DEFAULT_LABEL_KEYS.__dict__, **given})
        self._files: dict[Path, Any] = {}
        self._matrices: dict[tuple, Any] = {}

    def node(self, raw: Any, where: str):
        name = raw.get("name") if isinstance(raw, dict) else None
        label = f"{self.source}: {where}" + (f" ({name})" if isinstance(name, str) else "")
        entry = _validated(NodeEntry, raw, label)
        try:
            return self._node(entry)
        except _Problem as exc:
            raise UsageError(f"{label}: {exc}") from None

    def _node(self, e: NodeEntry) -> Node:
        gpu_model = e.gpu_model or e.labels.get(GPU_PRODUCT_LABEL, "unknown")
        topology = self._topology(e.topology, e.gpus, e.labels.get(GPU_PRODUCT_LABEL) or gpu_model)
        gpus = topology.gpus if e.gpus is None else e.gpus
        if gpus < topology.gpus:
            topology = topology.subset(gpus)
        elif gpus > topology.gpus:
            raise _Problem(f"gpus is {gpus} but topology has {plural(topology.gpus, 'GPU')}")
        allocated = e.allocated or []
        bad = [i for i in allocated if not 0 <= i < gpus]
        if bad:
            raise _Problem(f"allocated: GPU {bad[0]} does not exist (the node has GPUs 0..{gpus - 1})"
                           if gpus else f"allocated: GPU {bad[0]} on a node without GPUs")
        if len(set(allocated)) != len(allocated):
            raise _Problem(f"allocated: a GPU index appears twice in {allocated}")
        return Node(
            name=e.name, gpus=gpus, topology=topology, allocated=frozenset(allocated),
            gpu_model=gpu_model, network_gbps=float(e.network_gbps), labels=dict(e.labels),
            taints=tuple(Taint(key=t.key, value=t.value, effect=t.effect) for t in e.taints),
            free_cpu=e.cpu, free_memory=e.memory, ready=e.ready, pcie_gen=e.pcie_gen,
            # A file gives one figure: what the node offers the job, free and allocatable.
            alloc_cpu=e.cpu, alloc_memory=e.memory,
            network=self._network(e.network, e.labels), dra_devices=_dra(e.dra, gpus),
            dra_nics=_dra_nics(e.dra),
            rdma=_rdma(e), tcp_efficiency=e.tcp_efficiency,
            nvlink_domain=_nvlink_domain(e),
        )

    def _network(self, entry: NetworkEntry | None, labels: dict) -> NetworkPosition:
        from_labels = position_from_labels(labels, self.label_keys)
        if entry is None:
            return from_labels
        given = entry.model_fields_set
        levels = {lv: getattr(entry if lv in given else from_labels, lv)
                  for lv in ("zone", "block", "rack")}
        labelled = {f"{lv}_label": getattr(from_labels, f"{lv}_label") for lv in ("rack", "block")
                    if levels[lv] == getattr(from_labels, lv)}
        return NetworkPosition(**levels, oversubscription=float(entry.oversubscription),
                               scheduler=entry.scheduler, topology=entry.topology,
                               **labelled)

    def _topology(self, value: str | list | None, gpus: int | None, product: str | None) -> Topology:
        if value is None:
            if not gpus:
                return Topology(links=(), name="no-gpus")
            return preset_for(product, gpus)
        if isinstance(value, list):
            key = tuple(tuple(r) if isinstance(r, list) else (r,) for r in value)
            if key not in self._matrices:
                try:
                    self._matrices[key] = Topology.from_links(value)
                except ValueError as exc:
                    raise _Problem(f"topology: {exc}") from None
            return self._matrices[key]
        try:
            return preset(value)
        except ValueError as preset_error:
            path = Path(value)
            if not path.is_absolute():
                path = self.source.parent / path
            if not path.exists():
                raise _Problem(f"topology: {preset_error}; and no file {path} to read") from None
            return self._file(path)

    def _file(self, path: Path) -> Topology:
        if path not in self._files:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise _Problem(f"topology: cannot read {path}: {exc.strerror or exc}") from None
            try:
                self._files[path] = parse_topo_matrix(text)
            except TopologyParseError as exc:
                raise _Problem(f"topology: {path}: {exc}") from None
        return self._files[path]


def _rdma(e: NodeEntry) -> tuple:
    found = rdma.from_allocatable(e.resources)
    if (e.rdma_link or e.rdma_hcas) and not found:
        raise _Problem("rdma_link/rdma_hcas: the node lists no RDMA resource under resources "
                       "(rdma/..., or an SR-IOV pool such as nvidia.com/...)")
    return tuple(replace(r, link=e.rdma_link, hcas=tuple(e.rdma_hcas)) for r in found)


def _nvlink_domain(e: NodeEntry) -> str | None:
    try:
        if e.nvlinkDomain is not None:
            return parse_clique(e.nvlinkDomain)
        return clique_from_labels(e.labels)
    except ValueError as exc:
        key = "nvlinkDomain" if e.nvlinkDomain is not None else f"labels: {CLIQUE_LABEL}"
        raise _Problem(f"{key}: {exc}") from None


def _dra_nics(entry: DraEntry | None) -> tuple:
    if entry is None:
        return ()
    names = [n.name for n in entry.nics]
    if len(set(names)) != len(names):
        raise _Problem("dra: nics: a NIC name appears twice")
    return tuple(DraNic(name=n.name, driver=entry.nic_driver, pcie_root=n.pcie_root)
                 for n in entry.nics)


def _dra(entry: DraEntry | None, gpus: int) -> tuple:
    if entry is None:
        return ()
    out = []
    for i, d in enumerate(entry.device_list()):
        if not 0 <= d.index < gpus:
            raise _Problem(f"dra: devices[{i}]: index: expected a GPU index 0..{gpus - 1}, "
                           f"got {d.index!r}")
        out.append(DraDevice(name=d.name or f"gpu-{d.index}", index=d.index, uuid=d.uuid,
                             driver=entry.driver, pcie_root=d.pcie_root))
    return tuple(sorted(out, key=lambda d: d.index))
