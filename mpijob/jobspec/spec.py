"""The job spec: everything a user says about an MPI/Horovod job, validated once.

`JobSpec` is immutable; `build_spec(**fields)` validates and turns the first problem into
a `SpecError` that names the field, so the CLI can name the option. The derived names of
every object hvdk8s creates are defined in `mpijob.jobspec.names`; the name length limit here is
what keeps all of them valid 63-character labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo

from mpijob import gang as gangs
from mpijob.errors import SpecError
from mpijob.jobspec import defaults, names, refs
from mpijob.jobspec.defaults import (
    CleanPodPolicy,
    GangScheduler,
    GpuRequestChoice,
    MPIImplementation,
    PlacementPolicy,
    Precision,
    PreflightMode,
    PullPolicy,
    RdmaChoice,
)
from mpijob.jobspec.elastic_bounds import check_bounds
from mpijob.jobspec.image_ref import image_problem
from mpijob.jobspec.launch_line import is_launcher_line
from mpijob.jobspec.options import parse_count, parse_key_value
from mpijob.jobspec.quantity import QuantityError, parse_quantity
from mpijob.jobspec.ssh_port import derived_ssh_port
from mpijob.jobspec.toleration import (
    Toleration,
    parse_toleration,
)
from mpijob.jobspec.volumes import DataVolume, HostDir, check_mounts, parse_data, parse_data_dir
from mpijob.wellknown import GPU_RESOURCE

DNS1035 = refs.DNS1035
DNS1123_LABEL = refs.DNS1123_LABEL
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# What every mode can carry: a POSIX shell name. Kubernetes would take `.` and `-` too
# (validation.IsEnvVarName), but Trainer mode's launch script and the local backend's
# ranks pass the environment through `export NAME=...`, which dash refuses for them.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")

BenchmarkModel = defaults.BenchmarkModel
BENCHMARK_MODELS = defaults.BENCHMARK_MODELS


EVERY_BACKEND = ("kubernetes", "local")
KUBERNETES_ONLY = ("kubernetes",)
LOCAL_ONLY = ("local",)


@dataclass(frozen=True)
class Flag:
    """The command-line option that sets a field (`Annotated[int, Flag("--workers", ...)]`), so
    an error about the field names what the user typed.

    The field also declares the option, once: `submit mpi` and `plan` are generated from
    these (launcher.cli.spec_options), with the field's type, default and Literal choices,
    and the CLI's presentation of it (launcher.cli.job_help: help, panel, value name);
    `fields_from_options` turns the values typed into the field's value. A Flag with
    `declares=False` names an option declared elsewhere (a request option such as
    --gang-scheduler, or a field the plan fills)."""

    option: str  # as messages name it: "--shm-size", "-e/--env"
    declares: bool = True
    aliases: tuple[str, ...] = ()  # more spellings that messages do not use ("-w")
    # One value as typed (text, and the option's name for messages) -> the field's value,
    # or one item of it: a (key, value) pair for a mapping field.
    parse: Callable[[str, str], Any] | None = None
    case_sensitive: bool = True
    # The backends the option means something to; the others ignore it, saying so, or
    # refuse it where a job without it would run wrong (a data mount gone missing).
    backends: tuple[str, ...] = EVERY_BACKEND
    elsewhere: Literal["ignore", "refuse"] = "ignore"

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.option.split("/"), *self.aliases)


class BenchmarkSpec(BaseModel):
    """Flags of the built-in benchmark, run when the user gives no command."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Annotated[str, Flag("--model")] = defaults.MODEL
    batch_size: Annotated[int, Flag("--batch-size")] = Field(defaults.BATCH_SIZE, ge=1, le=4096)
    num_batches: Annotated[int, Flag("--num-batches")] = Field(defaults.NUM_BATCHES, ge=1)
    num_warmup_batches: Annotated[int, Flag("--num-warmup-batches")] = Field(
        defaults.NUM_WARMUP_BATCHES, ge=0)
    image_size: Annotated[int | None, Flag("--image-size")] = Field(None, ge=32, le=1024)
    use_fp16: Annotated[bool, Flag("--use-fp16")] = False
    xla: Annotated[bool, Flag("--xla")] = False
    # Real input; left out of the dump at their defaults, so specs recorded before they
    # existed read the same
    data_name: Annotated[defaults.DataName, Flag("--data-name")] = defaults.DATA_NAME
    data_dir: Annotated[str | None, Flag("--benchmark-data-dir")] = None

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        data = handler(self)
        for key, default in (("data_name", defaults.DATA_NAME), ("data_dir", None)):
            if data.get(key, default) == default:
                data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _data(self) -> BenchmarkSpec:
        if self.data_name == "imagenet" and not self.data_dir:
            raise SpecError("benchmark.data_dir", "--data-name imagenet needs the TFRecords' "
                            "directory (--benchmark-data-dir DIR)")
        if self.data_dir and self.data_name == "synthetic":
            raise SpecError("benchmark.data_dir", "only applies with --data-name imagenet")
        return self

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        v = v.lower()
        if v not in BENCHMARK_MODELS:
            raise ValueError(f"unknown model {v!r}; expected one of {', '.join(BENCHMARK_MODELS)}")
        return v

    @property
    def precision(self) -> Precision:
        return "fp16" if self.use_fp16 else "fp32"


class RdmaRequest(BaseModel):
    """The RDMA device resource the worker pods request (decided by the plan)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: str
    per_gpu: bool = False  # an SR-IOV VF per GPU; else one shared HCA per pod
    link: Literal["infiniband", "roce"] | None = None
    hcas: tuple[str, ...] = ()
    # NICs of this DRA driver, one under each GPU's PCIe root, in the GPUs' claim
    # (mpijob.k8s.dra); `resource` is then its DeviceClass.
    nic_driver: str | None = None


# A NetworkAttachmentDefinition as Multus's networks annotation names it: [namespace/]name
# (DNS-1123 subdomains; github.com/k8snetworkplumbingwg/multi-net-spec).
NAD_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class Network(BaseModel):
    """`--network NAD`: a Multus secondary network of the worker pods, and the device
    resource its NetworkAttachmentDefinition's k8s.v1.cni.cncf.io/resourceName names (read
    from the cluster before submitting; None: not read yet, or the NAD names none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    resource: str | None = None

    @field_validator("name")
    @classmethod
    def _nad_name(cls, v: str) -> str:
        if len(v) > 253 or not NAD_NAME.match(v):
            raise ValueError(f"{v!r} is not a NetworkAttachmentDefinition name ([namespace/]name, "
                             "lowercase letters, digits, '-' and '.')")
        return v


class RunPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    clean_pod_policy: Annotated[CleanPodPolicy, Flag("--clean-pod-policy", backends=KUBERNETES_ONLY)] = defaults.CLEAN_POD_POLICY
    backoff_limit: Annotated[int | None, Flag("--backoff-limit", backends=KUBERNETES_ONLY)] = Field(None, ge=0)
    ttl_seconds_after_finished: Annotated[int | None, Flag("--ttl", backends=KUBERNETES_ONLY)] = Field(None, ge=0)
    active_deadline_seconds: Annotated[int | None, Flag("--active-deadline")] = Field(None, ge=1)


_OMIT_AT_DEFAULT: dict[str, object] = {
    # auto is decided by the plan; both it and the device plugin are what a spec recorded
    # before DRA meant.
    "cross_zone": False, "gpu_request": frozenset({"auto", defaults.GPU_REQUEST}),
    "run_as_user": None, "run_as_group": None,
    "start_timeout": defaults.START_TIMEOUT_SECONDS, "stall_timeout": None,
    "metrics_port": None,
    "min_workers": None, "max_workers": None,
    # data volumes and pod fields
    "data": (), "data_dirs": (), "working_dir": None, "service_account": None,
    "pod_patches": (),
    # RDMA and other device resources
    "rdma": defaults.RDMA, "preflight": None, "extra_resources": {}, "networks": ()}
# An extended resource name (domain/name) as --extra-resource takes it.
EXTENDED_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class PodPatch(BaseModel):
    """`--pod-patch [launcher|worker|all=]FILE`: a strategic-merge patch of pod templates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: Literal["launcher", "worker", "all"] = "all"
    patch: dict
    source: str  # the file, for messages


class JobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Flag("--name")]
    namespace: Annotated[str, Flag("-n/--namespace", declares=False)] = defaults.NAMESPACE
    image: Annotated[str, Flag("--image", backends=KUBERNETES_ONLY)] = defaults.IMAGE
    workers: Annotated[int, Flag("--workers", aliases=("-w",))] = Field(defaults.WORKERS, ge=1, le=4096)
    # Elastic Horovod (mpijob.jobspec.elastic): the job runs while at least min_workers live.
    min_workers: Annotated[int | None, Flag("--min-workers")] = Field(None, ge=1, le=4096)
    max_workers: Annotated[int | None, Flag("--max-workers")] = Field(None, ge=1, le=4096)
    gpus_per_worker: Annotated[int, Flag("--gpus", aliases=("-g",))] = Field(defaults.GPUS_PER_WORKER, ge=0, le=16)
    cpu: Annotated[str | None, Flag("--cpu")] = None
    memory: Annotated[str | None, Flag("--memory", backends=KUBERNETES_ONLY)] = None
    env: Annotated[dict[str, str], Flag("-e/--env", parse=parse_key_value)] = Field(default_factory=dict)
    # argv, or one shell string when `shell` is true (arena's `"python train.py --x"`).
    command: Annotated[tuple[str, ...], Flag("COMMAND", declares=False)] = ()
    shell: bool = False
    mpi_implementation: Annotated[MPIImplementation, Flag("--mpi", case_sensitive=False)] = defaults.MPI_IMPLEMENTATION
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    gang: Annotated[GangScheduler, Flag("--gang-scheduler", declares=False)] = defaults.GANG_SCHEDULER
    queue: Annotated[str | None, Flag("--queue", backends=KUBERNETES_ONLY)] = None
    # Defaults to the gang scheduler's own name (volcano, scheduler-plugins-scheduler).
    scheduler_name: Annotated[str | None, Flag("--scheduler-name", backends=KUBERNETES_ONLY)] = None
    priority_class: Annotated[str | None, Flag("--priority", backends=KUBERNETES_ONLY)] = None
    node_selector: Annotated[dict[str, str], Flag("--selector", parse=parse_key_value, backends=KUBERNETES_ONLY)] = Field(default_factory=dict)
    tolerations: Annotated[tuple[Toleration, ...], Flag("--toleration", parse=parse_toleration, backends=KUBERNETES_ONLY)] = ()
    labels: Annotated[dict[str, str], Flag("--label", parse=parse_key_value, backends=KUBERNETES_ONLY)] = Field(default_factory=dict)
    annotations: Annotated[dict[str, str], Flag("--annotation", parse=parse_key_value, backends=KUBERNETES_ONLY)] = Field(default_factory=dict)
    image_pull_secrets: Annotated[tuple[str, ...], Flag("--image-pull-secret", backends=KUBERNETES_ONLY)] = ()
    image_pull_policy: Annotated[PullPolicy, Flag("--image-pull-policy", backends=KUBERNETES_ONLY)] = defaults.PULL_POLICY
    shm_size: Annotated[str, Flag("--shm-size", backends=KUBERNETES_ONLY)] = defaults.SHM_SIZE
    host_network: Annotated[bool, Flag("--host-network", backends=KUBERNETES_ONLY)] = False
    network_interface: Annotated[str | None, Flag("--network-interface")] = None
    launcher_cpu: Annotated[str, Flag("--launcher-cpu", backends=KUBERNETES_ONLY)] = defaults.LAUNCHER_CPU
    launcher_memory: Annotated[str, Flag("--launcher-memory", backends=KUBERNETES_ONLY)] = defaults.LAUNCHER_MEMORY
    placement_policy: Annotated[PlacementPolicy, Flag("--placement")] = defaults.PLACEMENT_POLICY
    # Let placement put one job's nodes in several zones (mpijob.scheduling.placement_network).
    cross_zone: Annotated[bool, Flag("--cross-zone")] = False
    # How workers ask for GPUs: the device plugin's nvidia.com/gpu count, or DRA claims
    # naming the planned devices (mpijob.k8s.dra); auto is decided by the plan, which sees
    # whether the cluster publishes DRA GPUs (launcher.preparing.planning).
    gpu_request: Annotated[GpuRequestChoice, Flag("--gpu-request")] = defaults.GPU_REQUEST_CHOICE
    # Non-root, restricted-compliant pods (mpijob.k8s.security); the uid must be one the
    # image serves (sshd, a writable $HOME).
    run_as_user: Annotated[int | None, Flag("--run-as-user")] = Field(None, ge=1, le=2**31 - 1)
    run_as_group: Annotated[int | None, Flag("--run-as-group")] = Field(None, ge=0, le=2**31 - 1)
    # Seconds for every pod of the job to be running; 0: no limit (mpijob.k8s.start_timeout).
    start_timeout: Annotated[int, Flag("--start-timeout", backends=KUBERNETES_ONLY)] = Field(
        defaults.START_TIMEOUT_SECONDS, ge=0)
    # Seconds a running job may go without a step its ranks report before it is ended
    # (mpijob.progress's rules decide the stall: the local supervisor, the launcher pod's
    # monitor); None: never.
    stall_timeout: Annotated[int | None, Flag("--stall-timeout")] = Field(None, ge=1)
    # The launcher pod's monitor serves the progress in Prometheus' text format on this
    # port (mpijob.k8s.monitor); None: no endpoint.
    metrics_port: Annotated[int | None, Flag("--metrics-port", backends=KUBERNETES_ONLY)] = Field(
        None, ge=1, le=65535)
    # --rdma as given; the device the workers request is the plan's (mpijob.jobspec.decisions).
    rdma: Annotated[RdmaChoice, Flag("--rdma")] = defaults.RDMA
    # None: the backend's plan decides (defaults.PREFLIGHT_*: mpijob.jobspec.decisions).
    preflight: Annotated[PreflightMode | None, Flag("--preflight")] = None
    # Device resources hvdk8s does not know, per worker pod (--extra-resource NAME=N).
    extra_resources: Annotated[dict[str, int], Flag("--extra-resource", parse=parse_count)] = Field(
        default_factory=dict)
    # Multus secondary networks of the worker pods (mpijob.wellknown); each NAD's
    # resource is read by the Kubernetes backend's preflight.
    networks: Annotated[tuple[Network, ...], Flag("--network", backends=KUBERNETES_ONLY)] = ()
    # --- the job's data, and pod fields hvdk8s has no other flag for ------------------
    data: Annotated[tuple[DataVolume, ...], Flag("--data", parse=parse_data, backends=KUBERNETES_ONLY, elsewhere="refuse")] = ()
    data_dirs: Annotated[tuple[HostDir, ...], Flag("--data-dir", parse=parse_data_dir, backends=KUBERNETES_ONLY, elsewhere="refuse")] = ()
    working_dir: Annotated[str | None, Flag("--working-dir")] = None
    service_account: Annotated[str | None, Flag("--service-account", backends=KUBERNETES_ONLY, elsewhere="refuse")] = None
    pod_patches: Annotated[tuple[PodPatch, ...], Flag("--pod-patch", backends=KUBERNETES_ONLY, elsewhere="refuse")] = ()

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # Optional fields added later are left out at their default, so recorded specs
        # (annotations, golden files) stay as they were for jobs that do not use them.
        data = handler(self)
        for key, default in _OMIT_AT_DEFAULT.items():
            if key in data and (data[key] == default or (default == () and not data[key])
                                or (isinstance(default, frozenset) and data[key] in default)):
                del data[key]
        return data
    benchmark: BenchmarkSpec = Field(default_factory=BenchmarkSpec)
    ssh_port: int = Field(2222, ge=1, le=65535)

    # --- single fields -------------------------------------------------------------
    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if (why := refs.name_problem(v)) is not None:
            raise ValueError(why)
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        if (why := refs.namespace_problem(v)) is not None:
            raise ValueError(why)
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if (why := image_problem(v)) is not None:
            raise ValueError(f"{v!r} is not an image reference: {why} (e.g. "
                             "horovod/horovod:0.28.1)")
        return v

    @field_validator("cpu", "memory", "launcher_cpu", "launcher_memory", "shm_size")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            value = parse_quantity(v)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        if value <= 0:
            raise ValueError(f"must be positive, got {v!r}")
        return str(v).strip()

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name: use "
                                 "letters, digits and '_', not starting with a digit")
        return v

    @field_validator("networks", mode="before")
    @classmethod
    def _network_list(cls, v):
        """--network a,b (repeatable): each comma-separated name is one network."""
        if isinstance(v, str):
            v = [v]
        out = []
        for item in v or ():
            if isinstance(item, str):
                out += [{"name": n.strip()} for n in item.split(",")]
            else:
                out.append(item)
        return out

    @field_validator("extra_resources")
    @classmethod
    def _extra_resources(cls, v: dict[str, int]) -> dict[str, int]:
        for name, count in v.items():
            if not EXTENDED_RESOURCE.match(name) or name.startswith("kubernetes.io/"):
                raise ValueError(f"{name!r} is not an extended resource name (domain/name, "
                                 "e.g. example.com/fpga)")
            if name == GPU_RESOURCE:
                raise ValueError(f"{GPU_RESOURCE} is what --gpus sets")
            if count < 1:
                raise ValueError(f"{name}: expected a count of at least 1, got {count}")
        return v

    @field_validator("labels", "node_selector")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            _check_label_key(key)
            if len(value) > 63 or not LABEL_VALUE.match(value):
                raise ValueError(f"{value!r} is not a valid label value (at most 63 of [A-Za-z0-9-_.])")
        return v

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            _check_label_key(key)
        return v

    @field_validator("priority_class", "scheduler_name", "queue")
    @classmethod
    def _object_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not DNS1123_SUBDOMAIN.match(v)):
            raise ValueError(f"{v!r} is not a valid object name (lower-case letters, digits, "
                             "'-' and '.', e.g. high-priority)")
        return v

    @field_validator("working_dir")
    @classmethod
    def _working_dir(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"{v!r} is not an absolute path (e.g. /workspace)")
        return v

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not DNS1123_SUBDOMAIN.match(v)):
            raise ValueError(f"{v!r} is not a ServiceAccount name (e.g. trainer)")
        return v

    @field_validator("image_pull_secrets")
    @classmethod
    def _secrets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for s in v:
            if not DNS1123_LABEL.match(s.split(".")[0]):
                raise ValueError(f"{s!r} is not a valid secret name")
        return v

    # --- the whole spec ------------------------------------------------------------
    @model_validator(mode="before")
    @classmethod
    def _host_network_ssh_port(cls, data):
        # On the host network the sshd port is the node's: one per job (mpijob.jobspec.ssh_port).
        if isinstance(data, dict) and data.get("host_network") and data.get("ssh_port") is None:
            data = {**data, "ssh_port": derived_ssh_port(data.get("namespace") or "default",
                                                         str(data.get("name", "")))}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        most = self.max_size
        longest = names.longest_suffix(most)
        if len(self.name) + longest > 63:
            raise SpecError(
                "name",
                f"{self.name!r} is too long for {most} workers: at most "
                f"{63 - longest} characters, so that names like "
                f"'{self.name}{names.longest_suffix_example(most)}' stay within 63",
            )
        if self.elastic:
            check_bounds(min_size=self.min_size, max_size=self.max_size, workers=self.workers,
                         gang=self.gang, user_gives_mpirun=self.user_gives_mpirun)
        scheduler = gangs.get(self.gang)
        if scheduler is not None and scheduler.queue == "required" and not self.queue:
            raise SpecError("queue", f"{self.gang} gang scheduling needs a queue name (--queue)")
        if self.shell and len(self.command) != 1:
            raise SpecError("command", "a shell command is one string")
        if self.network_interface is not None and not self.host_network:
            raise SpecError("network_interface", "only applies with --host-network (pod networks "
                            "have one interface)")
        if self.run_as_group is not None and self.run_as_user is None:
            raise SpecError("run_as_group", "needs --run-as-user (the group of that user)")
        try:
            check_mounts([*(d.mount for d in self.data), *(d.mount for d in self.data_dirs)])
        except ValueError as exc:
            raise SpecError("data", str(exc)) from None
        if self.queue and (scheduler is None or not scheduler.queue):
            takes = [s for s in gangs.SCHEDULERS.values() if s.queue]
            raise SpecError("queue", "a queue needs a "
                            + " or ".join(s.short_title for s in takes) + " gang scheduler "
                            "(--gang with one installed, or --gang-scheduler "
                            + "|".join(s.name for s in takes) + ")")
        return self

    # --- derived -------------------------------------------------------------------
    @property
    def elastic(self) -> bool:
        """Horovod elastic: --min-workers or --max-workers given."""
        return self.min_workers is not None or self.max_workers is not None

    @property
    def min_size(self) -> int:
        return self.min_workers if self.min_workers is not None else self.workers

    @property
    def max_size(self) -> int:
        return self.max_workers if self.max_workers is not None else self.workers

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def ranks(self) -> int:
        """MPI processes: one per GPU, or one per worker on CPU."""
        return self.total_gpus if self.gpus_per_worker else self.workers

    @property
    def effective_scheduler_name(self) -> str | None:
        if self.scheduler_name:
            return self.scheduler_name
        scheduler = gangs.get(self.gang)
        return scheduler.scheduler_name if scheduler is not None else None

    @property
    def runs_benchmark(self) -> bool:
        return not self.command

    @property
    def user_gives_mpirun(self) -> bool:
        """The user wrote the whole launch line (arena style); pass it through untouched."""
        return is_launcher_line(self.command, self.shell)


def _check_label_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if not LABEL_KEY.match(key) or len(name) > 63 or len(prefix) > 253:
        raise ValueError(f"{key!r} is not a valid label/annotation key (e.g. team or example.com/team)")


def _field_of(error: Mapping[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ()) if not isinstance(p, int)]
    return ".".join(loc) if loc else "spec"


def _friendly(err: Mapping[str, Any]) -> str:
    """Pydantic's wording, turned into what to change."""
    ctx, got = err.get("ctx", {}), err.get("input")
    kind = err.get("type", "")
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}, got {got!r}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}, got {got!r}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {got!r}"
    if kind.startswith("int_"):
        return f"expected a whole number, got {got!r}"
    return err["msg"]


def option_of(field: str, model: type[BaseModel] | None = None) -> str | None:
    """The option that sets a field ("benchmark.batch_size" -> "--batch-size"), from the
    `Flag` the field carries; None for a field no option sets."""
    model = model or JobSpec
    head, _, rest = field.partition(".")
    info = model.model_fields.get(head)
    if info is None:
        return None
    if rest and isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return option_of(rest, info.annotation)
    return next((m.option for m in info.metadata if isinstance(m, Flag)), None)


def build_spec(**fields) -> JobSpec:
    """Validate and build a spec; the first problem becomes a SpecError naming its field
    and the option that sets it."""
    try:
        return JobSpec(**fields)
    except SpecError as err:  # from a validator of the whole spec
        err.set_by(option_of(err.field))
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        ctx_error = first.get("ctx", {}).get("error")
        if isinstance(ctx_error, SpecError):
            raise ctx_error.set_by(option_of(ctx_error.field)) from None
        message = str(ctx_error) if ctx_error is not None else _friendly(first)
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
        field = _field_of(first)
        raise SpecError(field, message, option=option_of(field)) from None


# --- the options the spec declares ------------------------------------------------------
@dataclass(frozen=True)
class DeclaredOption:
    """A spec field that declares its option: `path` is the field's
    place in the spec ("benchmark.batch_size"), `name` the option's parameter name
    ("batch_size", from its long spelling)."""

    path: str
    field: FieldInfo
    flag: Flag

    @property
    def name(self) -> str:
        return next(n for n in self.flag.names if n.startswith("--"))[2:].replace("-", "_")

    @property
    def annotation(self) -> Any:
        """The field's type without None: what the option's values become."""
        args = [a for a in get_args(self.field.annotation) if a is not type(None)]
        if get_origin(self.field.annotation) in (Union, UnionType) and len(args) == 1:
            return args[0]
        return self.field.annotation

    @property
    def default(self) -> Any:
        return self.field.get_default(call_default_factory=True)


def _declared(model: type[BaseModel], prefix: str = "") -> list[DeclaredOption]:
    out = []
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            out += _declared(info.annotation, f"{prefix}{name}.")
        flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
        if flag is not None and flag.declares:
            out.append(DeclaredOption(f"{prefix}{name}", info, flag))
    return out


DECLARED_OPTIONS: tuple[DeclaredOption, ...] = tuple(_declared(JobSpec))
DECLARED_BY_PATH = {o.path: o for o in DECLARED_OPTIONS}


def _field_value(declared: DeclaredOption, value: Any) -> Any:
    """An option's value as typed (text, repeated) or as the field takes it (the
    experiment runner's mappings) -> the field's value."""
    parse = declared.flag.parse
    if parse is None or isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        return parse(value, declared.flag.option)
    items = [parse(v, declared.flag.option) if isinstance(v, str) else v for v in value]
    return dict(items) if get_origin(declared.annotation) is dict else tuple(items)


def fields_from_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """build_spec's keyword arguments from option values keyed by field path (only those
    given: every default is the spec model's); a value that does not parse is a SpecError
    naming its option."""
    fields: dict[str, Any] = {}
    for path, value in values.items():
        declared = DECLARED_BY_PATH.get(path)
        if declared is not None:
            value = _field_value(declared, value)
        head, _, rest = path.partition(".")
        if rest:
            fields.setdefault(head, {})[rest] = value
        else:
            fields[path] = value
    return fields
