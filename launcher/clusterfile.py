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
        dra:                         # GPUs published by a DRA driver (mpijob.k8s.dra):
          uuids: [GPU-0a..., GPU-1b...]   # by index; or devices: [{index, uuid, name,
                                          # pcie_root}]; driver: gpu.nvidia.com
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
GPUs. Every problem is a UsageError naming the file, the node and the key.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from launcher.errors import UsageError
from mpijob.jobspec.spec import TAINT_EFFECTS

_NODE_KEYS = {
    "name", "gpus", "topology", "allocated", "gpu_model", "network_gbps", "labels", "taints",
    "cpu", "memory", "pcie_gen", "ready", "network", "dra",
}
_GENERATE_KEYS = {"count", "prefix", "allocated_fraction", "seed", "start"}
PRODUCT_LABEL = "nvidia.com/gpu.product"


class _Problem(Exception):
    """A problem in one node, turned into a UsageError with the file and node named."""


def load_cluster(path: str | Path):
    """The Cluster described by the file at `path`."""
    path = Path(path)
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
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise UsageError(f"{path}: not valid YAML{where}: {problem}") from None


def cluster_from_data(data: Any, *, source: Path | str = "<cluster>"):
    """A Cluster from already-parsed data (what the file holds)."""
    from mpijob.scheduling.cluster import Cluster

    source = Path(source)
    if isinstance(data, list):
        data = {"nodes": data}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping with a 'nodes' list (see `hvdk8s plan --help`)")
    unknown = set(data) - {"nodes", "defaults", "generate", "network_labels"}
    if unknown:
        raise UsageError(f"{source}: unknown top-level {_keys(unknown)}; "
                         "expected nodes, defaults, generate, network_labels")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UsageError(f"{source}: defaults: expected a mapping of node keys")
    _check_keys(defaults, f"{source}: defaults")
    raw_nodes = data.get("nodes") or []
    if not isinstance(raw_nodes, list):
        raise UsageError(f"{source}: nodes: expected a list of nodes")
    builder = _Builder(source, _network_labels(data.get("network_labels"), source))
    nodes = []
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            raise UsageError(f"{source}: nodes[{i}]: expected a mapping with at least 'name'")
        merged = {**defaults, **raw}
        if isinstance(defaults.get("labels"), dict) and isinstance(raw.get("labels"), dict):
            merged["labels"] = {**defaults["labels"], **raw["labels"]}
        if isinstance(defaults.get("network"), dict) and isinstance(raw.get("network"), dict):
            merged["network"] = {**defaults["network"], **raw["network"]}
        nodes.append(builder.node(merged, f"nodes[{i}]"))
    generate = data.get("generate")
    for spec in generate if isinstance(generate, list) else ([generate] if generate is not None else []):
        nodes.extend(_generate(spec, defaults, builder))
    if not nodes:
        raise UsageError(f"{source}: no nodes (give a 'nodes' list or 'generate')")
    seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.name in seen:
            raise UsageError(f"{source}: node name {n.name!r} appears twice (entries {seen[n.name]} and {i})")
        seen[n.name] = i
    return Cluster(tuple(nodes))


def _check_keys(raw: dict, where: str) -> None:
    unknown = set(raw) - _NODE_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown {_keys(unknown)}; "
                         f"expected {', '.join(sorted(_NODE_KEYS))}")


def _keys(unknown: set) -> str:
    return f"key{'s' if len(unknown) != 1 else ''} {', '.join(sorted(map(str, unknown)))}"


def _generate(spec: Any, defaults: dict, builder: _Builder) -> list:
    where = f"{builder.source}: generate"
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: expected a mapping with count and prefix")
    node_part = {k: v for k, v in spec.items() if k not in _GENERATE_KEYS}
    _check_keys(node_part, where)
    count = spec.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise UsageError(f"{where}: count: expected a whole number of nodes, got {count!r}")
    prefix = str(spec.get("prefix", "node-"))
    start = spec.get("start", 1)
    fraction = spec.get("allocated_fraction", 0.0)
    if not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
        raise UsageError(f"{where}: allocated_fraction: expected a number from 0 to 1, got {fraction!r}")
    rng = random.Random(spec.get("seed", 0))
    width = len(str(start + count - 1)) if count else 1
    base = {**defaults, **node_part}
    out = []
    for i in range(count):
        raw = dict(base, name=f"{prefix}{start + i:0{width}d}")
        node = builder.node(raw, f"generate[{i}]")
        if fraction and node.gpus and "allocated" not in node_part:
            from dataclasses import replace

            taken = frozenset(g for g in range(node.gpus) if rng.random() < fraction)
            node = replace(node, allocated=taken)
        out.append(node)
    return out


def _network_labels(value: Any, source: Path):
    from mpijob.scheduling.network import DEFAULT_LABEL_KEYS, LEVELS, LabelKeys

    if value is None:
        return DEFAULT_LABEL_KEYS
    if not isinstance(value, dict) or set(value) - set(LEVELS):
        raise UsageError(f"{source}: network_labels: expected a mapping of {', '.join(LEVELS)} "
                         "to a label key (or a list of keys)")
    given = {}
    for level, keys in value.items():
        keys = [keys] if isinstance(keys, str) else keys
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise UsageError(f"{source}: network_labels: {level}: expected a label key or a list of keys")
        given[level] = tuple(keys)
    return LabelKeys(**{**DEFAULT_LABEL_KEYS.__dict__, **given})


class _Builder:
    def __init__(self, source: Path, label_keys=None):
        from mpijob.scheduling.network import DEFAULT_LABEL_KEYS

        self.source = source
        self.label_keys = label_keys or DEFAULT_LABEL_KEYS
        self._files: dict[Path, Any] = {}
        self._matrices: dict[tuple, Any] = {}

    def node(self, raw: dict, where: str):
        name = raw.get("name")
        label = f"{self.source}: {where}" + (f" ({name})" if isinstance(name, str) else "")
        _check_keys(raw, label)
        try:
            return self._node(raw)
        except _Problem as exc:
            raise UsageError(f"{label}: {exc}") from None

    def _node(self, raw: dict):
        from mpijob.plural import plural
        from mpijob.scheduling.cluster import DEFAULT_NETWORK_GBPS, Node
        from mpijob.scheduling.topology import MAX_GPUS_PER_NODE, too_many_gpus

        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise _Problem("name: expected a non-empty string")
        labels = _labels(raw.get("labels"))
        gpu_model = raw.get("gpu_model", labels.get(PRODUCT_LABEL, "unknown"))
        if not isinstance(gpu_model, str):
            raise _Problem(f"gpu_model: expected a string, got {gpu_model!r}")
        gpus = raw.get("gpus")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0):
            raise _Problem(f"gpus: expected a whole number of GPUs (0 or more), got {gpus!r}")
        if gpus is not None and gpus > MAX_GPUS_PER_NODE:
            raise _Problem(f"gpus: {too_many_gpus(gpus)}")
        topology = self._topology(raw.get("topology"), gpus, labels.get(PRODUCT_LABEL) or gpu_model)
        if gpus is None:
            gpus = topology.gpus
        elif gpus < topology.gpus:
            topology = topology.subset(gpus)
        elif gpus > topology.gpus:
            raise _Problem(f"gpus is {gpus} but topology has {plural(topology.gpus, 'GPU')}")
        allocated = raw.get("allocated") or []
        if not isinstance(allocated, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in allocated):
            raise _Problem(f"allocated: expected a list of GPU indices, got {allocated!r}")
        bad = [i for i in allocated if not 0 <= i < gpus]
        if bad:
            raise _Problem(f"allocated: GPU {bad[0]} does not exist (the node has GPUs 0..{gpus - 1})"
                           if gpus else f"allocated: GPU {bad[0]} on a node without GPUs")
        if len(set(allocated)) != len(allocated):
            raise _Problem(f"allocated: a GPU index appears twice in {allocated}")
        network = raw.get("network_gbps", DEFAULT_NETWORK_GBPS)
        if not isinstance(network, int | float) or isinstance(network, bool) or network <= 0:
            raise _Problem(f"network_gbps: expected a positive number (Gbit/s), got {network!r}")
        pcie_gen = raw.get("pcie_gen", 3)
        if not isinstance(pcie_gen, int) or isinstance(pcie_gen, bool) or not 1 <= pcie_gen <= 6:
            raise _Problem(f"pcie_gen: expected 1 to 6, got {pcie_gen!r}")
        ready = raw.get("ready", True)
        if not isinstance(ready, bool):
            raise _Problem(f"ready: expected true or false, got {ready!r}")
        return Node(
            name=name,
            gpus=gpus,
            topology=topology,
            allocated=frozenset(allocated),
            gpu_model=gpu_model,
            network_gbps=float(network),
            labels=labels,
            taints=_taints(raw.get("taints")),
            free_cpu=_quantity(raw.get("cpu"), "cpu"),
            free_memory=_quantity(raw.get("memory"), "memory"),
            ready=ready,
            pcie_gen=pcie_gen,
            network=self._network(raw.get("network"), labels),
            dra_devices=_dra(raw.get("dra"), gpus),
        )

    def _network(self, value: Any, labels: dict):
        from mpijob.scheduling.network import (
            DEFAULT_OVERSUBSCRIPTION,
            NetworkPosition,
            position_from_labels,
        )

        if value is None:
            return position_from_labels(labels, self.label_keys)
        if not isinstance(value, dict) or set(value) - {"zone", "block", "rack", "oversubscription", "scheduler"}:
            raise _Problem("network: expected a mapping with zone, block, rack, oversubscription, scheduler")
        scheduler = value.get("scheduler")
        if scheduler not in (None, "kueue", "volcano"):
            raise _Problem(f"network: scheduler: expected kueue or volcano (which gang scheduler "
                           f"knows these levels), got {scheduler!r}")
        from_labels = position_from_labels(labels, self.label_keys)
        levels = {}
        for level in ("zone", "block", "rack"):
            v = value.get(level, getattr(from_labels, level))
            if v is not None and (isinstance(v, bool | dict | list) or v == ""):
                raise _Problem(f"network: {level}: expected a name, got {v!r}")
            levels[level] = None if v is None else str(v)
        over = value.get("oversubscription", DEFAULT_OVERSUBSCRIPTION)
        if not isinstance(over, int | float) or isinstance(over, bool) or over < 1:
            raise _Problem("network: oversubscription: expected a number of at least 1 "
                           f"(server bandwidth : uplink bandwidth of the rack's switch), got {over!r}")
        labelled = {f"{lv}_label": getattr(from_labels, f"{lv}_label") for lv in ("rack", "block")
                    if levels[lv] == getattr(from_labels, lv)}
        return NetworkPosition(**levels, oversubscription=float(over), scheduler=scheduler, **labelled)

    def _topology(self, value: Any, gpus: int | None, product: str | None):
        from mpijob.scheduling.presets import preset, preset_for
        from mpijob.scheduling.topology import Topology

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
        if not isinstance(value, str) or not value:
            raise _Problem("topology: expected a preset name, a path to `nvidia-smi topo -m` output "
                           f"or a matrix of link codes, got {value!r}")
        try:
            return preset(value)
        except ValueError as preset_error:
            path = Path(value)
            if not path.is_absolute():
                path = self.source.parent / path
            if not path.exists():
                raise _Problem(f"topology: {preset_error}; and no file {path} to read") from None
            return self._file(path)

    def _file(self, path: Path):
        from mpijob.scheduling.topology import TopologyParseError, parse_topo_matrix

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


def _labels(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem(f"labels: expected a mapping of label keys to values, got {value!r}")
    out = {}
    for k, v in value.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        if isinstance(v, dict | list) or v is None:
            raise _Problem(f"labels: {k}: expected a string value, got {v!r}")
        out[str(k)] = str(v)
    return out


def _taints(value: Any) -> tuple:
    from mpijob.scheduling.cluster import Taint

    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Problem("taints: expected a list of key=value:Effect strings or {key, value, effect} mappings")
    out = []
    for i, t in enumerate(value):
        if isinstance(t, str):
            body, colon, effect = t.rpartition(":")
            if not colon:
                raise _Problem(f"taints[{i}]: {t!r} has no effect; expected key=value:Effect or key:Effect")
            key, eq, val = body.partition("=")
            t = {"key": key, "value": val if eq else None, "effect": effect}
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not t["key"]:
            raise _Problem(f"taints[{i}]: expected key=value:Effect or a mapping with key, value, effect")
        effect = t.get("effect", "NoSchedule")
        if effect not in TAINT_EFFECTS:
            raise _Problem(f"taints[{i}]: effect {effect!r}; expected one of "
                           f"{', '.join(TAINT_EFFECTS)}")
        val = t.get("value")
        out.append(Taint(key=t["key"], value=None if val is None else str(val), effect=effect))
    return tuple(out)


def _quantity(value: Any, key: str) -> float | None:
    from mpijob.jobspec.quantity import QuantityError, parse_quantity

    if value is None:
        return None
    if isinstance(value, bool):
        raise _Problem(f"{key}: expected a quantity such as {'8 or 500m' if key == 'cpu' else '64Gi'}, got {value!r}")
    try:
        q = float(parse_quantity(value))
    except QuantityError as exc:
        raise _Problem(f"{key}: {exc}") from None
    if q < 0:
        raise _Problem(f"{key}: must not be negative, got {value!r}")
    return q


def _dra(value: Any, gpus: int) -> tuple:
    from mpijob.k8s.dra import DRIVER, DraDevice

    if value is None:
        return ()
    if not isinstance(value, dict) or set(value) - {"driver", "uuids", "devices"}:
        raise _Problem("dra: expected a mapping with uuids (one per GPU index) or devices, and driver")
    driver = value.get("driver", DRIVER)
    if not isinstance(driver, str) or not driver:
        raise _Problem(f"dra: driver: expected a driver name such as {DRIVER}, got {driver!r}")
    raw = value.get("devices")
    if raw is None:
        uuids = value.get("uuids")
        if not isinstance(uuids, list):
            raise _Problem("dra: give uuids (a list, one per GPU index) or devices")
        raw = [{"index": i, "uuid": u} for i, u in enumerate(uuids)]
    if not isinstance(raw, list):
        raise _Problem("dra: devices: expected a list of {index, uuid, name, pcie_root}")
    out, seen = [], set()
    for i, d in enumerate(raw):
        if not isinstance(d, dict) or set(d) - {"index", "uuid", "name", "pcie_root"}:
            raise _Problem(f"dra: devices[{i}]: expected a mapping with index, uuid, name, pcie_root")
        index, uuid = d.get("index"), d.get("uuid")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < gpus:
            raise _Problem(f"dra: devices[{i}]: index: expected a GPU index 0..{gpus - 1}, got {index!r}")
        if not isinstance(uuid, str) or not uuid or any(c in uuid for c in "\"\\ "):
            raise _Problem(f"dra: devices[{i}]: uuid: expected the GPU's UUID (GPU-...), got {uuid!r}")
        if index in seen:
            raise _Problem(f"dra: GPU index {index} appears twice")
        seen.add(index)
        out.append(DraDevice(name=str(d.get("name") or f"gpu-{index}"), index=index, uuid=uuid,
                             driver=driver, pcie_root=d.get("pcie_root")))
    return tuple(sorted(out, key=lambda d: d.index))
