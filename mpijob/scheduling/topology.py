"""A node's GPU topology: for every pair of GPUs the link kind `nvidia-smi topo -m` prints.

`parse_topo_matrix` reads real `nvidia-smi topo -m` output from any driver generation:
tab- or space-separated, NIC columns and rows (`mlx5_0`, `NIC0`, ...), the `CPU Affinity`,
`NUMA Affinity` and `GPU NUMA ID` columns, the `Legend:` and `NIC Legend:` blocks, old
drivers' `SOC` (read as SYS), ANSI colour codes, CRLF line ends, a shell prompt before the
matrix, and cells that lost the tab between them when pasted (`NODENODE`, `GPU0GPU1`).
Anything else that does not fit raises `TopologyParseError` with the 1-based line number.

The topology agent's node annotation (`hvdk8s.io/gpu-topology`) is built and read here too,
so the agent, the Kubernetes backend and the cluster file share one format. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mpijob.plural import plural
from mpijob.scheduling.links import SELF, LinkCodeError, bandwidth_gbs, normalize

ANNOTATION_TOPOLOGY = "hvdk8s.io/gpu-topology"
TOPOLOGY_FORMAT_VERSION = 1
# The most GPUs one node (one kernel, one kubelet) is taken to have. No real node has more:
# the largest single systems hold 16 (DGX-2, HGX-2) to 20 (PCIe boxes), and an NVL72 rack
# is 18 nodes of 4 GPUs to Kubernetes. A made-up count (a preset name, a cluster file) past
# it is a typo, and a link matrix of that size would not fit in memory.
MAX_GPUS_PER_NODE = 64


def check_gpu_count(count: int) -> int:
    """`count` if a node can have that many GPUs; ValueError saying why not otherwise."""
    if count < 1:
        raise ValueError(f"a node has at least one GPU, got {count}")
    if count > MAX_GPUS_PER_NODE:
        raise ValueError(too_many_gpus(count))
    return count


def too_many_gpus(count: int | str) -> str:
    return (f"at most {MAX_GPUS_PER_NODE} GPUs per node, got {count} (no real node has more; "
            "a rack such as NVL72 is several nodes to Kubernetes)")


class TopologyParseError(ValueError):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class Topology:
    links: tuple[tuple[str, ...], ...]
    cpu_affinity: tuple[str | None, ...] = ()
    numa: tuple[int | None, ...] = ()
    nics: tuple[str, ...] = ()
    # Per GPU, its link to each NIC in `nics` order (empty when the output had no NICs).
    gpu_nic_links: tuple[tuple[str, ...], ...] = ()
    name: str | None = None

    @property
    def gpus(self) -> int:
        return len(self.links)

    def link(self, i: int, j: int) -> str:
        return self.links[i][j]

    def bandwidth(self, i: int, j: int, *, pcie_gen: int = 3, gpu_model: str | None = None) -> float:
        """Effective unidirectional GB/s between GPUs i and j (inf for i == j)."""
        return bandwidth_gbs(self.links[i][j], pcie_gen=pcie_gen, gpu_model=gpu_model)

    def to_json(self) -> dict:
        return {
            "gpus": self.gpus,
            "links": [list(row) for row in self.links],
            "cpu_affinity": list(self.cpu_affinity),
            "numa": list(self.numa),
            "nics": list(self.nics),
            "gpu_nic_links": [list(row) for row in self.gpu_nic_links],
            "name": self.name,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> Topology:
        if not isinstance(d, Mapping) or "links" not in d:
            raise ValueError("a topology is an object with a 'links' matrix")
        base = cls.from_links(d["links"])
        n = base.gpus
        cpu = tuple(None if v is None else str(v) for v in d.get("cpu_affinity") or ())
        numa = tuple(_optional_int(v) for v in d.get("numa") or ())
        for field_name, values in (("cpu_affinity", cpu), ("numa", numa)):
            if values and len(values) != n:
                raise ValueError(f"{field_name} has {plural(len(values), 'entry', 'entries')} for {plural(n, 'GPU')}")
        nics = tuple(str(v) for v in d.get("nics") or ())
        gpu_nic = tuple(tuple(normalize(c) for c in row) for row in d.get("gpu_nic_links") or ())
        if gpu_nic and (len(gpu_nic) != n or any(len(r) != len(nics) for r in gpu_nic)):
            raise ValueError(f"gpu_nic_links must be {plural(n, 'row')} of {plural(len(nics), 'code')}")
        if "gpus" in d and d["gpus"] != n:
            raise ValueError(f"'gpus' is {d['gpus']} but the links matrix is {n}x{n}")
        return cls(base.links, cpu, numa, nics, gpu_nic, d.get("name"))

    @classmethod
    def from_links(cls, rows: Iterable[Iterable[str]], name: str | None = None) -> Topology:
        """A topology from a square matrix of link codes; ValueError says what is wrong."""
        if isinstance(rows, str | bytes):
            raise ValueError("links must be a list of rows of link codes, not a string")
        try:
            matrix = [list(r) for r in rows]
        except TypeError:
            raise ValueError("links must be a list of rows of link codes") from None
        n = len(matrix)
        if n == 0:
            raise ValueError("links matrix is empty (a node has at least one GPU)")
        out = []
        for i, row in enumerate(matrix):
            if isinstance(row, str) or len(row) != n:
                raise ValueError(f"links row {i} has {plural(len(row), 'entry', 'entries')}; the matrix must be {n}x{n}")
            try:
                out.append(tuple(normalize(str(c)) for c in row))
            except LinkCodeError as exc:
                raise ValueError(f"links row {i}: {exc}") from None
        for i in range(n):
            if out[i][i] != SELF:
                raise ValueError(f"links[{i}][{i}] is {out[i][i]!r}; the diagonal must be X")
            for j in range(i + 1, n):
                if out[i][j] == SELF:
                    raise ValueError(f"links[{i}][{j}] is X off the diagonal")
                if out[i][j] != out[j][i]:
                    raise ValueError(
                        f"links is not symmetric: [{i}][{j}] is {out[i][j]} but [{j}][{i}] is {out[j][i]}"
                    )
        return cls(tuple(out), name=name)

    def subset(self, count: int) -> Topology:
        """The first `count` GPUs (a VM or partition that sees part of a system)."""
        if count >= self.gpus:
            return self

        def cut(values: tuple) -> tuple:
            return values[:count] if values else values

        return Topology(
            tuple(row[:count] for row in self.links[:count]),
            cut(self.cpu_affinity), cut(self.numa), self.nics, cut(self.gpu_nic_links),
            f"{self.name}[:{count}]" if self.name else None,
        )


def _optional_int(value) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --- nvidia-smi topo -m -----------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CODE = r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC"
_CODES = re.compile(rf"(?:{_CODE})+", re.IGNORECASE)
_ONE_CODE = re.compile(_CODE, re.IGNORECASE)
# Multi-word column names; everything else in the header is one whitespace-free word.
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_AFFINITY_RE = re.compile("|".join(re.escape(c).replace(r"\ ", r"\s+") for c in _AFFINITY_COLUMNS))
_GPU_NAME = re.compile(r"GPU(\d+)$")
# Splits a header word that lost its tabs: "GPU0GPU1", "GPU7mlx5_0", "NIC8NIC9".
_HEADER_PART = re.compile(r"GPU\d+|NIC\d+|.+?(?=GPU\d|NIC\d|$)")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _clean(line: str) -> str:
    return _ANSI.sub("", line.replace("\r", ""))


def _header_columns(line: str) -> list[str] | None:
    """The column names of a header line, or None when the line is not the header."""
    affinity = [m.group(0) for m in _AFFINITY_RE.finditer(line)]
    rest = _AFFINITY_RE.sub(" ", line)
    names: list[str] = []
    for word in rest.split():
        names.extend(p for p in _HEADER_PART.findall(word) if p)
    if not names or names[0] != "GPU0":
        return None
    # A row of the matrix also starts with GPU0: the header has no link codes after it.
    if len(names) > 1 and _CODES.fullmatch(names[1]):
        return None
    return names + [" ".join(a.split()) for a in affinity]


def _split_codes(token: str) -> list[str] | None:
    """'NV2' -> ['NV2'], 'NODENODE' -> ['NODE', 'NODE'] (a lost tab); None if not codes."""
    if not _CODES.fullmatch(token):
        return None
    return [c.upper() for c in _ONE_CODE.findall(token)]


def parse_topo_matrix(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` output; TopologyParseError names the line."""
    if not isinstance(text, str):
        raise TopologyParseError("expected the text of `nvidia-smi topo -m`")
    lines = [_clean(raw) for raw in text.split("\n")]
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line of its own
    header = _parse_header(lines)
    rows, nic_legend = _parse_rows(lines, header)
    return _assemble(header, rows, nic_legend)


@dataclass(frozen=True)
class _Header:
    at: int  # index of the header line
    affinity_cols: list[str]
    gpu_cols: list[str]
    nic_cols: list[str]

    @property
    def width(self) -> int:
        return len(self.gpu_cols) + len(self.nic_cols)


@dataclass(frozen=True)
class _GpuRow:
    codes: list[str]  # one link code per device column
    tail: list[str]  # the affinity cells after the codes
    lineno: int


def _parse_header(lines: list[str]) -> _Header:
    """The column line (GPU0 GPU1 ... NIC0 ... CPU Affinity ...), checked for order."""
    header_at = None
    columns: list[str] = []
    for idx, line in enumerate(lines):
        cols = _header_columns(line)
        if cols is not None:
            header_at, columns = idx, cols
            break
        if _looks_like_matrix_row(line):
            raise TopologyParseError(
                "matrix row before the header line (the line with GPU0 GPU1 ... column names)",
                idx + 1,
            )
    if header_at is None:
        # Where the header should have been: the first line with anything on it.
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None:
            raise TopologyParseError("no text: expected the output of `nvidia-smi topo -m`", 1)
        raise TopologyParseError(
            "no header line found: expected a line of column names starting with GPU0 "
            "(the first line of `nvidia-smi topo -m` output)",
            first + 1,
        )
    affinity_cols = [c for c in columns if c in _AFFINITY_COLUMNS]
    device_cols = [c for c in columns if c not in _AFFINITY_COLUMNS]
    gpu_cols = [c for c in device_cols if _GPU_NAME.match(c)]
    n = len(gpu_cols)
    if gpu_cols != [f"GPU{i}" for i in range(n)] or device_cols[:n] != gpu_cols:
        raise TopologyParseError(
            f"header columns must start GPU0..GPU{n - 1} in order, got {' '.join(device_cols)}",
            header_at + 1,
        )
    return _Header(header_at, affinity_cols, gpu_cols, device_cols[n:])


def _parse_rows(lines: list[str], header: _Header) -> tuple[dict[int, _GpuRow], dict[str, str]]:
    """The GPU rows by index (NIC rows are checked, not kept) and the NIC legend."""
    n = len(header.gpu_cols)
    gpu_rows: dict[int, _GpuRow] = {}
    nic_legend: dict[str, str] = {}
    section = "matrix"
    last_row_line = header.at + 1  # where the matrix ends, for a missing row
    for idx in range(header.at + 1, len(lines)):
        line = lines[idx]
        lineno = idx + 1
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NIC Legend"):
            section = "nic-legend"
            continue
        if stripped.startswith("Legend"):
            section = "legend"
            continue
        if section == "nic-legend":
            m = _NIC_LEGEND.match(line)
            if m:
                nic_legend[m.group(1)] = m.group(2)
            continue
        if section == "legend":
            continue
        label, codes, rest = _parse_row(stripped, header, lineno)
        last_row_line = lineno
        gm = _GPU_NAME.match(label)
        if gm:
            index = int(gm.group(1))
            if index >= n:
                raise TopologyParseError(f"row {label} but the header names only GPU0..GPU{n - 1}", lineno)
            if index in gpu_rows:
                raise TopologyParseError(f"row {label} appears twice", lineno)
            gpu_rows[index] = _GpuRow(codes, rest, lineno)
    missing = [f"GPU{i}" for i in range(n) if i not in gpu_rows]
    if missing:
        raise TopologyParseError(f"no row for {', '.join(missing)}", last_row_line)
    return gpu_rows, nic_legend


def _parse_row(stripped: str, header: _Header, lineno: int) -> tuple[str, list[str], list[str]]:
    """One matrix row: its label, exactly `width` link codes, and the cells after them."""
    tokens = stripped.split()
    label = tokens[0]
    if not _GPU_NAME.match(label) and label not in header.nic_cols:
        raise TopologyParseError(
            f"expected a matrix row starting with GPU<n> or one of the NIC columns "
            f"({', '.join(header.nic_cols) or 'none in the header'}), got {label!r}",
            lineno,
        )
    codes: list[str] = []
    rest = tokens[1:]
    while rest and len(codes) < header.width:
        split = _split_codes(rest[0])
        if split is None:
            break
        codes.extend(split)
        rest = rest[1:]
    if len(codes) != header.width:
        found = f"; first unexpected cell: {rest[0]!r}" if rest else ""
        raise TopologyParseError(
            f"row {label} has {len(codes)} link codes where the header has {header.width} device "
            f"columns (codes are X, NV#, PIX, PXB, PHB, NODE, SYS or SOC){found}",
            lineno,
        )
    return label, codes, rest


def _assemble(header: _Header, gpu_rows: dict[int, _GpuRow], nic_legend: dict[str, str]) -> Topology:
    """The Topology of the parsed rows, after checking the GPU-GPU block is a proper matrix."""
    n = len(header.gpu_cols)
    links = []
    cpu_affinity: list[str | None] = []
    numa: list[int | None] = []
    gpu_nic_links = []
    for i in range(n):
        row_of_i = gpu_rows[i]
        try:
            row = tuple(normalize(c) for c in row_of_i.codes[:n])
        except LinkCodeError as exc:  # pragma: no cover - the regex admits only codes
            raise TopologyParseError(str(exc), row_of_i.lineno) from None
        if row[i] != SELF:
            raise TopologyParseError(f"GPU{i}'s own cell is {row[i]}, expected X", row_of_i.lineno)
        links.append(row)
        gpu_nic_links.append(tuple(normalize(c) for c in row_of_i.codes[n:]))
        values = dict(zip(header.affinity_cols, row_of_i.tail, strict=False))
        cpu_affinity.append(_na(values.get("CPU Affinity")))
        numa.append(_optional_int(_na(values.get("NUMA Affinity"))))
    for i in range(n):
        for j in range(i + 1, n):
            if links[i][j] != links[j][i]:
                raise TopologyParseError(
                    f"matrix is not symmetric: GPU{i}->GPU{j} is {links[i][j]} but "
                    f"GPU{j}->GPU{i} is {links[j][i]}",
                    gpu_rows[j].lineno,
                )
            if links[i][j] == SELF:
                raise TopologyParseError(f"X between GPU{i} and GPU{j} off the diagonal",
                                         gpu_rows[i].lineno)
    return Topology(
        links=tuple(links),
        cpu_affinity=tuple(cpu_affinity) if header.affinity_cols else (),
        numa=tuple(numa) if "NUMA Affinity" in header.affinity_cols else (),
        nics=tuple(nic_legend.get(c, c) for c in header.nic_cols),
        gpu_nic_links=tuple(gpu_nic_links) if header.nic_cols else (),
    )


def _na(value: str | None) -> str | None:
    return None if value is None or value.upper() == "N/A" else value


def _looks_like_matrix_row(line: str) -> bool:
    tokens = line.split()
    return len(tokens) > 2 and bool(_GPU_NAME.match(tokens[0])) and all(
        _split_codes(t) for t in tokens[1:3]
    )


def format_matrix(topology: Topology) -> str:
    """The links as `nvidia-smi topo -m` lays them out (GPU rows and columns only)."""
    n = topology.gpus
    head = ["", *(f"GPU{j}" for j in range(n))]
    has_cpu = bool(topology.cpu_affinity)
    has_numa = bool(topology.numa)
    if has_cpu:
        head.append("CPU Affinity")
    if has_numa:
        head.append("NUMA Affinity")
    rows = [head]
    for i in range(n):
        row = [f"GPU{i}", *topology.links[i]]
        if has_cpu:
            row.append(topology.cpu_affinity[i] or "N/A")
        if has_numa:
            row.append("N/A" if topology.numa[i] is None else str(topology.numa[i]))
        rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(widths[c]) for c, cell in enumerate(r)).rstrip() for r in rows
    )


# --- the topology agent's node annotation --------------------------------------------------
def annotation_payload(
    *,
    node: str,
    topology: Topology,
    gpu_model: str,
    uuids: Sequence[str] = (),
    pcie_gen: int | None = 3,
    allocated: Mapping[str, Iterable[int]] | None = None,
    updated: str | None = None,
) -> str:
    """The JSON value of the `hvdk8s.io/gpu-topology` annotation (compact, sorted keys).

    `allocated` maps "<namespace>/<pod>" to the GPU indices the pod holds; `updated` is an
    RFC 3339 time the caller supplies (the core reads no clock)."""
    alloc = {k: sorted(int(i) for i in v) for k, v in sorted((allocated or {}).items())}
    for pod, indices in alloc.items():
        bad = [i for i in indices if not 0 <= i < topology.gpus]
        if bad:
            raise ValueError(f"pod {pod} holds GPU {bad[0]} but the node has {plural(topology.gpus, 'GPU')}")
    payload = {
        "version": TOPOLOGY_FORMAT_VERSION,
        "node": node,
        "gpu_model": gpu_model,
        "gpus": topology.gpus,
        "uuids": list(uuids),
        "links": [list(r) for r in topology.links],
        "numa": list(topology.numa),
        "cpu_affinity": list(topology.cpu_affinity),
        "nics": list(topology.nics),
        "pcie_gen": pcie_gen,
        "allocated": alloc,
        "updated": updated,
    }
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def parse_annotation(text: str) -> tuple[Topology, frozenset[int], dict]:
    """(topology, GPU indices held by any pod, the other fields) from an annotation value.

    ValueError (with what is wrong) for text that is not a version-1 payload."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{ANNOTATION_TOPOLOGY} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{ANNOTATION_TOPOLOGY} must be a JSON object")
    version = data.get("version")
    if version != TOPOLOGY_FORMAT_VERSION:
        raise ValueError(
            f"{ANNOTATION_TOPOLOGY} has format version {version!r}; this hvdk8s reads "
            f"version {TOPOLOGY_FORMAT_VERSION} (upgrade hvdk8s or the topology agent)"
        )
    try:
        topology = Topology.from_json(data)
    except ValueError as exc:
        raise ValueError(f"{ANNOTATION_TOPOLOGY}: {exc}") from None
    allocated = data.get("allocated") or {}
    if not isinstance(allocated, dict):
        raise ValueError(f"{ANNOTATION_TOPOLOGY}: 'allocated' must map pods to GPU indices")
    taken: set[int] = set()
    for pod, indices in allocated.items():
        for i in indices or ():
            if not isinstance(i, int) or not 0 <= i < topology.gpus:
                raise ValueError(f"{ANNOTATION_TOPOLOGY}: pod {pod} holds invalid GPU index {i!r}")
            taken.add(i)
    meta = {k: v for k, v in data.items() if k not in ("links", "numa", "cpu_affinity", "nics")}
    return topology, frozenset(taken), meta
