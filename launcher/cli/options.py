"""The options the commands share, each declared once as a typed `Annotated` parameter.

`submit mpi`, `plan`, `experiment run`, `simulate` and the job commands take their
parameters' types from here: `workers: options.Workers = defaults.WORKERS`. Defaults come
from `mpijob.jobspec.defaults` (the spec model's own), so none is written twice; a choice is
a `Literal` there, and `choice` makes typer refuse any other value (exit 2, one line naming
the option, before the command runs). The option each spec field is set by is written on
the field too (`mpijob.jobspec.spec.Flag`), so an error found later names it as well.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import typer

from launcher.errors import UsageError
from mpijob.jobspec import defaults

# -o/--output: what each kind of command can print.
Format = Literal["table", "yaml", "json"]
ObjectFormat = Literal["yaml", "json"]  # Kubernetes objects
ReportFormat = Literal["table", "json"]
# What -o prints by default: a table for people; Kubernetes objects as YAML.
TABLE: Literal["table"] = "table"
YAML: Literal["yaml"] = "yaml"


def one_of(choices: tuple[str, ...]) -> str:
    """Choices as errors list them: "a or b", "a, b, c"."""
    return " or ".join(choices) if len(choices) == 2 else ", ".join(choices)


def choice(kind, *decls: str, case_sensitive: bool = True, **kwargs):
    """An option taking one value of the Literal `kind`, spelt as the Literal spells it; any
    other value is a usage error listing the choices. Help shows them as `a|b`."""
    choices = get_args(kind)

    def parse(text: str) -> str:
        for c in choices:
            if text == c or (not case_sensitive and text.lower() == c.lower()):
                return c
        raise typer.BadParameter(f"expected {one_of(choices)}, got {text!r}")

    return typer.Option(*decls, parser=parse, **kwargs)


# --- where a command runs -----------------------------------------------------------------
Namespace = Annotated[str | None, typer.Option(
    "-n", "--namespace", help="Namespace (default: the context's, or 'default').")]
Context = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
Backend = Annotated[defaults.BackendName | None, choice(
    defaults.BackendName, "--backend", envvar="HVDK8S_BACKEND",
    help="Where jobs run (default: kubernetes when a kubeconfig context is usable, else "
    "local).")]
AllNamespaces = Annotated[bool, typer.Option("-A", "--all-namespaces",
                                             help="Jobs of every namespace.")]
WaitTimeout = Annotated[float | None, typer.Option(
    "--timeout", min=0, help="Seconds to wait for the end; exit 124 when exceeded.")]
Output = Annotated[Format, choice(Format, "-o", "--output", help="Output format.")]
ObjectsOutput = Annotated[ObjectFormat, choice(ObjectFormat, "-o", "--output",
                                               help="Output format of the objects.")]
ReportOutput = Annotated[ReportFormat, choice(ReportFormat, "-o", "--output",
                                              help="Output format.")]
Cluster = Annotated[str | None, typer.Option(
    "--cluster", help="Cluster file (YAML/JSON: nodes, GPUs, topology, what is taken) to read "
    "instead of the live cluster of the current kubeconfig context.")]
Calibration = Annotated[str | None, typer.Option(
    "--calibration", metavar="FILE",
    help="Calibration file from hvdk8s calibrate (default: $HVDK8S_HOME/calibration.json "
    "when it exists).")]

# --- the job ----------------------------------------------------------------------------
Name = Annotated[str | None, typer.Option(
    "--name", help="Job name, a DNS-1035 label (default: the model or program plus a random "
    "suffix, e.g. resnet50-x7k2p).")]
Command = Annotated[list[str] | None, typer.Argument(
    help="Program and arguments, one shell string (arena style), or a whole `mpirun ...` "
    "line.")]
Workers = Annotated[int, typer.Option(
    "--workers", "-w", help="Workers, each with --gpus GPUs. With a placement, the workers "
    "that land on one node share one pod (so they can use NVLink).")]
Gpus = Annotated[int, typer.Option("--gpus", "-g",
                                   help="GPUs per worker; 0 runs ranks on the CPU.")]
Image = Annotated[str | None, typer.Option("--image", help="Training image.")]
Mode = Annotated[defaults.Mode, choice(
    defaults.Mode, "--mode", help="pods: hvdk8s makes the pods (no operator); operator: a "
    "Kubeflow MPIJob for the MPI Operator.")]
Gang = Annotated[bool, typer.Option(
    "--gang", help="Gang-schedule with Volcano, scheduler-plugins or Kueue when installed "
    "(hvdk8s's own all-or-nothing check applies either way).")]
GangScheduler = Annotated[defaults.GangScheduler | None, choice(
    defaults.GangScheduler, "--gang-scheduler",
    help="The gang scheduler to use (default: detect the installed one).")]
Queue = Annotated[str | None, typer.Option("--queue",
                                           help="Volcano queue or Kueue LocalQueue.")]
Placement = Annotated[defaults.PlacementPolicy | None, choice(
    defaults.PlacementPolicy, "--placement", show_default=False,
    help=f"How workers are placed on nodes and GPUs (default: {defaults.PLACEMENT_POLICY}).")]
GpuTopology = Annotated[bool, typer.Option(
    "--gputopology", help=f"Same as --placement {defaults.PLACEMENT_POLICY} (arena's flag).")]
CrossZone = Annotated[bool, typer.Option(
    "--cross-zone", help="Allow the job's nodes in several zones (never by default).")]
GpuRequest = Annotated[defaults.GpuRequestChoice, choice(
    defaults.GpuRequestChoice, "--gpu-request",
    help="How workers ask for GPUs (auto: DRA claims naming the planned GPUs where the "
    "cluster publishes DRA GPU devices, else the device plugin).")]
Env = Annotated[list[str] | None, typer.Option("-e", "--env", help="K=V, repeatable.")]
Cpu = Annotated[str | None, typer.Option("--cpu", help="CPU per worker (e.g. 4, 500m).")]
Memory = Annotated[str | None, typer.Option("--memory",
                                            help="Memory per worker (e.g. 16Gi).")]
Selector = Annotated[list[str] | None, typer.Option(
    "--selector", help="Node label KEY=VALUE the workers' nodes must have; repeatable.")]
Toleration = Annotated[list[str] | None, typer.Option(
    "--toleration", help="Tolerate a taint: key=value:Effect, key:Effect, key or all; "
    "repeatable.")]
Annotation = Annotated[list[str] | None, typer.Option("--annotation",
                                                      help="k=v, repeatable.")]
Label = Annotated[list[str] | None, typer.Option("--label", help="k=v, repeatable.")]
Priority = Annotated[str | None, typer.Option("--priority", help="PriorityClass name.")]
Mpi = Annotated[defaults.MPIImplementation, choice(
    defaults.MPIImplementation, "--mpi", case_sensitive=False,
    help="MPI implementation of the image (any case).")]
CleanPodPolicy = Annotated[defaults.CleanPodPolicy, choice(
    defaults.CleanPodPolicy, "--clean-pod-policy",
    help="Which pods to delete when the job ends.")]
BackoffLimit = Annotated[int | None, typer.Option(
    "--backoff-limit", min=0, help="Launcher retries (default 0: a failed run ends the job).")]
Ttl = Annotated[int | None, typer.Option(
    "--ttl", min=0, help="Delete the finished job after this many seconds "
    "(ttlSecondsAfterFinished).")]
ActiveDeadline = Annotated[int | None, typer.Option(
    "--active-deadline", min=1, help="Fail the job after this many seconds "
    "(activeDeadlineSeconds).")]
ImagePullSecret = Annotated[list[str] | None, typer.Option(
    "--image-pull-secret", help="Secret for a private registry; repeatable.")]
ImagePullPolicy = Annotated[defaults.PullPolicy, choice(
    defaults.PullPolicy, "--image-pull-policy", help="When the kubelet pulls the image.")]
ShmSize = Annotated[str, typer.Option("--shm-size", help="/dev/shm size.")]
HostNetwork = Annotated[bool, typer.Option(
    "--host-network", help="Run pods on the node's network (the node's NICs for TCP; RDMA "
    "still needs --rdma: host networking does not give a container /dev/infiniband).")]
Rdma = Annotated[defaults.RdmaChoice, choice(
    defaults.RdmaChoice, "--rdma",
    help="Request the nodes' RDMA devices (InfiniBand/RoCE for NCCL) for the workers: on "
    "(or refuse, saying why), off, or auto: when the job spans several nodes and every "
    "planned node offers them.")]
ExtraResource = Annotated[list[str] | None, typer.Option(
    "--extra-resource", help="Another device resource per worker pod, NAME=N (e.g. "
    "example.com/fpga=1); repeatable.")]
NetworkInterface = Annotated[str | None, typer.Option(
    "--network-interface", help="NIC for MPI/NCCL with --host-network.")]
LauncherCpu = Annotated[str, typer.Option(
    "--launcher-cpu", help="CPU for the launcher pod (it only runs mpirun; it never gets a "
    "GPU).")]
LauncherMemory = Annotated[str, typer.Option("--launcher-memory",
                                             help="Memory for the launcher pod.")]
SchedulerName = Annotated[str | None, typer.Option(
    "--scheduler-name", help="Scheduler for the workers (default: the gang scheduler's, else "
    "the cluster default).")]

# --- the built-in benchmark (and the throughput prediction) -------------------------------
Model = Annotated[str, typer.Option(
    "--model", help="Benchmark model, and the model of the throughput prediction: "
    f"{', '.join(defaults.BENCHMARK_MODELS)}.")]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Batch size per GPU.")]
NumBatches = Annotated[int, typer.Option("--num-batches", help="Benchmark: timed steps.")]
NumWarmupBatches = Annotated[int, typer.Option("--num-warmup-batches",
                                               help="Benchmark: untimed steps first.")]
ImageSize = Annotated[int | None, typer.Option(
    "--image-size", help="Benchmark image size (small sizes for CPU runs).")]
UseFp16 = Annotated[bool, typer.Option("--use-fp16", help="Benchmark: mixed precision.")]
Xla = Annotated[bool, typer.Option("--xla", help="Benchmark: XLA compilation.")]
Precision = Annotated[defaults.Precision, choice(
    defaults.Precision, "--precision", help="Precision the throughput is predicted for.")]


# --- results ------------------------------------------------------------------------------
Plots = Annotated[bool, typer.Option(
    "--plots/--no-plots", help="Write PNG plots beside the results (with simulate: with --out).")]

# --- the topology agent (`agent`, `install agent`) ---------------------------------------
AgentInterval = Annotated[int, typer.Option(
    "--interval", min=1, help="Seconds between the agent's observations.")]


def placement_policy(placement: str | None, gputopology: bool) -> str | None:
    """--placement, or --gputopology (arena's spelling of the default); both must agree."""
    if gputopology and placement not in (None, defaults.PLACEMENT_POLICY):
        raise UsageError(f"--gputopology and --placement {placement} disagree: give one of them")
    return placement
