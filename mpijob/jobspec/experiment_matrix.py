"""Experiment files: the schema, its one-line errors, and the matrix of runs it declares.

An experiment is a matrix (model x workers x GPUs per worker x placement x batch size x
precision x the other benchmark flags) run `repetitions` times. Every run has a stable id,
`<experiment>-<hash of its configuration>-r<repetition>`, which is also its job name, so a
results file written yesterday still says which runs are done. Pure: data to data; the
launcher reads the YAML and writes the results.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mpijob.jobspec import defaults
from mpijob.jobspec.defaults import BackendName, Mode, PlacementPolicy, Precision
from mpijob.jobspec.spec import BENCHMARK_MODELS, DNS1035, BenchmarkModel

# <name>-<8 hex>-r<3 digits> plus the launcher pod's 15-character suffix stays within 63.
MAX_NAME_LENGTH = 30
MAX_REPETITIONS = 999
HASH_LENGTH = 8

Model = BenchmarkModel

# What each key expects, worded for people; errors say "expected <this>, got <value>".
EXPECTED = {
    "name": f"a DNS-1035 label of at most {MAX_NAME_LENGTH} characters (lower-case letters, "
            "digits and '-', starting with a letter, e.g. vgg16-scaling)",
    "description": "a string",
    "backend": " or ".join(defaults.BACKENDS),
    "image": "an image reference (e.g. horovod/horovod:0.28.1)",
    "namespace": "a namespace name (a DNS-1123 label)",
    "cluster": "the path of a cluster file (relative to the experiment file)",
    "repetitions": f"an integer from 1 to {MAX_REPETITIONS}",
    "timeout": "a positive number of seconds per run",
    "parallel": "a positive integer (runs at a time)",
    "mode": " or ".join(defaults.MODES),
    "env": "a mapping of VARIABLE: string value",
    "cpu": "a CPU quantity per worker (e.g. 4 or 500m) as a string",
    "memory": "a memory quantity per worker (e.g. 16Gi)",
    "node_selector": "a mapping of label: value",
    "matrix": "a mapping of matrix keys to values or lists of values",
    "model": f"one of {', '.join(BENCHMARK_MODELS)}",
    "workers": "a positive integer",
    "gpus": "an integer >= 0 (GPUs per worker; 0 runs on the CPU)",
    "placement": f"one of {', '.join(defaults.PLACEMENT_POLICIES)}",
    "batch_size": "an integer from 1 to 4096",
    "precision": " or ".join(defaults.PRECISIONS),
    "image_size": "an integer from 32 to 1024, or null (the model's own size)",
    "num_batches": "a positive integer",
    "num_warmup_batches": "an integer >= 0",
    "xla": "true or false",
    "data": " or ".join(defaults.DATA_NAMES),
    "data_dir": "the directory of ImageNet TFRecords (train-*-of-*) as the ranks see it; "
                "relative to the experiment file with backend local",
}


class ExperimentError(ValueError):
    """A bad experiment; `problems` are (key path, message) pairs, e.g.
    ("matrix.workers[1]", "expected a positive integer, got 'two'")."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" if path else message
                                   for path, message in problems))


def _as_list(value: Any) -> Any:
    """A single value stands for a one-value axis: `workers: 4` is `workers: [4]`."""
    return value if isinstance(value, list | dict) else [value]


class _Duplicate(ValueError):
    """Two equal values on one axis would be one run twice, under one id."""

    def __init__(self, index: int, first: int, value: Any):
        super().__init__(f"item {index} repeats item {first}")
        self.index, self.first, self.value = index, first, value


def _no_duplicates(values: list) -> list:
    seen: dict[Any, int] = {}
    for i, v in enumerate(values):
        key = (type(v), v)  # 1 and True are equal in Python, not here
        if key in seen:
            raise _Duplicate(i, seen[key], v)
        seen[key] = i
    return values


class Matrix(BaseModel):
    """The axes; the runs are their product. Each key takes one value or a list."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: list[Model] = Field(min_length=1)
    workers: list[int] = Field(min_length=1)
    gpus: list[int] = Field(min_length=1)
    placement: list[PlacementPolicy] = Field(default=[defaults.PLACEMENT_POLICY], min_length=1)
    batch_size: list[int] = Field(default=[defaults.BATCH_SIZE], min_length=1)
    precision: list[Precision] = Field(default=[defaults.PRECISION], min_length=1)
    image_size: list[int | None] = Field(default=[None], min_length=1)
    num_batches: list[int] = Field(default=[defaults.NUM_BATCHES], min_length=1)
    num_warmup_batches: list[int] = Field(default=[defaults.NUM_WARMUP_BATCHES], min_length=1)
    xla: list[bool] = Field(default=[False], min_length=1)
    # The benchmark's input: synthetic images, or ImageNet TFRecords from the
    # experiment's data_dir; the report puts the two side by side.
    data: list[defaults.DataName] = Field(default=[defaults.DATA_NAME], min_length=1)

    @field_validator("*", mode="before")
    @classmethod
    def _wrap(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("*", mode="after")
    @classmethod
    def _unique(cls, v: list) -> list:
        return _no_duplicates(v)

    @field_validator("workers", "num_batches")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        return _each(v, lambda x: x >= 1)

    @field_validator("gpus", "num_warmup_batches")
    @classmethod
    def _not_negative(cls, v: list[int]) -> list[int]:
        return _each(v, lambda x: x >= 0)

    @field_validator("batch_size")
    @classmethod
    def _batch(cls, v: list[int]) -> list[int]:
        return _each(v, lambda x: 1 <= x <= 4096)

    @field_validator("image_size")
    @classmethod
    def _image_size(cls, v: list[int | None]) -> list[int | None]:
        return _each(v, lambda x: x is None or 32 <= x <= 1024)


class _BadItem(ValueError):
    def __init__(self, index: int, value: Any):
        super().__init__(f"item {index}")
        self.index = index
        self.value = value


def _each(values: list, ok) -> list:
    for i, v in enumerate(values):
        if not ok(v):
            raise _BadItem(i, v)
    return values


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    description: str | None = None
    backend: BackendName
    image: str | None = None
    namespace: str | None = None
    cluster: str | None = None
    repetitions: int = 1
    timeout: float = 1800.0
    parallel: int = 1
    mode: Mode = defaults.MODE
    env: dict[str, str] = Field(default_factory=dict)
    cpu: str | None = None
    memory: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    data_dir: str | None = None  # ImageNet TFRecords, for matrix.data imagenet
    matrix: Matrix

    @model_validator(mode="after")
    def _data_dir(self) -> Experiment:
        if "imagenet" in self.matrix.data and not self.data_dir:
            raise ValueError("data_dir")
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not DNS1035.match(v) or len(v) > MAX_NAME_LENGTH:
            raise ValueError("bad name")
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", v)):
            raise ValueError("bad namespace")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c.isspace() for c in v)):
            raise ValueError("bad image")
        return v

    @field_validator("repetitions")
    @classmethod
    def _repetitions(cls, v: int) -> int:
        if not 1 <= v <= MAX_REPETITIONS:
            raise ValueError("out of range")
        return v

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> Any:
        # YAML gives 600 (int) or 600.5 (float); both are seconds. Booleans are not.
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
            raise ValueError("bad timeout")
        return float(v)

    @field_validator("parallel")
    @classmethod
    def _parallel(cls, v: int) -> int:
        if v < 1:
            raise ValueError("not positive")
        return v


@dataclass(frozen=True)
class Run:
    """One job of the experiment: one point of the matrix, one repetition."""

    experiment: str
    model: str
    workers: int
    gpus: int
    placement: str
    batch_size: int
    precision: str
    image_size: int | None
    num_batches: int
    num_warmup_batches: int
    xla: bool
    repetition: int
    config_hash: str
    data: str = defaults.DATA_NAME

    @property
    def run_id(self) -> str:
        """Also the job's name: stable across invocations, a valid DNS-1035 label."""
        return f"{self.experiment}-{self.config_hash}-r{self.repetition}"

    @property
    def ranks(self) -> int:
        """MPI processes: one per GPU, or one per worker on the CPU."""
        return self.workers * self.gpus if self.gpus else self.workers

    def point(self) -> dict[str, Any]:
        """The matrix point (everything but the repetition and the ids)."""
        return {k: getattr(self, k) for k in AXES}

    def describe(self) -> str:
        device = f"{self.gpus} GPU" if self.gpus else "CPU"
        extra = f" {self.image_size}px" if self.image_size else ""
        extra += " real input" if self.data != defaults.DATA_NAME else ""
        return (f"{self.model} {self.workers}x{device} {self.placement} b{self.batch_size} "
                f"{self.precision}{extra} r{self.repetition}")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "run_id": self.run_id}


AXES = tuple(Matrix.model_fields)


def fixed_settings(experiment: Experiment) -> dict[str, Any]:
    """What, besides the matrix point, changes a measurement; part of every run's hash."""
    return {
        "backend": experiment.backend, "image": experiment.image, "mode": experiment.mode,
        "env": dict(sorted(experiment.env.items())), "cpu": experiment.cpu,
        "memory": experiment.memory,
        "node_selector": dict(sorted(experiment.node_selector.items())),
    }


def config_hash(point: dict[str, Any], fixed: dict[str, Any]) -> str:
    text = json.dumps({"point": point, "fixed": fixed}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def expand(experiment: Experiment) -> list[Run]:
    """Every run, repetition by repetition (rep 1 of the whole matrix first, so a cut-short
    experiment still covers the matrix), in the order the file lists the values."""
    m = experiment.matrix
    fixed = fixed_settings(experiment)
    points = [dict(zip(AXES, values, strict=True))
              for values in itertools.product(*(getattr(m, axis) for axis in AXES))]
    # Synthetic input is left out of the hash: runs recorded before the data axis existed
    # keep their ids.
    hashes = [config_hash({k: v for k, v in p.items()
                           if not (k == "data" and v == defaults.DATA_NAME)}, fixed)
              for p in points]
    return [Run(experiment=experiment.name, repetition=rep, config_hash=h, **p)
            for rep in range(1, experiment.repetitions + 1)
            for p, h in zip(points, hashes, strict=True)]


# ------------------------------------------------------------------------------ errors
def key_path(loc: tuple) -> str:
    """('matrix', 'workers', 1) -> 'matrix.workers[1]'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _allowed_keys(loc: tuple) -> list[str]:
    return list(Matrix.model_fields if loc[:1] == ("matrix",) else Experiment.model_fields)


def _problem(error: Mapping[str, Any]) -> tuple[str, str]:
    loc = tuple(p for p in error["loc"] if p not in ("function-after[_unique(), list[...]]",))
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(loc))
        return key_path(loc), f"unknown key; expected one of {allowed}"
    names = [p for p in loc if isinstance(p, str)]
    field = names[-1] if names else ""
    if loc[:1] == ("env",) or loc[:1] == ("node_selector",):
        field = loc[0]
    expected = EXPECTED.get(field, "a valid value")
    if kind == "value_error" and str(error.get("msg", "")).endswith("data_dir"):
        return "data_dir", f"missing; matrix.data has imagenet, so expected {EXPECTED['data_dir']}"
    if kind == "missing":
        return key_path(loc), f"missing; expected {expected}"
    ctx_error = error.get("ctx", {}).get("error")
    if isinstance(ctx_error, _BadItem):
        return key_path((*loc, ctx_error.index)), f"expected {expected}, got {ctx_error.value!r}"
    if kind == "too_short":
        return key_path(loc), f"expected at least one value ({expected}), got []"
    if isinstance(ctx_error, _Duplicate):
        return (key_path((*loc, ctx_error.index)),
                f"{ctx_error.value!r} repeats {key_path((*loc, ctx_error.first))}; "
                "list each value once")
    if loc[:1] == ("matrix",) and len(loc) == 2 and kind in ("list_type",):
        return key_path(loc), f"expected {expected} or a list of them, got {value!r}"
    if kind in ("model_type", "dict_type") and len(loc) <= 1:
        shown = repr(value) if isinstance(value, str | int | float) else f"a {type(value).__name__}"
        return key_path(loc), f"expected {expected}, got {shown}"
    return key_path(loc), f"expected {expected}, got {value!r}"


def parse_experiment(data: Any) -> Experiment:
    """Validate the parsed YAML; every problem becomes one (key path, message) pair."""
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ExperimentError([("", f"expected a mapping of experiment settings "
                                    f"(name, backend, matrix, ...), got {got}")])
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise ExperimentError([("", f"keys must be strings, got {bad_keys[0]!r}")])
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            problem = _problem(error)
            if problem not in problems:
                problems.append(problem)
        raise ExperimentError(problems) from None
