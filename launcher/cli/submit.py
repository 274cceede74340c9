"""`hvdk8s submit mpi`: validate, plan, render (what --dry-run prints), then apply.

Options follow `arena submit mpi` so arena users feel at home; everything after the first
positional argument is the command, so the program's own flags never clash with ours.
"""

from __future__ import annotations

import threading
from typing import Annotated

import typer
from typer.core import TyperCommand

from launcher.cli import options as opt
from launcher.cli.common import exit_for_status, print_status
from launcher.output import emit_objects, note
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



# Options of submit alone (the shared ones are in launcher.cli.options).
DryRun = Annotated[defaults.DryRun | None, opt.choice(
    defaults.DryRun, "--dry-run", help="Print the objects instead of creating them; "
    "--dry-run=server sends them with server-side dry run.")]
Wait = Annotated[bool, typer.Option("--wait", help="Wait for the end; exit as `wait` does.")]
ScheduleTimeout = Annotated[float, typer.Option(
    "--schedule-timeout", min=1, help="Seconds for all workers to be scheduled before "
    "rollback.")]


@app.command(
    "mpi",
    cls=_OptionalValueDryRun,
    context_settings={"allow_interspersed_args": False},
    help="Submit an MPI/Horovod allreduce job. With no COMMAND it runs the built-in "
    "tf_cnn_benchmarks-compatible benchmark.",
)
def submit_mpi(
    command: opt.Command = None,
    name: opt.Name = None,
    workers: opt.Workers = defaults.WORKERS,
    gpus: opt.Gpus = defaults.GPUS_PER_WORKER,
    image: opt.Image = None,
    namespace: opt.Namespace = None,
    context: opt.Context = None,
    backend: opt.Backend = None,
    mode: opt.Mode = defaults.MODE,
    gang: opt.Gang = False,
    gang_scheduler: opt.GangScheduler = None,
    queue: opt.Queue = None,
    gputopology: opt.GpuTopology = False,
    placement: opt.Placement = None,
    cluster: opt.Cluster = None,
    calibration: opt.Calibration = None,
    cross_zone: opt.CrossZone = False,
    gpu_request: opt.GpuRequest = defaults.GPU_REQUEST_CHOICE,
    rdma: opt.Rdma = defaults.RDMA,
    extra_resource: opt.ExtraResource = None,
    env: opt.Env = None,
    cpu: opt.Cpu = None,
    memory: opt.Memory = None,
    selector: opt.Selector = None,
    toleration: opt.Toleration = None,
    annotation: opt.Annotation = None,
    label: opt.Label = None,
    priority: opt.Priority = None,
    mpi: opt.Mpi = defaults.MPI_IMPLEMENTATION,
    clean_pod_policy: opt.CleanPodPolicy = defaults.CLEAN_POD_POLICY,
    backoff_limit: opt.BackoffLimit = None,
    ttl: opt.Ttl = None,
    active_deadline: opt.ActiveDeadline = None,
    image_pull_secret: opt.ImagePullSecret = None,
    image_pull_policy: opt.ImagePullPolicy = defaults.PULL_POLICY,
    shm_size: opt.ShmSize = defaults.SHM_SIZE,
    host_network: opt.HostNetwork = False,
    network_interface: opt.NetworkInterface = None,
    launcher_cpu: opt.LauncherCpu = defaults.LAUNCHER_CPU,
    launcher_memory: opt.LauncherMemory = defaults.LAUNCHER_MEMORY,
    scheduler_name: opt.SchedulerName = None,
    model: opt.Model = defaults.MODEL,
    batch_size: opt.BatchSize = defaults.BATCH_SIZE,
    num_batches: opt.NumBatches = defaults.NUM_BATCHES,
    num_warmup_batches: opt.NumWarmupBatches = defaults.NUM_WARMUP_BATCHES,
    image_size: opt.ImageSize = None,
    use_fp16: opt.UseFp16 = False,
    xla: opt.Xla = False,
    dry_run: DryRun = None,
    output: opt.ObjectsOutput = opt.YAML,
    wait: Wait = False,
    timeout: opt.WaitTimeout = None,
    schedule_timeout: ScheduleTimeout = defaults.SCHEDULE_TIMEOUT_SECONDS,
):
    # lazy: every CLI start imports the command modules; the submit pipeline (pydantic
    # models, ~70 ms) loads only for this one
    from launcher.pipeline.submitting import JobOptions, SubmitRequest, run_submit

    job = JobOptions(
        name=name, command=command or (), workers=workers, gpus=gpus, image=image,
        namespace=namespace, env=env or (), cpu=cpu, memory=memory, selector=selector or (),
        toleration=toleration or (), annotation=annotation or (), label=label or (),
        priority=priority, mpi=mpi, clean_pod_policy=clean_pod_policy,
        backoff_limit=backoff_limit, ttl=ttl, active_deadline=active_deadline,
        image_pull_secret=image_pull_secret or (), image_pull_policy=image_pull_policy,
        shm_size=shm_size, host_network=host_network, network_interface=network_interface,
        launcher_cpu=launcher_cpu, launcher_memory=launcher_memory, queue=queue,
        scheduler_name=scheduler_name, placement=opt.placement_policy(placement, gputopology),
        cross_zone=cross_zone, gpu_request=gpu_request, rdma=rdma,
        extra_resource=extra_resource or (), model=model, batch_size=batch_size,
        num_batches=num_batches, num_warmup_batches=num_warmup_batches,
        image_size=image_size, use_fp16=use_fp16, xla=xla)
    request = SubmitRequest(
        options=job, gang=gang, gang_scheduler=gang_scheduler, mode=mode, backend=backend,
        context=context, cluster=cluster, dry_run=dry_run,
        schedule_timeout=schedule_timeout, calibration=calibration)
    outcome = run_submit(request)
    if outcome.objects is not None:
        emit_objects(outcome.objects, output)
        return
    if wait:
        _follow_and_wait(outcome, timeout)
    else:
        flags = outcome.backend.job_command_flags
        note(f"follow it with: hvdk8s logs -f {outcome.name}"
             + (f" -n {outcome.namespace}" if outcome.namespace != defaults.NAMESPACE else "")
             + (f" {flags}" if flags else ""))


def _follow_and_wait(outcome, timeout: float | None) -> None:
    """Stream the launcher's log as `logs -f` would while `wait` keeps the time limit."""
    def stream():
        for line in outcome.backend.logs(outcome.name, outcome.namespace, follow=True):
            typer.echo(line)

    follower = threading.Thread(target=stream, daemon=True)
    follower.start()
    status = outcome.backend.wait(outcome.name, outcome.namespace, timeout=timeout)
    follower.join(timeout=10)  # the last lines, written just before the end
    print_status(status, "table", brief=True)
    exit_for_status(status)
