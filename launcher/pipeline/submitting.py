"""The submit pipeline: options -> spec -> plan -> prediction -> objects -> backend.

Kept apart from the typer command so the experiment runner submits jobs the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from launcher.backends import select
from launcher.backends.base import BaseBackend
from launcher.errors import UsageError
from launcher.formats import calibration_file
from launcher.output import note
from launcher.pipeline.jobnames import generated_name
from launcher.preparing.planning import Plan
from mpijob.errors import SpecError
from mpijob.jobspec import defaults
from mpijob.jobspec.options import parse_key_value, parse_toleration
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.gang import refusal
from mpijob.k8s.hostnet import free_ssh_port
from mpijob.plural import plural


@dataclass(frozen=True)
class JobOptions:
    """A job as `hvdk8s submit mpi` takes it, one field per option (launcher.cli.options
    declares them; the experiment runner fills them from a run). None or empty is "not
    given": the spec model's default applies (mpijob.jobspec.defaults), so none is written
    here. `build_spec_from_options` says which spec field each one sets."""

    name: str | None = None
    command: Sequence[str] = ()
    workers: int | None = None
    gpus: int | None = None
    image: str | None = None
    namespace: str | None = None
    env: Sequence[str] = ()  # KEY=VALUE
    cpu: str | None = None
    memory: str | None = None
    selector: Sequence[str] = ()  # KEY=VALUE
    toleration: Sequence[str] = ()
    annotation: Sequence[str] = ()  # KEY=VALUE
    label: Sequence[str] = ()  # KEY=VALUE
    priority: str | None = None
    mpi: defaults.MPIImplementation | None = None
    clean_pod_policy: defaults.CleanPodPolicy | None = None
    backoff_limit: int | None = None
    ttl: int | None = None
    active_deadline: int | None = None
    image_pull_secret: Sequence[str] = ()
    image_pull_policy: defaults.PullPolicy | None = None
    shm_size: str | None = None
    host_network: bool = False
    network_interface: str | None = None
    launcher_cpu: str | None = None
    launcher_memory: str | None = None
    queue: str | None = None
    scheduler_name: str | None = None
    placement: defaults.PlacementPolicy | None = None
    cross_zone: bool = False
    # auto is decided once the cluster is known (_with_gpu_request), not by the spec.
    gpu_request: defaults.GpuRequestChoice | None = None
    rdma: defaults.RdmaChoice | None = None
    extra_resource: Sequence[str] = ()  # NAME=N
    model: str | None = None
    batch_size: int | None = None
    num_batches: int | None = None
    num_warmup_batches: int | None = None
    image_size: int | None = None
    use_fp16: bool = False
    xla: bool = False


def _pairs(values: Sequence[str], option: str) -> dict[str, str]:
    return dict(parse_key_value(v, option) for v in values)


def _counts(values: Sequence[str], option: str) -> dict[str, int]:
    out = {}
    for name, count in (parse_key_value(v, option) for v in values):
        if not count.isdigit():
            raise SpecError("extra_resources", f"{name}={count}: expected NAME=N with a whole "
                            "number N", option=option)
        out[name] = int(count)
    return out


def _command(words: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """One word with spaces is a shell string (arena's "python train.py"); else argv."""
    if len(words) == 1 and any(c.isspace() for c in words[0]):
        return (words[0],), True
    return tuple(words), False


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def build_spec_from_options(o: JobOptions, gang: defaults.GangScheduler = defaults.GANG_SCHEDULER):
    """The JobSpec of these options; every problem becomes a UsageError naming the option
    (the spec's fields carry their flags: mpijob.jobspec.spec.Flag)."""
    try:
        command, shell = _command(o.command)
        # Only what was given: every default is the spec model's.
        fields: dict[str, Any] = _given(
            name=o.name, workers=o.workers, gpus_per_worker=o.gpus, cpu=o.cpu,
            memory=o.memory, image=o.image, namespace=o.namespace, shm_size=o.shm_size,
            mpi_implementation=o.mpi, queue=o.queue, priority_class=o.priority,
            image_pull_policy=o.image_pull_policy, network_interface=o.network_interface,
            launcher_cpu=o.launcher_cpu, launcher_memory=o.launcher_memory,
            scheduler_name=o.scheduler_name, placement_policy=o.placement, rdma=o.rdma)
        fields.update(
            command=command, shell=shell, gang=gang,
            env=_pairs(o.env, "-e/--env"),
            run_policy=_given(clean_pod_policy=o.clean_pod_policy,
                              backoff_limit=o.backoff_limit,
                              ttl_seconds_after_finished=o.ttl,
                              active_deadline_seconds=o.active_deadline),
            node_selector=_pairs(o.selector, "--selector"),
            tolerations=tuple(parse_toleration(t) for t in o.toleration),
            labels=_pairs(o.label, "--label"),
            annotations=_pairs(o.annotation, "--annotation"),
            image_pull_secrets=tuple(o.image_pull_secret),
            extra_resources=_counts(o.extra_resource, "--extra-resource"),
            host_network=o.host_network, cross_zone=o.cross_zone,
            benchmark=_given(model=o.model, batch_size=o.batch_size,
                             num_batches=o.num_batches,
                             num_warmup_batches=o.num_warmup_batches,
                             image_size=o.image_size, use_fp16=o.use_fp16, xla=o.xla),
        )
        return build_spec(**fields)
    except SpecError as err:
        raise UsageError.naming_option(err) from None


@dataclass
class SubmitRequest:
    """A submit: the job's options, and how to submit it."""

    options: JobOptions
    gang: bool = False
    gang_scheduler: defaults.GangScheduler | None = None  # None: detect with --gang
    mode: defaults.Mode = defaults.MODE
    backend: str | None = None
    context: str | None = None
    cluster: str | None = None
    dry_run: defaults.DryRun | None = None  # None or "none": create the objects
    schedule_timeout: float = defaults.SCHEDULE_TIMEOUT_SECONDS
    calibration: str | None = None  # --calibration FILE (None: the default file, if any)


@dataclass
class SubmitOutcome:
    name: str
    namespace: str
    backend: Any = None
    objects: list[dict] | None = None  # set for a client dry run: what would be sent
    plan: Plan | None = None


def describe_plan(plan: Plan) -> None:
    for line in plan.notes:
        note(f"note: {line}")
    if plan.placement is not None:
        if plan.placement.compute_domain:
            note(f"nvlink: the workers span {plural(plan.placement.nodes_used, 'node')} of NVLink "
                 f"partition {plan.placement.nvlink_domain}: a ComputeDomain gives them its "
                 "IMEX channel")
        for a in plan.placement.assignments:
            gpus = ",".join(map(str, a.gpus)) or "-"
            note(f"placement: {a.node} GPUs [{gpus}] ({plural(a.workers, 'worker')} in one pod)")
        for line in plan.placement.explanation:
            note(f"  {line}")
    network = plan.network
    if network is not None:
        for line in network.lines:
            note(line)
        if network.warning:
            note(f"warning: {network.warning}")
    if plan.prediction is not None:
        p = plan.prediction
        note(f"predicted: {p.images_per_sec:.0f} images/sec (step {p.step_seconds * 1000:.0f} ms: "
             f"compute {p.compute_seconds * 1000:.0f} ms, slowest rank "
             f"+{p.straggler_seconds * 1000:.0f} ms, allreduce {p.allreduce_seconds * 1000:.0f} ms "
             f"of which {p.exposed_allreduce_seconds * 1000:.0f} ms exposed; bottleneck "
             f"{p.bottleneck}; scaling efficiency {p.scaling_efficiency:.0%})")
        for line in p.notes:
            if line.startswith("calibration"):
                note(f"  {line}")


OPERATOR_GANG_NONE = ("--gang with --mode operator needs Volcano, scheduler-plugins or Kueue, and "
                      "none is installed; use --mode pods, where hvdk8s's own all-or-nothing "
                      "check applies (the job is deleted unless every worker is scheduled)")


def _resolve_gang(request: SubmitRequest, backend: BaseBackend, *,
                  detect: bool) -> defaults.GangScheduler:
    if request.gang_scheduler:
        return request.gang_scheduler
    if not request.gang or backend.gang_note or not detect:
        return "none"
    found = backend.detect_gang_scheduler()
    if found:
        note(f"gang: {found} found in the cluster; it schedules the workers together")
        return found
    if request.mode == "operator":
        # The operator creates the pods; nothing would hold them back all or nothing.
        raise UsageError(OPERATOR_GANG_NONE)
    note("gang: no Volcano, scheduler-plugins or Kueue in the cluster; hvdk8s's own "
         "all-or-nothing check applies (the job is rolled back if not all workers schedule)")
    return "none"


def _with_gpu_request(spec, choice: defaults.GpuRequestChoice, cluster):
    """--gpu-request: auto takes DRA where the cluster's nodes publish DRA GPU devices."""
    if not spec.gpus_per_worker:
        return spec
    has_dra = cluster is not None and any(n.dra_devices for n in cluster.nodes)
    mode = choice if choice != "auto" else ("dra" if has_dra else "device-plugin")
    if mode == "dra" and cluster is not None and not has_dra:
        raise UsageError("--gpu-request dra: no node of the cluster publishes DRA GPU devices "
                         "(no gpu.nvidia.com ResourceSlices); use --gpu-request device-plugin")
    if mode == "dra":
        note("gpus: requested through DRA ResourceClaims"
             + (" selecting the planned devices" if has_dra else
                " (no device data: any GPUs sharing one PCIe root)"))
    return spec.model_copy(update={"gpu_request": mode})


def _free_host_ssh_port(spec, cluster, placement):
    """On the host network the job's sshd port is a port of its nodes: move it past ports
    the snapshot shows in use there (mpijob.k8s.hostnet)."""
    used_on = {a.node for a in placement.assignments} if placement is not None else None
    taken = {port for n in cluster.nodes if used_on is None or n.name in used_on
             for port in n.host_ports}
    if spec.ssh_port not in taken:
        return spec
    port = free_ssh_port(spec.namespace, spec.name, taken)
    note(f"note: --host-network: sshd port {spec.ssh_port} is in use on the job's nodes; "
         f"using {port}")
    return spec.model_copy(update={"ssh_port": port})


def run_submit(request: SubmitRequest) -> SubmitOutcome:
    """Validate, plan, render (what a dry run shows), then hand the job to the backend, which
    never needs to be asked which one it is (launcher.backends.base.BaseBackend)."""
    client_dry_run = request.dry_run == "client"
    server_dry_run = request.dry_run == "server"
    if client_dry_run and request.backend is None:
        backend = BaseBackend()  # offline: no cluster is asked anything
    else:
        backend_name, why = select.resolve_backend_name(request.backend, request.context)
        if request.backend is None:
            note(f"backend: {backend_name} ({why})")
        backend = select.make_backend(backend_name, context=request.context,
                                      namespace=request.options.namespace)
    submit_options = backend.submit_options(mode=request.mode,
                                            server_dry_run=server_dry_run,
                                            schedule_timeout=request.schedule_timeout)
    gang = _resolve_gang(request, backend, detect=not client_dry_run)

    if (refused := refusal(gang, request.mode)) is not None:
        raise UsageError(refused)
    if request.gang and backend.gang_note:
        note(backend.gang_note)
    options = request.options
    if options.namespace is None and backend.namespace:
        options = replace(options, namespace=backend.namespace)
    generated = options.name is None
    if generated:
        command, shell = _command(options.command)
        options = replace(options, name=generated_name(
            model=options.model or defaults.MODEL, command=command, shell=shell,
            workers=options.workers or defaults.WORKERS,
            backend=None if client_dry_run and request.backend is None else backend,
            namespace=options.namespace))
    spec = build_spec_from_options(options, gang=gang)
    if request.mode == "operator" and spec.host_network and spec.mpi_implementation != "OpenMPI":
        raise UsageError("--host-network with --mode operator needs --mpi openmpi: Hydra "
                         "cannot be told the job's sshd port (port 22 is the node's own "
                         "sshd); use --mode pods")
    if generated:  # after validation: bad input still gets its one line only
        note(f"job name: {spec.name} (generated; --name NAME sets one)")

    if request.cluster:
        # lazy: cluster files' models (~15 ms) only with --cluster
        from launcher.formats.clusterfile import load_cluster

        cluster = load_cluster(request.cluster)
    else:
        cluster = backend.cluster_for(spec, context=request.context)
    spec = _with_gpu_request(spec, options.gpu_request or defaults.GPU_REQUEST_CHOICE, cluster)

    cal, cal_source = calibration_file.load(request.calibration)
    assumptions = calibration_file.assumptions(cal, cal_source) if cal is not None else None
    plan = backend.plan(spec, cluster, assumptions)
    spec = plan.spec  # with what the plan decided (the RDMA device the workers request)
    if spec.host_network and cluster is not None:
        spec = plan.spec = _free_host_ssh_port(spec, cluster, plan.placement)
    describe_plan(plan)

    if not client_dry_run:
        plan, checked = backend.preflight(plan, submit_options)
        spec = plan.spec
        for line in checked:
            note(f"note: {line}")
    prepared = backend.prepare(plan, submit_options)
    if client_dry_run:
        objects = list(prepared.objects)
        if request.mode == "pods" and objects and objects[0].get("kind") == "Job":
            note(f"note: at creation every object gets an ownerReference to Job/{objects[0]['metadata']['name']} "
                 "(its uid is assigned by the API server)")
        return SubmitOutcome(spec.name, spec.namespace, backend, objects=objects, plan=plan)

    result = backend.submit(prepared, submit_options)
    note(result.message or f"job {spec.name} submitted ({result.backend}, namespace {spec.namespace})")
    if server_dry_run:
        return SubmitOutcome(spec.name, spec.namespace, backend, objects=result.objects, plan=plan)
    return SubmitOutcome(spec.name, spec.namespace, backend, plan=plan)
