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
WideFormat = Literal["table", "wide", "yaml", "json"]  # kubectl's -o wide: more columns
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


# Help groups options under these panels (rich_help_panel=); an option added later names
# the panel it belongs to, so `--help` stays readable at 80 columns.
PANEL_CLUSTER = "Where it runs"
PANEL_JOB = "Job"
PANEL_PLACEMENT = "Placement and scheduling"
PANEL_PODS = "Pods"
PANEL_NETWORK = "Network"
PANEL_BENCHMARK = "Built-in benchmark"
PANEL_OUTPUT = "Output"


# --- where a command runs -----------------------------------------------------------------
def _kubeconfig_given(value: str | None) -> str | None:
    # lazy: the Kubernetes client module loads only when the flag is given
    if value:
        from launcher.backends.kubernetes.client import set_kubeconfig_flag

        set_kubeconfig_flag(value)
    return value


Kubeconfig = Annotated[str | None, typer.Option(
    "--kubeconfig", callback=_kubeconfig_given,
    help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config). A file given that "
    "cannot be used is an error, never a run on this machine.", rich_help_panel=PANEL_CLUSTER)]
def _complete_namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    from launcher.cli.completion import namespaces  # lazy: only when the shell asks

    return namespaces(ctx, incomplete)


def _complete_contexts(incomplete: str) -> list[str]:
    from launcher.cli.completion import contexts

    return contexts(incomplete)


def complete_job_names(ctx: typer.Context, incomplete: str) -> list[str]:
    from launcher.cli.completion import job_names

    return job_names(ctx, incomplete)


Namespace = Annotated[str | None, typer.Option(
    "-n", "--namespace", help="Namespace (default: the context's, or 'default').",
    autocompletion=_complete_namespaces, rich_help_panel=PANEL_CLUSTER)]
Context = Annotated[str | None, typer.Option("--context", help="kubeconfig context.",
                                             autocompletion=_complete_contexts, rich_help_panel=PANEL_CLUSTER)]
Backend = Annotated[defaults.BackendName | None, choice(
    defaults.BackendName, "--backend", envvar="HVDK8S_BACKEND",
    help="Where jobs run (default: kubernetes when a kubeconfig is configured; local only when "
    "none is: no --kubeconfig, $KUBECONFIG, ~/.kube/config or pod service account).",
    rich_help_panel=PANEL_CLUSTER)]
AllNamespaces = Annotated[bool, typer.Option("-A", "--all-namespaces",
                                             help="Jobs of every namespace.", rich_help_panel=PANEL_CLUSTER)]
WaitTimeout = Annotated[float | None, typer.Option(
    "--timeout", min=0, help="Seconds to wait for the end; exit 124 when exceeded.", rich_help_panel=PANEL_OUTPUT)]
Output = Annotated[Format, choice(Format, "-o", "--output", help="Output format.", rich_help_panel=PANEL_OUTPUT)]
WideOutput = Annotated[WideFormat, choice(WideFormat, "-o", "--output", help="Output format "
                                          "(wide: more columns).",
                                          rich_help_panel=PANEL_OUTPUT)]
ObjectsOutput = Annotated[ObjectFormat, choice(ObjectFormat, "-o", "--output",
                                               help="Output format of the objects.", rich_help_panel=PANEL_OUTPUT)]
ReportOutput = Annotated[ReportFormat, choice(ReportFormat, "-o", "--output",
                                              help="Output format.", rich_help_panel=PANEL_OUTPUT)]
Cluster = Annotated[str | None, typer.Option(
    "--cluster", help="Cluster file (YAML/JSON: nodes, GPUs, topology, what is taken) to read "
    "instead of the live cluster of the current kubeconfig context; format: "
    "docs/cluster-file.md.", rich_help_panel=PANEL_CLUSTER)]
Calibration = Annotated[str | None, typer.Option(
    "--calibration", metavar="FILE",
    help="Calibration file from hvdk8s calibrate (default: $HVDK8S_HOME/calibration.json "
    "when it exists).", rich_help_panel=PANEL_CLUSTER)]

# --- the job ----------------------------------------------------------------------------
Name = Annotated[str | None, typer.Option(
    "--name", help="Job name, a DNS-1035 label (default: the model or program plus a random "
    "suffix, e.g. resnet50-x7k2p).", rich_help_panel=PANEL_JOB)]
Command = Annotated[list[str] | None, typer.Argument(
    help="Program and arguments, one shell string (arena style), or a whole `mpirun ...` "
    "line.")]
Workers = Annotated[int, typer.Option(
    "--workers", "-w", help="Workers, each with --gpus GPUs. With a placement, the workers "
    "that land on one node share one pod (so they can use NVLink).", rich_help_panel=PANEL_JOB)]
Gpus = Annotated[int, typer.Option("--gpus", "-g",
                                   help="GPUs per worker; 0 runs ranks on the CPU.", rich_help_panel=PANEL_JOB)]
Image = Annotated[str | None, typer.Option("--image", help="Training image.", rich_help_panel=PANEL_JOB)]
Mode = Annotated[defaults.Mode, choice(
    defaults.Mode, "--mode", help="pods: hvdk8s makes the pods (no operator); operator: a "
    "Kubeflow MPIJob for the MPI Operator.", rich_help_panel=PANEL_JOB)]
Gang = Annotated[bool, typer.Option(
    "--gang", help="Gang-schedule with Volcano, scheduler-plugins or Kueue when installed "
    "(hvdk8s's own all-or-nothing check applies either way).", rich_help_panel=PANEL_PLACEMENT)]
GangScheduler = Annotated[defaults.GangScheduler | None, choice(
    defaults.GangScheduler, "--gang-scheduler",
    help="The gang scheduler to use (default: detect the installed one).", rich_help_panel=PANEL_PLACEMENT)]
Queue = Annotated[str | None, typer.Option("--queue",
                                           help="Volcano queue or Kueue LocalQueue.", rich_help_panel=PANEL_PLACEMENT)]
Placement = Annotated[defaults.PlacementPolicy | None, choice(
    defaults.PlacementPolicy, "--placement", show_default=False,
    help=f"How workers are placed on nodes and GPUs (default: {defaults.PLACEMENT_POLICY}).", rich_help_panel=PANEL_PLACEMENT)]
GpuTopology = Annotated[bool, typer.Option(
    "--gputopology", help=f"Same as --placement {defaults.PLACEMENT_POLICY} (arena's flag).", rich_help_panel=PANEL_PLACEMENT)]
CrossZone = Annotated[bool, typer.Option(
    "--cross-zone", help="Allow the job's nodes in several zones (never by default).", rich_help_panel=PANEL_PLACEMENT)]
GpuRequest = Annotated[defaults.GpuRequestChoice, choice(
    defaults.GpuRequestChoice, "--gpu-request",
    help="How workers ask for GPUs (auto: DRA claims naming the planned GPUs where the "
    "cluster publishes DRA GPU devices, else the device plugin).", rich_help_panel=PANEL_PLACEMENT)]
Env = Annotated[list[str] | None, typer.Option("-e", "--env", help="K=V, repeatable.", rich_help_panel=PANEL_JOB)]
Cpu = Annotated[str | None, typer.Option("--cpu", help="CPU per worker (e.g. 4, 500m).", rich_help_panel=PANEL_PODS)]
Memory = Annotated[str | None, typer.Option("--memory",
                                            help="Memory per worker (e.g. 16Gi).", rich_help_panel=PANEL_PODS)]
Selector = Annotated[list[str] | None, typer.Option(
    "--selector", help="Node label KEY=VALUE the workers' nodes must have; repeatable.", rich_help_panel=PANEL_PLACEMENT)]
Toleration = Annotated[list[str] | None, typer.Option(
    "--toleration", help="Tolerate a taint: key=value:Effect, key:Effect, key or all; "
    "repeatable.", rich_help_panel=PANEL_PLACEMENT)]
Annotation = Annotated[list[str] | None, typer.Option("--annotation",
                                                      help="k=v, repeatable.", rich_help_panel=PANEL_PODS)]
Label = Annotated[list[str] | None, typer.Option("--label", help="k=v, repeatable.", rich_help_panel=PANEL_PODS)]
Priority = Annotated[str | None, typer.Option("--priority", help="PriorityClass name.", rich_help_panel=PANEL_PLACEMENT)]
Mpi = Annotated[defaults.MPIImplementation, choice(
    defaults.MPIImplementation, "--mpi", case_sensitive=False,
    help="MPI implementation of the image (any case).", rich_help_panel=PANEL_JOB)]
CleanPodPolicy = Annotated[defaults.CleanPodPolicy, choice(
    defaults.CleanPodPolicy, "--clean-pod-policy",
    help="Which pods to delete when the job ends.", rich_help_panel=PANEL_JOB)]
BackoffLimit = Annotated[int | None, typer.Option(
    "--backoff-limit", min=0, help="Launcher retries (default 0: a failed run ends the job).", rich_help_panel=PANEL_JOB)]
Ttl = Annotated[int | None, typer.Option(
    "--ttl", min=0, help="Delete the finished job after this many seconds "
    "(ttlSecondsAfterFinished).", rich_help_panel=PANEL_JOB)]
ActiveDeadline = Annotated[int | None, typer.Option(
    "--active-deadline", min=1, help="Fail the job after this many seconds "
    "(activeDeadlineSeconds).", rich_help_panel=PANEL_JOB)]
ImagePullSecret = Annotated[list[str] | None, typer.Option(
    "--image-pull-secret", help="Secret for a private registry; repeatable.", rich_help_panel=PANEL_PODS)]
ImagePullPolicy = Annotated[defaults.PullPolicy, choice(
    defaults.PullPolicy, "--image-pull-policy", help="When the kubelet pulls the image.", rich_help_panel=PANEL_PODS)]
ShmSize = Annotated[str, typer.Option("--shm-size", help="/dev/shm size.", rich_help_panel=PANEL_PODS)]
HostNetwork = Annotated[bool, typer.Option(
    "--host-network", help="Run pods on the node's network (the node's NICs for TCP; RDMA "
    "still needs --rdma: host networking does not give a container /dev/infiniband).",
    rich_help_panel=PANEL_NETWORK)]
Rdma = Annotated[defaults.RdmaChoice, choice(
    defaults.RdmaChoice, "--rdma",
    help="Request the nodes' RDMA devices (InfiniBand/RoCE for NCCL) for the workers: on "
    "(or refuse, saying why), off, or auto: when the job spans several nodes and every "
    "planned node offers them.", rich_help_panel=PANEL_NETWORK)]
Network = Annotated[list[str] | None, typer.Option(
    "--network", help="Multus secondary networks for the workers, NAD[,NAD] (a "
    "NetworkAttachmentDefinition, [namespace/]name); each must exist, and the workers "
    "request the resource its k8s.v1.cni.cncf.io/resourceName names (read at submit and "
    "--dry-run=server). Repeatable.", rich_help_panel=PANEL_NETWORK)]
ExtraResource = Annotated[list[str] | None, typer.Option(
    "--extra-resource", help="Another device resource per worker pod, NAME=N (e.g. "
    "example.com/fpga=1); repeatable.", rich_help_panel=PANEL_PODS)]
NetworkInterface = Annotated[str | None, typer.Option(
    "--network-interface", help="NIC for MPI/NCCL with --host-network.", rich_help_panel=PANEL_NETWORK)]
LauncherCpu = Annotated[str, typer.Option(
    "--launcher-cpu", help="CPU for the launcher pod (it only runs mpirun; it never gets a "
    "GPU).", rich_help_panel=PANEL_PODS)]
LauncherMemory = Annotated[str, typer.Option("--launcher-memory",
                                             help="Memory for the launcher pod.", rich_help_panel=PANEL_PODS)]
RunAsUser = Annotated[int | None, typer.Option(
    "--run-as-user", metavar="UID", help="Run every pod as this non-root uid, restricted "
    "Pod Security compliant (runAsNonRoot, no privilege escalation, no capabilities, "
    "seccomp RuntimeDefault); the image must serve it (sshd, a writable home).", rich_help_panel=PANEL_PODS)]
RunAsGroup = Annotated[int | None, typer.Option(
    "--run-as-group", metavar="GID", help="Primary group for --run-as-user.", rich_help_panel=PANEL_PODS)]
StartTimeout = Annotated[int, typer.Option(
    "--start-timeout", metavar="SECONDS", min=0, help="Fail the job, naming the pod and why "
    "(image pull, config error, crash loop), when its pods are not all running this long "
    "after creation; 0: never.", rich_help_panel=PANEL_PODS)]
SchedulerName = Annotated[str | None, typer.Option(
    "--scheduler-name", help="Scheduler for the workers (default: the gang scheduler's, else "
    "the cluster default).", rich_help_panel=PANEL_PLACEMENT)]

# --- the built-in benchmark (and the throughput prediction) -------------------------------
Model = Annotated[str, typer.Option(
    "--model", help="Benchmark model, and the model of the throughput prediction: "
    f"{', '.join(defaults.BENCHMARK_MODELS)}.", rich_help_panel=PANEL_BENCHMARK)]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Batch size per GPU.", rich_help_panel=PANEL_BENCHMARK)]
NumBatches = Annotated[int, typer.Option("--num-batches", help="Benchmark: timed steps.", rich_help_panel=PANEL_BENCHMARK)]
NumWarmupBatches = Annotated[int, typer.Option("--num-warmup-batches",
                                               help="Benchmark: untimed steps first.", rich_help_panel=PANEL_BENCHMARK)]
ImageSize = Annotated[int | None, typer.Option(
    "--image-size", help="Benchmark image size (small sizes for CPU runs).", rich_help_panel=PANEL_BENCHMARK)]
UseFp16 = Annotated[bool, typer.Option("--use-fp16", help="Benchmark: mixed precision.", rich_help_panel=PANEL_BENCHMARK)]
Xla = Annotated[bool, typer.Option("--xla", help="Benchmark: XLA compilation.", rich_help_panel=PANEL_BENCHMARK)]
Precision = Annotated[defaults.Precision, choice(
    defaults.Precision, "--precision", help="Precision the throughput is predicted for.", rich_help_panel=PANEL_BENCHMARK)]


# --- the job's data and pod fields (issue 24) ---------------------------------------------
Data = Annotated[list[str] | None, typer.Option(
    "--data", metavar="PVC:MOUNT[:ro]", help="Mount a PersistentVolumeClaim in every worker "
    "(and the launcher when your mpirun line runs there); its access modes must allow the "
    "job's placement. Repeatable.")]
DataDir = Annotated[list[str] | None, typer.Option(
    "--data-dir", metavar="HOSTPATH:MOUNT[:ro]", help="Mount a directory of the node "
    "(hostPath) in every worker; the scheduler does not know which nodes have it. "
    "Repeatable.")]
WorkingDir = Annotated[str | None, typer.Option(
    "--working-dir", metavar="DIR", help="Working directory of the launcher and the ranks.")]
ServiceAccount = Annotated[str | None, typer.Option(
    "--service-account", metavar="NAME", help="ServiceAccount the job's pods run as.")]
PodPatch = Annotated[list[str] | None, typer.Option(
    "--pod-patch", metavar="[ROLE=]FILE", help="Strategic-merge patch (YAML) of the pod "
    "templates of ROLE (launcher, worker or all, the default), for fields without a flag; "
    "repeatable, applied in order.")]
DataName = Annotated[defaults.DataName, choice(
    defaults.DataName, "--data-name", help="Benchmark input: synthetic images, or ImageNet "
    "TFRecords from --benchmark-data-dir.")]
BenchmarkDataDir = Annotated[str | None, typer.Option(
    "--benchmark-data-dir", metavar="DIR", help="Benchmark: the directory of ImageNet "
    "TFRecords (train-*-of-*) as the ranks see it (with --data-name imagenet).")]
ConfigFile = Annotated[str | None, typer.Option(
    "--config", metavar="FILE", help="Defaults file (default: $HVDK8S_CONFIG, else "
    "$HVDK8S_HOME/config.yaml); a flag beats the environment (HVDK8S_<OPTION>), which "
    "beats the file.")]

# --- results ------------------------------------------------------------------------------
Plots = Annotated[bool, typer.Option(
    "--plots/--no-plots", help="Write PNG plots beside the results (with simulate: with --out).", rich_help_panel=PANEL_OUTPUT)]

# --- the topology agent (`agent`, `install agent`) ---------------------------------------
AgentInterval = Annotated[int, typer.Option(
    "--interval", min=1, help="Seconds between the agent's observations.")]


def placement_policy(placement: str | None, gputopology: bool) -> str | None:
    """--placement, or --gputopology (arena's spelling of the default); both must agree."""
    if gputopology and placement not in (None, defaults.PLACEMENT_POLICY):
        raise UsageError(f"--gputopology and --placement {placement} disagree: give one of them")
    return placement
