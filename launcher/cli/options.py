"""The options the commands share, each declared once as a typed `Annotated` parameter.

The commands take their parameters' types from here: `namespace: options.Namespace = None`.
Defaults come from `mpijob.jobspec.defaults`, so none is written twice; a choice is a
`Literal` there, and `choice` makes typer refuse any other value (exit 2, one line naming
the option, before the command runs). The job's own options (--workers, --shm-size, ...)
are declared on the spec fields they set (`mpijob.jobspec.spec.Flag`) and generated from
there (launcher.cli.spec_options).
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
PANEL_DATA = "Data"
PANEL_BENCHMARK = "Built-in benchmark"
PANEL_OUTPUT = "Output"


# --- where a command runs -----------------------------------------------------------------
def _kubeconfig_given(value: str | None) -> str | None:
    # lazy: the Kubernetes client module loads only when the flag is given
    if value:
        from launcher.backends.kubernetes.kubeconfig_flag import set_kubeconfig_flag

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
    "docs/cluster-file.md. Shipped examples: example:two-dgx1, "
    "example:nvl72-two-partitions.", rich_help_panel=PANEL_CLUSTER)]
Calibration = Annotated[str | None, typer.Option(
    "--calibration", metavar="FILE",
    help="Calibration file from hvdk8s calibrate (default: $HVDK8S_HOME/calibration.json "
    "when it exists).", rich_help_panel=PANEL_CLUSTER)]

# --- the job: the options the spec declares are generated (launcher.cli.spec_options);
# these are the request's own ----------------------------------------------------------
Command = Annotated[list[str] | None, typer.Argument(
    help="Program and arguments, one shell string (arena style), or a whole `mpirun ...` "
    "line.")]
Mode = Annotated[defaults.Mode, choice(
    defaults.Mode, "--mode", help="auto: what the cluster has (the MPI Operator, else Kubeflow "
    "Trainer, else pods); pods: hvdk8s makes the pods (no operator); operator: a Kubeflow "
    "MPIJob for the MPI Operator; trainjob: a Kubeflow Trainer TrainJob.",
    rich_help_panel=PANEL_JOB)]
# Written out, not joined from mpijob.gang (its modules would load at every start): a test
# checks it names every scheduler (tests/launcher/cli/test_cli_says_what_happens.py).
GANG_HELP = ("Gang-schedule with what the cluster has: Volcano, scheduler-plugins, Kueue or "
             "KAI, else the Workload API (scheduling.k8s.io/v1alpha1); hvdk8s's own "
             "all-or-nothing check applies either way.")
Gang = Annotated[bool, typer.Option(
    "--gang", help=GANG_HELP, rich_help_panel=PANEL_PLACEMENT)]
GangScheduler = Annotated[defaults.GangScheduler | None, choice(
    defaults.GangScheduler, "--gang-scheduler",
    help="The gang scheduler to use (default: detect the installed one).", rich_help_panel=PANEL_PLACEMENT)]
GpuTopology = Annotated[bool, typer.Option(
    "--gputopology", help=f"Same as --placement {defaults.PLACEMENT_POLICY} (arena's flag).", rich_help_panel=PANEL_PLACEMENT)]
Precision = Annotated[defaults.Precision, choice(
    defaults.Precision, "--precision", help="Precision the throughput is predicted for.", rich_help_panel=PANEL_BENCHMARK)]

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
