"""`hvdk8s submit mpi`: validate, plan, render (what --dry-run prints), then apply.

Options follow `arena submit mpi` so arena users feel at home; everything after the first
positional argument is the command, so the program's own flags never clash with ours.
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand

from launcher.calibration_file import CALIBRATION_OPT
from launcher.cli.common import (
    BACKEND_OPT,
    CONTEXT_OPT,
    NAMESPACE_OPT,
    exit_for_status,
    print_status,
)
from launcher.errors import UsageError
from launcher.output import check_format, emit_objects, note
from mpijob.jobspec import defaults

app = typer.Typer(no_args_is_help=True, help="Submit a job.")


class _OptionalValueDryRun(TyperCommand):
    """kubectl's `--dry-run[=client|server]`: a bare `--dry-run` means client.

    Only tokens before the first positional are ours; the user's command is left alone.
    """

    def parse_args(self, ctx, args):
        takes_value = {opt for p in self.params if not getattr(p, "is_flag", False)
                       and getattr(p, "opts", None) for opt in p.opts}
        args = list(args)
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--" or not token.startswith("-") or token == "-":
                break
            if token == "--dry-run":
                args[i] = "--dry-run=client"
            elif "=" not in token and token in takes_value:
                i += 1  # skip the option's value
            i += 1
        return super().parse_args(ctx, args)



@app.command(
    "mpi",
    cls=_OptionalValueDryRun,
    context_settings={"allow_interspersed_args": False},
    help="Submit an MPI/Horovod allreduce job. With no COMMAND it runs the built-in "
    "tf_cnn_benchmarks-compatible benchmark.",
)
def submit_mpi(
    command: list[str] = typer.Argument(None, help="Program and arguments, one shell string "
                                        "(arena style), or a whole `mpirun ...` line."),
    name: str = typer.Option(None, "--name", help="Job name, a DNS-1035 label (default: the "
                             "model or program plus a random suffix, e.g. resnet50-x7k2p)."),
    workers: int = typer.Option(defaults.WORKERS, "--workers", help="Workers, each with --gpus GPUs. With a "
                                "placement, the workers that land on one node share one pod "
                                "(so they can use NVLink)."),
    gpus: int = typer.Option(defaults.GPUS_PER_WORKER, "--gpus", help="GPUs per worker; 0 runs ranks on the CPU."),
    image: str = typer.Option(None, "--image", help="Training image."),
    namespace: str = NAMESPACE_OPT,
    context: str = CONTEXT_OPT,
    backend: str = BACKEND_OPT,
    mode: str = typer.Option(defaults.MODE, "--mode", help="pods (built-in, no operator) or "
                             "operator (a Kubeflow MPIJob)."),
    gang: bool = typer.Option(False, "--gang", help="Gang-schedule with Volcano, "
                              "scheduler-plugins or Kueue when installed (hvdk8s's own "
                              "all-or-nothing check applies either way)."),
    gang_scheduler: str = typer.Option(None, "--gang-scheduler", help="volcano, "
                                       "scheduler-plugins, kueue or none (default: detect)."),
    queue: str = typer.Option(None, "--queue", help="Volcano queue or Kueue LocalQueue."),
    gputopology: bool = typer.Option(False, "--gputopology", help="Topology-aware placement "
                                     "(the default; same as --placement topology)."),
    placement_policy: str = typer.Option(None, "--placement",
                                         help=", ".join(defaults.PLACEMENT_POLICIES) + "."),
    cluster: str = typer.Option(None, "--cluster", help="Plan against this cluster file "
                                "instead of the live cluster."),
    calibration: str = CALIBRATION_OPT,
    cross_zone: bool = typer.Option(False, "--cross-zone", help="Allow the job's nodes in "
                                    "several zones (never by default)."),
    gpu_request: str = typer.Option(defaults.GPU_REQUEST, "--gpu-request", help="auto, device-plugin or dra: "
                                    "how workers ask for GPUs (auto: DRA claims naming the "
                                    "planned GPUs where the cluster publishes DRA GPU devices)."),
    env: list[str] = typer.Option(None, "-e", "--env", help="K=V, repeatable."),
    cpu: str = typer.Option(None, "--cpu", help="CPU per worker (e.g. 4, 500m)."),
    memory: str = typer.Option(None, "--memory", help="Memory per worker (e.g. 16Gi)."),
    selector: list[str] = typer.Option(None, "--selector", help="Node selector k=v, repeatable."),
    toleration: list[str] = typer.Option(None, "--toleration", help="key=value:Effect, "
                                         "key:Effect, key or all; repeatable."),
    annotation: list[str] = typer.Option(None, "--annotation", help="k=v, repeatable."),
    label: list[str] = typer.Option(None, "--label", help="k=v, repeatable."),
    priority: str = typer.Option(None, "--priority", help="PriorityClass name."),
    mpi: str = typer.Option(defaults.MPI_IMPLEMENTATION, "--mpi",
                            help=", ".join(defaults.MPI_IMPLEMENTATIONS) + "."),
    clean_pod_policy: str = typer.Option(defaults.CLEAN_POD_POLICY, "--clean-pod-policy",
                                         help=", ".join(defaults.CLEAN_POD_POLICIES) + "."),
    backoff_limit: int = typer.Option(None, "--backoff-limit", min=0,
                                      help="Launcher retries (default 0: a failed run ends the job)."),
    ttl: int = typer.Option(None, "--ttl", min=0, help="Delete the finished job after this "
                            "many seconds (ttlSecondsAfterFinished)."),
    active_deadline: int = typer.Option(None, "--active-deadline", min=1,
                                        help="Fail the job after this many seconds "
                                        "(activeDeadlineSeconds)."),
    image_pull_secret: list[str] = typer.Option(None, "--image-pull-secret",
                                                help="Secret for a private registry; repeatable."),
    image_pull_policy: str = typer.Option(defaults.PULL_POLICY, "--image-pull-policy",
                                          help=", ".join(defaults.PULL_POLICIES) + "."),
    shm_size: str = typer.Option(None, "--shm-size", help="/dev/shm size (default 4Gi)."),
    host_network: bool = typer.Option(False, "--host-network", help="Run pods on the node's "
                                      "network (RDMA/InfiniBand without a CNI for it)."),
    network_interface: str = typer.Option(None, "--network-interface",
                                          help="NIC for MPI/NCCL with --host-network."),
    launcher_cpu: str = typer.Option(defaults.LAUNCHER_CPU, "--launcher-cpu", help="CPU for the launcher pod "
                                     "(it only runs mpirun; it never gets a GPU)."),
    launcher_memory: str = typer.Option(defaults.LAUNCHER_MEMORY, "--launcher-memory",
                                        help="Memory for the launcher pod."),
    scheduler_name: str = typer.Option(None, "--scheduler-name", help="Scheduler for the "
                                       "workers (default: the gang scheduler's, else the "
                                       "cluster default)."),
    model: str = typer.Option(defaults.MODEL, "--model", help="Benchmark model."),
    batch_size: int = typer.Option(defaults.BATCH_SIZE, "--batch-size",
                                   help="Benchmark batch size per GPU."),
    num_batches: int = typer.Option(defaults.NUM_BATCHES, "--num-batches",
                                    help="Benchmark: timed steps."),
    num_warmup_batches: int = typer.Option(defaults.NUM_WARMUP_BATCHES, "--num-warmup-batches",
                                           help="Benchmark: untimed steps first."),
    image_size: int = typer.Option(None, "--image-size", help="Benchmark image size "
                                   "(small sizes for CPU runs)."),
    use_fp16: bool = typer.Option(False, "--use-fp16", help="Benchmark: mixed precision."),
    xla: bool = typer.Option(False, "--xla", help="Benchmark: XLA compilation."),
    dry_run: str = typer.Option(None, "--dry-run", help="Print the "
                                "objects instead of creating them; --dry-run=server sends "
                                "them with server-side dry run."),
    output: str = typer.Option("yaml", "-o", "--output", help="yaml or json (dry run)."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the end; exit as `wait` does."),
    timeout: float = typer.Option(None, "--timeout", min=0, help="Seconds to wait with "
                                  "--wait; exit 124 when exceeded."),
    schedule_timeout: float = typer.Option(defaults.SCHEDULE_TIMEOUT_SECONDS, "--schedule-timeout", min=1, help="Seconds for "
                                           "all workers to be scheduled before rollback."),
):
    from launcher.submitting import SubmitRequest, run_submit

    check_format(output, ("yaml", "json"))
    if dry_run is not None and dry_run not in defaults.DRY_RUNS:
        raise UsageError(f"--dry-run: expected client or server, got {dry_run!r}")
    if mode not in defaults.MODES:
        raise UsageError(f"--mode: expected {' or '.join(defaults.MODES)}, got {mode!r}")
    if gputopology and placement_policy not in (None, defaults.PLACEMENT_POLICY):
        raise UsageError("--gputopology and --placement "
                         f"{placement_policy} disagree: give one of them")
    request = SubmitRequest(
        options=dict(
            name=name, workers=workers, gpus=gpus, image=image, namespace=namespace,
            env=env or [], cpu=cpu, memory=memory, selector=selector or [],
            toleration=toleration or [], annotation=annotation or [], label=label or [],
            priority=priority, mpi=mpi, clean_pod_policy=clean_pod_policy,
            backoff_limit=backoff_limit, ttl=ttl, active_deadline=active_deadline,
            image_pull_secret=image_pull_secret or [], image_pull_policy=image_pull_policy,
            shm_size=shm_size, host_network=host_network, network_interface=network_interface,
            launcher_cpu=launcher_cpu, launcher_memory=launcher_memory, queue=queue,
            scheduler_name=scheduler_name,
            placement=placement_policy, command=command or [],
            cross_zone=cross_zone, gpu_request_choice=gpu_request,
            model=model, batch_size=batch_size, num_batches=num_batches,
            num_warmup_batches=num_warmup_batches, image_size=image_size,
            use_fp16=use_fp16, xla=xla,
        ),
        gang=gang, gang_scheduler=gang_scheduler, mode=mode, backend=backend,
        context=context, cluster=cluster,
        dry_run=None if dry_run in (None, "none") else dry_run,
        schedule_timeout=schedule_timeout, calibration=calibration,
    )
    outcome = run_submit(request)
    if outcome.objects is not None:
        emit_objects(outcome.objects, output)
        return
    if wait:
        _follow_and_wait(outcome, timeout)
    else:
        note(f"follow it with: hvdk8s logs -f {outcome.name}"
             + (f" -n {outcome.namespace}" if outcome.namespace != "default" else "")
             + (" --backend local" if outcome.backend.name == "local" else ""))


def _follow_and_wait(outcome, timeout: float | None) -> None:
    """Stream the launcher's log as `logs -f` would while `wait` keeps the time limit."""
    import threading

    def stream():
        for line in outcome.backend.logs(outcome.name, outcome.namespace, follow=True):
            typer.echo(line)

    follower = threading.Thread(target=stream, daemon=True)
    follower.start()
    status = outcome.backend.wait(outcome.name, outcome.namespace, timeout=timeout)
    follower.join(timeout=10)  # the last lines, written just before the end
    print_status(status, "table", brief=True)
    exit_for_status(status)
