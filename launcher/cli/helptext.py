"""How `--help` reads: value names instead of Python types, and examples at the end.

typer prints a type column (`<bool>` for every flag, `<str>`, `<int>`, `<list[str]>`) unless a
parameter has a metavar. kubectl and arena name a value for what it is (`NAME`, `N`, `FILE`)
and show nothing for a flag, so every parameter of the command tree gets one here, in one
pass over the click commands typer builds, and every command's help ends with examples.
"""

from __future__ import annotations

import shlex
import textwrap

import typer
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup

# Long option -> the value it takes, for the options of the commands themselves (the job
# options name theirs in launcher.cli.job_help). A choice shows its values (`pods|operator`,
# from its Literal); other options not listed get a name from their type (FALLBACK).
METAVARS = {
    "--namespace": "NAMESPACE", "--context": "CONTEXT", "--kubeconfig": "FILE",
    "--cluster": "FILE", "--timeout": "SECONDS", "--image": "IMAGE",  # install agent
    "--schedule-timeout": "SECONDS", "--rank": "N", "--worker": "N", "--tail": "LINES",
    "--node-name": "NODE", "--interval": "SECONDS",
    "--kubelet-socket": "SOCKET", "--nodes": "N", "--jobs": "N", "--trace": "FILE",
    "--seed": "N", "--load": "FRACTION", "--policies": "POLICIES", "--policy": "POLICY",
    "--out": "DIR", "--backfill-depth": "N", "--limit": "N", "--priority-class": "NAME",
    "--runtime-class": "NAME", "--supplemental-group": "GID",
}
# A choice whose values would not fit the value column at 80 columns (it would split one
# mid-word): a name here, and the values in the help text.
LONG_CHOICE = 18
CHOICE_METAVARS = {"--gang-scheduler": "SCHEDULER", "--image-pull-policy": "POLICY",
                   "--placement": "POLICY", "--gpu-request": "HOW"}
# Examples are printed at most this wide (80 columns less the indent and a margin), so each
# is whole on its lines at 80 columns: longer commands continue with a backslash.
EXAMPLE_WIDTH = 74
# Where one command's option takes another kind of value than the same option elsewhere.
COMMAND_METAVARS = {("calibrate", "--output"): "FILE"}
ARGUMENT_METAVARS = {"names": "NAME", "results_dir": "DIR"}
# By the type typer would have printed: still a word, never a Python type name.
FALLBACK = {"int": "N", "float": "NUMBER", "path": "PATH"}

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "": [
        ("Run 4 workers with 1 GPU each (the name is generated and printed)",
         "hvdk8s submit mpi --workers 4 --gpus 1"),
        ("Follow it, then remove it", "hvdk8s logs -f NAME; hvdk8s delete NAME"),
        ("Where a job would go on a cluster file, and how fast",
         "hvdk8s plan --workers 4 --gpus 1 --cluster example:two-dgx1"),
    ],
    "submit": [
        ("Run 4 workers with 1 GPU each (the name is generated and printed)",
         "hvdk8s submit mpi --workers 4 --gpus 1"),
        ("The same job on this machine's CPU", "hvdk8s submit mpi --backend local --workers 2 --gpus 0 --wait"),
    ],
    "submit mpi": [
        ("VGG16 on 4 workers with 1 GPU each, packed onto NVLink-connected GPUs and "
         "gang-scheduled (the name is generated and printed)",
         "hvdk8s submit mpi --workers 4 --gpus 1 --gang --gputopology --model vgg16"),
        ("Print the objects for your own program instead of creating them",
         'hvdk8s submit mpi --name train --workers 2 --gpus 1 --image registry.example/train:1 --dry-run "python train.py --lr 0.1"'),
        ("Two ranks on this machine's CPU, the quick benchmark (64 px, batch 8); wait for the "
         "images/sec",
         "hvdk8s submit mpi --backend local --workers 2 --gpus 0 --wait"),
    ],
    "get": [
        ("A job's pods, placement, GPUs and images/sec", "hvdk8s get vgg16"),
        ("As YAML, in another namespace", "hvdk8s get vgg16 -n team-a -o yaml"),
        ("A job that runs on this machine", "hvdk8s get try --backend local"),
    ],
    "list": [
        ("The jobs of the current namespace", "hvdk8s list"),
        ("Of every namespace", "hvdk8s list -A"),
        ("The jobs on this machine, as JSON", "hvdk8s list --backend local -o json"),
    ],
    "logs": [
        ("Follow the launcher's log (every rank's output) until the job ends", "hvdk8s logs -f vgg16"),
        ("The last 50 lines of worker pod 1", "hvdk8s logs vgg16 --worker 1 --tail 50"),
        ("Rank 1 of a job on this machine", "hvdk8s logs try --backend local --rank 1"),
    ],
    "wait": [
        ("Wait for the end; the exit code says how it ended", "hvdk8s wait vgg16"),
        ("Give up after an hour (exit 124), print the status as JSON",
         "hvdk8s wait vgg16 --timeout 3600 -o json"),
    ],
    "tidy": [
        ("Take what a job's state calls for, as `get` names it (fail it past its start "
         "timeout, remove the pods it left)", "hvdk8s tidy vgg16"),
        ("Every job of every namespace, as the start guard does each interval",
         "hvdk8s tidy -A"),
    ],
    "delete": [
        ("Delete a job with its pods, services and secrets", "hvdk8s delete vgg16"),
        ("Several jobs of another namespace", "hvdk8s delete vgg16 resnet50-x7k2p -n team-a"),
    ],
    "scale": [
        ("Grow a running elastic job (submitted with --max-workers 3) to 3 workers",
         "hvdk8s scale vgg16 --workers 3"),
        ("Shrink it back to its minimum, in another namespace",
         "hvdk8s scale vgg16 --workers 2 -n team-a"),
    ],
    "plan": [
        ("Where 4 one-GPU workers would go on a cluster file, and the predicted images/sec",
         "hvdk8s plan --workers 4 --gpus 1 --cluster example:two-dgx1"),
        ("Compare the placement policies for VGG16",
         "hvdk8s plan -w 4 -g 1 --model vgg16 --batch-size 64 --compare --cluster example:two-dgx1"),
        ("Against the live cluster of the current context", "hvdk8s plan --workers 8 --gpus 1"),
    ],
    "agent": [
        ("Print what this node's annotation would be, once", "hvdk8s agent --node-name gpu-node-1 --once --dry-run"),
        ("What the DaemonSet runs", "hvdk8s agent --node-name $NODE_NAME --interval 60"),
    ],
    "calibrate": [
        ("Fit the performance model to the runs of an experiment",
         "hvdk8s calibrate results/local-cpu"),
        ("To several experiments' runs (here the ones measured for this project), into a "
         "file of your own",
         "hvdk8s calibrate benchmarks/calibration/measured/1rank "
         "benchmarks/calibration/measured/2rank -o calibration.json"),
    ],
    "completion": [
        ("Complete hvdk8s commands, job names, contexts and namespaces in bash",
         "source <(hvdk8s completion bash)"),
        ("In zsh, from a file on $fpath", 'hvdk8s completion zsh > "${fpath[1]}/_hvdk8s"'),
    ],
    "doctor": [
        ("Can jobs be submitted to the cluster of the current context?", "hvdk8s doctor"),
        ("To another context and namespace, as JSON", "hvdk8s doctor --context prod -n team-a -o json"),
    ],
    "simulate": [
        ("2,000 generated jobs on a generated cluster, results and plots in a folder",
         "hvdk8s simulate --jobs 2000 --out results/sim"),
        ("Two policies on a cluster file", "hvdk8s simulate --cluster example:two-dgx1 --policies topology,spread"),
    ],
    "topology": [
        ("Parse this machine's GPU topology", "nvidia-smi topo -m | hvdk8s topology parse -"),
        ("The known machine shapes", "hvdk8s topology presets"),
    ],
    "topology parse": [
        ("This machine's GPU topology", "nvidia-smi topo -m | hvdk8s topology parse -"),
        ("A saved one, as JSON", "hvdk8s topology parse tests/data/topo/dgx1-v100-mlx5.txt -o json"),
    ],
    "topology presets": [
        ("The known machine shapes", "hvdk8s topology presets"),
        ("As JSON", "hvdk8s topology presets -o json"),
    ],
    "topology show": [
        ("The GPU links of a DGX-1", "hvdk8s topology show dgx1-v100"),
        ("A generated shape, as JSON", "hvdk8s topology show pcie-4 -o json"),
    ],
    "top": [
        ("GPUs in use per node", "hvdk8s top node"),
        ("GPUs per job", "hvdk8s top job -A"),
    ],
    "top node": [
        ("GPUs in use per node", "hvdk8s top node"),
        ("With each node's GPUs and the jobs on them", "hvdk8s top node -d"),
        ("Of a cluster file", "hvdk8s top node --cluster example:two-dgx1"),
    ],
    "top job": [
        ("GPUs per job in the current namespace", "hvdk8s top job"),
        ("In every namespace, as JSON", "hvdk8s top job -A -o json"),
    ],
    "experiment": [
        ("Run a matrix, then report it", "hvdk8s experiment run benchmarks/experiments/local-cpu.yaml"),
        ("", "hvdk8s experiment report results/local-cpu"),
    ],
    "experiment run": [
        ("Run a matrix of benchmark runs on this machine",
         "hvdk8s experiment run benchmarks/experiments/local-cpu.yaml"),
        ("List the runs and which are done", "hvdk8s experiment run benchmarks/experiments/scaling.yaml --dry-run"),
        ("Only 2 more runs, into another folder",
         "hvdk8s experiment run benchmarks/experiments/scaling.yaml --out results/scaling --limit 2"),
    ],
    "config": [
        ("Every submit default that applies, and where it comes from", "hvdk8s config view"),
        ("Set the image for every submit", "hvdk8s config set image registry.example.com/train:1"),
    ],
    "config view": [
        ("The defaults that apply, and their source (flag > env > config > built-in)",
         "hvdk8s config view"),
        ("Every option, for the prod context, as JSON", "hvdk8s config view --all --context prod -o json"),
    ],
    "config set": [
        ("Set the image for every submit", "hvdk8s config set image registry.example.com/train:1"),
        ("A queue and pull secrets for one kubeconfig context only",
         "hvdk8s config set queue research --context prod"),
        ("", "hvdk8s config set image-pull-secret regcred mirror --context prod"),
    ],
    "config add": [
        ("Add an environment variable to every submit (a comma is part of the value)",
         "hvdk8s config add env NCCL_SOCKET_IFNAME=^lo,docker0"),
        ("A pull secret for one context", "hvdk8s config add image-pull-secret regcred --context prod"),
    ],
    "config remove": [
        ("Drop one environment variable of the defaults", "hvdk8s config remove env NCCL_DEBUG=INFO"),
        ("", "hvdk8s config remove image-pull-secret regcred --context prod"),
    ],
    "dev": [
        ("The shapes of test cluster it serves", "hvdk8s dev cluster --list-shapes"),
        ("One of them, with Volcano, until Ctrl-C", "hvdk8s dev cluster --shape volcano"),
    ],
    "dev cluster": [
        ("The shapes it serves", "hvdk8s dev cluster --list-shapes"),
        ("With the MPI Operator, on a fixed port, until Ctrl-C; then, in another shell, the "
         "`export KUBECONFIG=...` line it prints",
         "hvdk8s dev cluster --shape operator --port 6443"),
        ("Jobs that end ten times sooner than the throughput model predicts",
         "hvdk8s dev cluster --shape operator --speed 10"),
    ],
    "experiment report": [
        ("Tables and plots of the runs so far", "hvdk8s experiment report results/local-cpu"),
        ("As JSON, without plots", "hvdk8s experiment report results/local-cpu -o json --no-plots"),
    ],
    "install": [
        ("Deploy the topology agent, from the image you built and pushed (bash images/build.sh "
         "agent)", "hvdk8s install agent --image registry.example/hvdk8s-agent:0.1.0"),
        ("Print its manifests", "hvdk8s install agent --dry-run"),
    ],
    "install agent": [
        ("Deploy the topology agent to kube-system, from the image you pushed",
         "hvdk8s install agent --image registry.example/hvdk8s-agent:0.1.0"),
        ("Print its manifests instead", "hvdk8s install agent --dry-run -o yaml"),
        ("Where the NVIDIA runtime is not the default", "hvdk8s install agent --image registry.example/hvdk8s-agent:0.1.0 --runtime-class nvidia"),
    ],
    "install runtime": [
        ("Print hvdk8s's Kubeflow Trainer runtime for an image first",
         "hvdk8s install runtime --image horovod/horovod:0.28.1 --dry-run"),
        ("Then install it (--mode trainjob runs TrainJobs on it)",
         "hvdk8s install runtime --image horovod/horovod:0.28.1"),
    ],
}


def examples_text(path: str) -> str | None:
    """kubectl's `Examples:` section: a comment line, then the command, indented."""
    examples = EXAMPLES.get(path)
    if not examples:
        return None
    lines = ["Examples:"]
    for comment, line in examples:
        if comment:
            lines.extend(f"  # {part}" for part in textwrap.wrap(comment, EXAMPLE_WIDTH - 2))
        lines.extend(f"  {part}" for part in _command_lines(line))
    # Rich markup would eat `[...]`; one paragraph keeps the line breaks; typer's
    # inspect.cleandoc keeps the indent when a line after the first has none (the leading
    # empty line makes "Examples:" that line).
    return escape("\n" + "\n".join(lines))


def _command_lines(line: str) -> list[str]:
    """A command split between words into lines of EXAMPLE_WIDTH, each but the last ending
    in ` \\` as a shell continues it; a quoted argument is never split."""
    tokens = shlex.split(line, posix=False)
    words = []  # an option stays on one line with its value
    for token in tokens:
        if words and words[-1].startswith("-") and " " not in words[-1] \
                and not token.startswith("-") and not words[-1].startswith("--dry-run"):
            words[-1] += " " + token
        else:
            words.append(token)
    out, current = [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > EXAMPLE_WIDTH - 2:
            out.append(current + " \\")
            current = "    " + word
        else:
            current = f"{current} {word}" if current else word
    out.append(current)
    return out


def _metavar(param, ctx, path: str) -> str:
    if isinstance(param, TyperArgument):
        return ARGUMENT_METAVARS.get(param.name, param.name.upper())
    for opt in param.opts:
        if (path, opt) in COMMAND_METAVARS:
            return COMMAND_METAVARS[path, opt]
        if opt in METAVARS:
            return METAVARS[opt]
    shown = param.display_type(ctx).strip("<>").split()[0]
    if "|" in shown:  # a choice (launcher.cli.options.choice)
        param.choice_values = tuple(shown.split("|"))  # what the value column would list
        if len(shown) > LONG_CHOICE:
            long_opt = max(param.opts, key=len)
            param.help = f"{param.help or ''} One of: {shown.replace('|', ', ')}.".strip()
            return CHOICE_METAVARS.get(long_opt, "VALUE")
        return shown
    return FALLBACK.get(shown, "VALUE")


def _fold_long_words(get_parameter_help):
    """typer prints an option's help and default as rich Texts that cut a word longer than
    the column with `…` (`/var/lib/kubelet/pod-resources/kube…`); folded, the whole value
    is there, continued on the next line."""
    from rich.text import Text

    def parameter_help(*args, **kwargs):
        columns = get_parameter_help(*args, **kwargs)
        for item in getattr(columns, "renderables", ()):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    return parameter_help


def _folding_help(format_help):
    """typer imports its rich help renderer (~50 ms with markdown-it) only to print help;
    patched when it is first used, every other command's start is spared the import."""
    def wrapper(self, ctx, formatter):
        from typer import rich_utils

        if not getattr(rich_utils._get_parameter_help, "folds", False):
            rich_utils._get_parameter_help = _fold_long_words(rich_utils._get_parameter_help)
            rich_utils._get_parameter_help.folds = True
        return format_help(self, ctx, formatter)

    return wrapper


TyperCommand.format_help = _folding_help(TyperCommand.format_help)  # type: ignore[method-assign]
TyperGroup.format_help = _folding_help(TyperGroup.format_help)  # type: ignore[method-assign]


class _ArgumentWithoutType(TyperArgument):
    """An argument's name column already says what it is (`NAME`); typer would add `<str>`."""

    def display_type_rich(self, ctx):
        return None


def polish(command, path: str = "") -> None:
    """Give every parameter of `command` and its subcommands a value name, and every command
    its examples. Runs on the click tree typer builds, so new commands get it too."""
    ctx = typer.Context(command)
    # click adds --help lazily; made now, it gets the same treatment.
    help_option = command.get_help_option(ctx)
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if param.metavar is not None:
            pass  # the command named its value itself
        elif getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""  # a flag takes no value: show none
        else:
            param.metavar = _metavar(param, ctx, path)
        if type(param) is TyperArgument:
            param.__class__ = _ArgumentWithoutType
    if command.epilog is None:
        command.epilog = examples_text(path)
    for name, sub in (getattr(command, "commands", None) or {}).items():
        polish(sub, f"{path} {name}".strip())
