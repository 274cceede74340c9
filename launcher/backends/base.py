"""What every backend (local processes, Kubernetes) offers the CLI, and the status it reports.

The CLI commands (`submit`, `get`, `list`, `logs`, `wait`, `delete`) talk only to this
interface, so a job behaves the same on this machine and on a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: `list` and `get` stay fast without pydantic models
    from launcher.formats.job_progress import JobProgress
    from launcher.preparing.planning import Plan
    from mpijob.jobspec.spec import JobSpec
    from mpijob.k8s.modes import Installed
    from mpijob.perf.perfmodel import Assumptions
    from mpijob.scheduling.cluster import Cluster

from launcher.errors import Refused, UsageError
from launcher.output import note
from mpijob.jobspec import defaults, refs
from mpijob.phases import JobPhase

# The phases' strings, as records carry them (mpijob.phases).
PENDING = JobPhase.PENDING.value
QUEUED = JobPhase.QUEUED.value
RUNNING = JobPhase.RUNNING.value
SUCCEEDED = JobPhase.SUCCEEDED.value
FAILED = JobPhase.FAILED.value
TERMINAL = tuple(p.value for p in JobPhase if p.terminal)


@dataclass
class ReplicaStatus:
    """One pod (Kubernetes) or one rank/process group (local)."""

    name: str
    role: str  # launcher | worker | rank
    phase: str
    node: str | None = None
    gpus: list[int] = field(default_factory=list)
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    restarts: int = 0


@dataclass
class JobStatus:
    name: str
    namespace: str
    backend: str
    phase: str
    mode: str | None = None
    created: str | None = None
    started: str | None = None
    finished: str | None = None
    workers: int = 0
    gpus_per_worker: int = 0
    replicas: list[ReplicaStatus] = field(default_factory=list)
    placement: list[dict] = field(default_factory=list)  # [{"node": str, "gpus": [int]}]
    reason: str | None = None
    message: str | None = None
    log_tail: list[str] = field(default_factory=list)
    images_per_sec: float | None = None
    predicted_images_per_sec: float | None = None
    result: dict | None = None  # the benchmark's HVDK8S_RESULT JSON line
    # Per worker pod, the GPUs a reporter (topology agent) says it holds vs the plan
    # (mpijob.scheduling.gpu_view.PodGpus.to_json, plus "note"); empty when nothing reported.
    gpu_allocation: list[dict] = field(default_factory=list)
    # Elastic jobs: the workers now and when they left and joined, and why.
    size: list[str] = field(default_factory=list)
    # From the ranks' reports while it runs (launcher.formats.job_progress); None: none came.
    progress: JobProgress | None = None
    # The one cause that keeps the job from running or made it fail, with the fix
    # (launcher.formats.causes); None when nothing is wrong.
    why: str | None = None
    # The preflight's verdict, what it named and its figures (launcher.formats.preflight_reports).
    preflight: dict | None = None

    @property
    def done(self) -> bool:
        return JobPhase.of(self.phase).terminal

    def to_dict(self) -> dict:
        found = asdict(self)
        found["progress"] = self.progress.to_dict() if self.progress else None
        return found


@dataclass
class SubmitResult:
    name: str
    namespace: str
    backend: str
    objects: list[dict] = field(default_factory=list)
    message: str | None = None


@dataclass(frozen=True)
class SubmitOptions:
    """What a backend takes at submit besides the spec and its plan (TorchX's `run_opts`):
    each backend has its own subclass, so no backend receives another's options."""

    mode: defaults.Mode = defaults.MODE
    # Trainer mode: the TrainJob API version the cluster serves; MultiKueue: the manager
    # Kueue dispatches the job for (runPolicy.managedBy, spec.managedBy).
    trainer_version: str = "v1alpha1"
    managed_by: str | None = None
    # A client dry run: what is printed, never sent (secrets it would make are placeholders).
    shown_only: bool = False
    # --metrics-port: a PodMonitor for the launcher, unless the cluster has no PodMonitor CRD.
    pod_monitor: bool = True


@dataclass(frozen=True)
class ModeDecision:
    """The mode a job runs in, and what the cluster was found to serve when it was chosen."""

    mode: defaults.Mode
    installed: Installed
    gang_unserved: bool = False  # --gang asked where no gang scheduler is installed


@dataclass(frozen=True)
class Prepared:
    """A job ready to send. `objects` is exactly what `submit` sends and what a client dry
    run prints (TorchX's `submit = schedule(submit_dryrun(...))`): rendered once, so the two
    cannot differ. Kubernetes objects get their ownerReference to the root at creation,
    when the root's uid exists."""

    spec: JobSpec
    plan: Plan
    objects: tuple[dict, ...]
    admitted: bool = False  # `admit` passed: `submit` need not ask again


class BaseBackend:
    """The contract `launcher.pipeline.submitting.run_submit` uses, with neutral defaults:
    planning without a snapshot, no checks, nothing to prepare or send. Backends override
    what they do (launcher.backends.kubernetes.rendering renders Kubernetes objects for
    both Kubernetes backends, the offline one of a client dry run among them).

    The pipeline calls, in order: `plan`, then `preflight`, then `prepare`, then `admit`
    (a client dry run) or `submit` with what `prepare` returned."""

    name = "offline"
    # Why --gang asks nothing of a scheduler here (None: the cluster's scheduler decides).
    gang_note: str | None = None
    # What `logs`, `get`, `wait` and `delete` need to find this backend's jobs, which they
    # would not pick by themselves (`submit` prints it in its hint).
    job_command_flags: str = ""

    @property
    def namespace(self) -> str | None:
        """Where a job goes when the user names no namespace (None: the spec's default)."""
        return None

    def submit_options(self, *, mode: defaults.Mode, server_dry_run: bool,
                       schedule_timeout: float | None) -> SubmitOptions:
        # Offline nothing says what the cluster has: auto shows built-in mode.
        return SubmitOptions(mode="pods" if mode == "auto" else mode)

    def option_defaults(self) -> Mapping[str, Any]:
        """What this backend decides for options the user left unset (by spec field path):
        the namespace its jobs go to, where it has one."""
        return {"namespace": self.namespace} if self.namespace else {}

    def sized(self, values: Mapping[str, Any], command: tuple[str, ...]) -> Mapping[str, Any]:
        """The job's options (by spec field path) with what this backend sets where the user
        set nothing; the same mapping where it sets nothing (here)."""
        return values

    def start_note(self, spec: JobSpec, plan: Plan, *, quick: bool) -> str | None:
        """What to say, once planned, about how the job will run here (`quick`: `sized`
        chose its size); nothing here."""
        return None

    def mode_for(self, asked: defaults.Mode, spec: JobSpec, *,
                 gang_unserved: bool) -> ModeDecision:
        """The mode the job runs in: as asked, or --mode auto's table (mpijob.k8s.modes) on
        what `installed_modes` finds; refused (Refused, UsageError) before anything is
        advised or created where the job cannot run in it. Says the choice auto made; the
        decision keeps what it was made on (what another mode would need, said later)."""
        from mpijob.k8s.modes import choose_mode

        installed = self.installed_modes(spec)
        choice = choose_mode(asked, spec, installed, gang_unserved=gang_unserved)
        if choice.mode is None:
            raise Refused(choice.line)
        if asked == "auto" and (installed.operator or installed.trainer):  # a choice was made
            note(choice.line)
        return ModeDecision(choice.mode, installed, gang_unserved)  # type: ignore[arg-type]

    def dry_run_notes(self, prepared: Prepared, options: SubmitOptions) -> list[str]:
        """What a client dry run's objects do not show by themselves; nothing here."""
        return []

    def installed_modes(self, spec: JobSpec) -> Installed:
        """What the cluster has for each mode (mpijob.k8s.modes); here nothing is read."""
        from mpijob.k8s.modes import Installed

        return Installed(known=False)

    def job_options(self, spec: JobSpec, options: SubmitOptions) -> SubmitOptions:
        """The options once the spec is known, from where the job goes (a MultiKueue queue
        sets managedBy); asked before preflight, for a dry run too (it shows what is sent)."""
        return options

    def detect_gang_scheduler(self) -> defaults.GangScheduler | None:
        """The gang scheduler installed where jobs run, if any."""
        return None

    def cluster_for(self, spec: JobSpec, *, context: str | None) -> Cluster | None:
        """The cluster snapshot to plan on when the user gave no --cluster file (or None)."""
        return None

    def plan(self, spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
             *, mode: ModeDecision | None = None) -> Plan:
        """The job placed and predicted; what the plan decides goes beside the spec
        (`plan.decisions`), the spec staying as asked.
        `mode`: `mode_for`'s decision, for a backend whose modes shape the plan."""
        # lazy: every CLI start imports this module; what planning and rendering need (pydantic
        # models, ~70 ms) loads only to plan or render
        from launcher.preparing.planning import plan_job

        return plan_job(spec, cluster, assumptions)

    def check_spec(self, spec: JobSpec) -> list[str]:
        """Refuse (UsageError) what this backend cannot honour, before anything runs or is
        planned; return what the user should know about the rest. Here: pods."""
        notes = []
        if spec.data_dirs:
            notes.append("--data-dir mounts a directory of each node (hostPath): the scheduler "
                         "does not know which nodes have it, and a node without it fails the "
                         "pod at start")
        data_dir = spec.benchmark.data_dir
        mounts = [*(d.mount for d in spec.data), *(h.mount for h in spec.data_dirs)]
        if spec.runs_benchmark and data_dir and not any(
                data_dir == m or data_dir.startswith(m + "/") for m in mounts):
            notes.append(f"--benchmark-data-dir {data_dir} is under no --data or --data-dir "
                         "mount: the image itself must hold the records")
        return notes

    def preflight(self, plan: Plan, options: SubmitOptions) -> tuple[Plan, list[str]]:
        """Checks against where the job will run, right before it is prepared for real:
        refuse what cannot be created, refresh a plan gone stale. Returns the plan to
        prepare and notes for the user. Nothing is created."""
        return plan, []

    def admit(self, prepared: Prepared, options: SubmitOptions, *,
              dry_run: bool = False) -> list[str]:
        """Would the cluster take exactly these objects? Refuse (UsageError) what it would
        not; read and dry-run only, never write. `dry_run`: for a client dry run, where
        what the user may not do is a note, not a refusal. Returns notes for the user."""
        return []

    def prepare(self, plan: Plan, options: SubmitOptions) -> Prepared:
        """Everything the job is, computed once, without a call to anything: what a client
        dry run shows and `submit` sends."""
        raise NotImplementedError(f"the {self.name} backend prepares nothing")

    def submit(self, prepared: Prepared, options: SubmitOptions) -> SubmitResult:
        """Send exactly `prepared.objects` (or start exactly what they describe)."""
        raise NotImplementedError(f"the {self.name} backend cannot submit")

    def watch_status(self, name: str, namespace: str | None = None, *,
                     poll: float = 2.0) -> Iterator[JobStatus]:
        """`get --watch`: the status now, then each time it changes, until the job ends.
        Polls `get`; a backend with change notifications overrides it."""
        last = None
        while True:
            status = self.get(name, namespace)  # type: ignore[attr-defined]
            if status_key(status) != last:
                last = status_key(status)
                yield status
            if status.done:
                return
            time.sleep(poll)


    def tidy(self, name: str, namespace: str | None = None) -> Iterator[str]:
        """`hvdk8s tidy`: the writes a job's state calls for, which no read command takes,
        one line per step the backend confirmed. None by default: the job's own processes
        take them (the local supervisor ends its ranks and writes its state)."""
        self.get(name, namespace)  # type: ignore[attr-defined]  # NotFound for no such job
        yield f"job {name}: nothing to tidy"

    def tidy_all(self, namespace: str | None = None,
                 all_namespaces: bool = False) -> Iterator[str]:
        for status in self.list(namespace, all_namespaces):  # type: ignore[attr-defined]
            yield from self.tidy(status.name, status.namespace)


def status_key(status: JobStatus) -> tuple:
    """What `get --watch` shows a change of: the phase, its reason, each pod's phase."""
    return (status.phase, status.reason, status.message,
            tuple((r.name, r.phase, r.reason) for r in status.replicas))


class Backend(Protocol):
    name: str

    def submit(self, prepared: Prepared, options: SubmitOptions) -> SubmitResult: ...

    def get(self, name: str, namespace: str | None = None) -> JobStatus: ...

    # live: each running job's progress too (`list -o wide`), where reading it costs requests
    def list(self, namespace: str | None = None, all_namespaces: bool = False, *,
             live: bool = False) -> list[JobStatus]: ...

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        follow: bool = False,
        rank: int | None = None,
        worker: int | None = None,
        all_replicas: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]: ...

    def wait(self, name: str, namespace: str | None = None, *, timeout: float | None = None,
             on_change: Callable[[JobStatus], None] | None = None) -> JobStatus: ...

    # `hvdk8s tidy`: the writes the read commands above never take; one line per step
    def tidy(self, name: str, namespace: str | None = None) -> Iterator[str]: ...

    def delete(self, name: str, namespace: str | None = None) -> bool: ...


# --- a job named on the command line (`get`, `logs`, `wait`, `scale`, `delete`, `list -n`):
# refused in one line, exit 2, before any path or URL is made of it (mpijob.jobspec.refs)
def check_namespace(namespace: str) -> str:
    if (why := refs.namespace_problem(namespace)) is not None:
        raise UsageError(f"-n/--namespace: {why}")
    return namespace


def check_job(name: str, namespace: str) -> str:
    """The namespace, once both are known valid."""
    if (why := refs.name_problem(name)) is not None:
        raise UsageError(f"NAME: {why}")
    return check_namespace(namespace)
