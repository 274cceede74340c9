"""The submit pipeline: options -> spec -> plan -> prediction -> objects -> backend.

Kept apart from the typer command so the experiment runner submits jobs the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from launcher.backends import select
from launcher.backends.base import BaseBackend
from launcher.errors import Refused, UsageError
from launcher.formats import calibration_file
from launcher.output import HeldNotes, note
from launcher.pipeline.jobnames import generated_name
from launcher.preparing.planning import Plan
from mpijob import gang as gangs
from mpijob.errors import SpecError
from mpijob.jobspec import defaults
from mpijob.jobspec.spec import build_spec, fields_from_options
from mpijob.k8s.gang import refusal
from mpijob.plural import plural

if TYPE_CHECKING:
    from mpijob.jobspec.spec import JobSpec


@dataclass(frozen=True)
class JobOptions:
    """A job as `hvdk8s submit mpi` takes it: the options given, by the spec field each sets
    ("benchmark.batch_size"; the fields declare their options: mpijob.jobspec.spec.Flag),
    as typed (text) or as the field takes them (the experiment runner's mappings), and the
    command. What is not given takes the spec model's default, so none is written here."""

    values: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()

    def get(self, path: str, default: Any = None) -> Any:
        return self.values.get(path, default)

    def setting(self, values: Mapping[str, Any]) -> JobOptions:
        return replace(self, values={**self.values, **values})

    def defaulted(self, values: Mapping[str, Any]) -> JobOptions:
        """These options, with `values` where none was given (a backend's defaults)."""
        return self.setting({k: v for k, v in values.items() if self.values.get(k) is None})


# Any valid job name: the options are checked under it before the generated one is chosen.
DRAFT_NAME = "job"


def _command(words: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """One word with spaces is a shell string (arena's "python train.py"); else argv."""
    if len(words) == 1 and any(c.isspace() for c in words[0]):
        return (words[0],), True
    return tuple(words), False


def build_spec_from_options(o: JobOptions, gang: defaults.GangScheduler = defaults.GANG_SCHEDULER,
                            *, name_for: Callable[[JobSpec], str] | None = None) -> JobSpec:
    """The JobSpec of these options; every problem becomes a UsageError naming the option.
    Without --name, `name_for` names the job from its validated fields (model, command,
    workers, namespace): the spec is then built once, with that name."""
    values = dict(o.values)
    if "pod_patches" in values:  # files: read here, the pure core takes their contents
        from launcher.pipeline.podpatch_files import read_pod_patch

        values["pod_patches"] = tuple(read_pod_patch(p) if isinstance(p, str) else p
                                      for p in values["pod_patches"])
    try:
        command, shell = _command(o.command)
        fields = fields_from_options(values)
        if name_for is not None and fields.get("name") is None:
            # validated under a stand-in name first: a bad option is refused before a
            # name is looked for (which lists the namespace's jobs)
            fields["name"] = name_for(build_spec(**{**fields, "name": DRAFT_NAME},
                                                 command=command, shell=shell, gang=gang))
        return build_spec(**fields, command=command, shell=shell, gang=gang)
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
            if plan.spec.elastic:  # one pod a worker, from a template: any free GPUs
                note(f"placement: {a.node}: {plural(a.workers, 'worker')}, one pod each "
                     f"({plural(plan.spec.gpus_per_worker, 'GPU')} each, any free ones)")
            else:
                note(f"placement: {a.node} GPUs [{gpus}] ({plural(a.workers, 'worker')} in "
                     "one pod)")
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


def _resolve_gang(request: SubmitRequest, backend: BaseBackend, *,
                  detect: bool) -> tuple[defaults.GangScheduler, bool]:
    """The gang scheduler, and whether --gang was asked where none is installed (then
    only built-in pods are all or nothing: mpijob.k8s.modes)."""
    if request.gang_scheduler:
        return request.gang_scheduler, False
    if not request.gang or backend.gang_note or not detect:
        return "none", False
    found = backend.detect_gang_scheduler()
    if found:
        note(f"gang: {found} found in the cluster; it schedules the workers together")
        return found, False
    note(f"gang: no {gangs.listed()} in the cluster, and {gangs.listed(built_in=True)} not "
         "served; hvdk8s's own all-or-nothing check applies (the job is rolled back if not "
         "all workers schedule)")
    return "none", True


# The ways on when a job with GPUs has neither a cluster nor GPUs here: the command a user
# copies from the README onto a laptop must say what to do, not run something else.
NO_CLUSTER_NO_GPU = (
    "no cluster configured (no --kubeconfig, $KUBECONFIG, ~/.kube/config or pod service "
    "account) and this machine has {have} for --workers {workers} --gpus {gpus}: configure a "
    "kubectl context (or pass --kubeconfig FILE), see the plan with --dry-run or --cluster "
    "FILE, or run on this machine's CPU with --gpus 0")
# Submit's way on when Kubernetes was asked for but nothing is configured.
SUBMIT_HINT = "see the plan with --dry-run --cluster FILE"


def _local_gpus_short(options: JobOptions) -> tuple[bool, str]:
    """(whether this machine lacks the GPUs the job asks for, how many it has in words)."""
    gpus = options.get("gpus_per_worker", defaults.GPUS_PER_WORKER)
    if not gpus:
        return False, ""
    have = select.local_gpu_count()
    workers = options.get("workers", defaults.WORKERS)
    return have < gpus * workers, plural(have, "GPU") if have else "no GPU"


def _choose_backend(request: SubmitRequest, client_dry_run: bool):
    """The backend the job goes to, or, for a client dry run, whose dry run shows it: the
    one the same command without --dry-run would use (select.resolve_backend_name); and
    the notes that say why, for once the options are known to be good."""
    name, why = select.resolve_backend_name(request.backend, request.context, hint=SUBMIT_HINT)
    fell_back = request.backend is None and name == "local"
    short, have = _local_gpus_short(request.options) if fell_back else (False, "")
    if client_dry_run and request.backend is None and (request.cluster or short):
        # offline: nothing to read, or the user's cluster file is the cluster
        said = ([f"note: no cluster configured and this machine has {have}: these are the "
                 "objects the job would be on a cluster"] if short and not request.cluster else
                [f"note: offline dry run: planned on {request.cluster}, nothing read from a "
                 "cluster (submit re-checks the plan, claims and quotas on the live one)"]
                if request.cluster else [])
        return select.offline_backend(), said  # a client dry run asks no cluster anything
    if client_dry_run and name == "kubernetes":
        # A client dry run reads all that submit reads, and only writes nothing.
        from launcher.pipeline.dry_run import live_or_offline

        return live_or_offline(select.make_backend(
            name, context=request.context, namespace=request.options.get("namespace")),
            [f"backend: {name} ({why})"] if request.backend is None else [])
    if short:  # before a name is generated: no job is created
        o = request.options
        raise Refused(NO_CLUSTER_NO_GPU.format(
            have=have, workers=o.get("workers", defaults.WORKERS), gpus=o.get("gpus_per_worker")))
    said = [f"backend: {name} ({why})"] if request.backend is None else []
    return select.make_backend(name, context=request.context,
                               namespace=request.options.get("namespace")), said


def _rendering(step, plan, options):
    """Rendering, before anything is created: a --pod-patch that breaks what hvdk8s relies
    on is a usage error (mpijob.k8s.podpatch)."""
    try:
        return step(plan, options)
    except SpecError as err:
        raise UsageError.naming_option(err) from None


def run_submit(request: SubmitRequest) -> SubmitOutcome:
    """Validate, plan, render (what a dry run shows), then hand the job to the backend, which
    never needs to be asked which one it is (launcher.backends.base.BaseBackend)."""
    with HeldNotes() as held:  # a request refused as asked is one line (output.HeldNotes)
        return _run_submit(request, held)


def _run_submit(request: SubmitRequest, held: HeldNotes) -> SubmitOutcome:
    client_dry_run = request.dry_run == "client"
    server_dry_run = request.dry_run == "server"
    backend, why_this_backend = _choose_backend(request, client_dry_run)
    offline = backend.name == BaseBackend.name  # a client dry run that reads no cluster
    gang, gang_unserved = _resolve_gang(request, backend, detect=not offline)
    if request.gang and backend.gang_note:
        note(backend.gang_note)
    options = request.options
    sized = backend.sized(options.values, options.command)
    quick = sized is not options.values  # the backend chose the benchmark's size
    options = replace(options, values=sized).defaulted(backend.option_defaults())
    generated = options.get("name") is None

    def name_for(draft: JobSpec) -> str:
        return generated_name(model=draft.benchmark.model, command=draft.command,
                              shell=draft.shell, workers=draft.workers,
                              backend=None if offline else backend, namespace=draft.namespace)

    spec = build_spec_from_options(options, gang=gang, name_for=name_for)
    decision = backend.mode_for(request.mode, spec, gang_unserved=gang_unserved)
    mode = decision.mode
    submit_options = backend.submit_options(mode=mode, server_dry_run=server_dry_run,
                                            schedule_timeout=request.schedule_timeout)
    if (refused := refusal(gang, mode)) is not None:
        raise UsageError(refused)
    for line in backend.check_spec(spec):
        note(f"note: {line}")
    for line in why_this_backend:  # after validation: bad input gets its one line only
        note(line)
    if generated:
        note(f"job name: {spec.name} (generated; --name NAME sets one)")

    if request.cluster:
        # lazy: cluster files' models (~15 ms) only with --cluster
        from launcher.formats.clusterfile import load_cluster

        cluster = load_cluster(request.cluster)
    else:
        cluster = backend.cluster_for(spec, context=request.context)
    cal, cal_source = calibration_file.load(request.calibration)
    assumptions = calibration_file.assumptions(cal, cal_source) if cal is not None else None
    # what the plan decides goes beside the spec, which stays as built (plan.decisions: the
    # RDMA device the workers request, the sshd port on the host network, ...)
    plan = backend.plan(spec, cluster, assumptions, mode=decision)
    describe_plan(plan)
    if start := backend.start_note(spec, plan, quick=quick):
        note(start)

    submit_options = backend.job_options(spec, submit_options)
    plan, checked = backend.preflight(plan, submit_options)
    for line in checked:
        note(f"note: {line}")
    if client_dry_run:
        submit_options = replace(submit_options, shown_only=True)
    prepared = _rendering(backend.prepare, plan, submit_options)
    for line in backend.admit(prepared, submit_options, dry_run=client_dry_run):
        note(f"note: {line}")
    prepared = replace(prepared, admitted=True)
    if client_dry_run:
        objects = list(prepared.objects)
        for line in backend.dry_run_notes(prepared, submit_options):
            note(f"note: {line}")
        import json

        from launcher.preparing.sshkeys import PLACEHOLDER  # loaded by prepare already

        if any(PLACEHOLDER in json.dumps(o) for o in objects):
            note("note: the SSH key pair shown is a placeholder; submit generates a fresh "
                 "one (no private key is printed)")
        return SubmitOutcome(spec.name, spec.namespace, backend, objects=objects, plan=plan)

    held.release()  # checked: the plan is shown before anything is created
    result = backend.submit(prepared, submit_options)
    note(result.message or f"job {spec.name} submitted ({result.backend}, namespace {spec.namespace})")
    if server_dry_run:
        return SubmitOutcome(spec.name, spec.namespace, backend, objects=result.objects, plan=plan)
    return SubmitOutcome(spec.name, spec.namespace, backend, plan=plan)
