"""What both Kubernetes backends share: the offline one, which a client dry run uses when no
cluster is asked anything, and the live one (launcher.backends.kubernetes.backend, which
extends this). The job's objects are rendered here, once: a dry run prints them and the
live backend's `submit` creates exactly them.

The job's pods are decided once (mpijob.k8s.workload: each worker's node, GPUs, requests,
claims and devices), then the builder of the job's mode turns them into objects, each
object whole:
- `pods`: built-in, no operator. The root is the launcher batch/v1 Job, created suspended
  so nothing runs before the gang is placed; a ConfigMap (hostfile and the in-pod scripts),
  an SSH Secret, a headless Service and one worker Pod per placed node follow, each owned
  by the root so that deleting the Job deletes the whole job (mpijob.k8s.render_pods).
  With a --start-timeout, a start gate Job whose pod owns the workers
  (mpijob.k8s.start_gate); an elastic job's workers are one Indexed Job instead
  (mpijob.k8s.render_elastic).
- `operator`: one kubeflow.org/v2beta1 MPIJob for the Kubeflow MPI Operator
  (mpijob.k8s.render_operator).
- `trainjob`: one trainer.kubeflow.org TrainJob for Kubeflow Trainer
  (mpijob.k8s.render_trainjob).

Light on purpose: a client dry run imports this, not the API client; the builders load
only to render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.backends.base import BaseBackend, ModeDecision, Prepared, SubmitOptions
from launcher.output import note
from launcher.preparing.planning import Plan
from mpijob.jobspec import defaults

if TYPE_CHECKING:  # types only: the models load when a job is rendered (lazy imports below)
    from mpijob.jobspec.decisions import Decisions
    from mpijob.jobspec.spec import JobSpec, Network
    from mpijob.k8s.render import SSHKeys
    from mpijob.k8s.trainer_progress import StatusEndpoint
    from mpijob.k8s.workload import Workload
    from mpijob.perf.perfmodel import Assumptions
    from mpijob.scheduling.cluster import Cluster
    from mpijob.scheduling.placement import Placement


def render(
    spec: JobSpec,
    *,
    decisions: Decisions | None = None,
    mode: str = "pods",
    placement: Placement | None = None,
    ssh: SSHKeys | None = None,
    benchmark_source: str | None = None,
    elastic_source: str | None = None,
    prediction: dict | None = None,
    trainer_version: str | None = None,
    managed_by: str | None = None,
    gate_deadline: int | None = None,
    preflight_plan: dict | None = None,
    trainer_status: StatusEndpoint | None = None,
    pod_monitor: bool = True,
) -> list[dict]:
    """The job's objects, the root first. Pure: the SSH keys and the benchmark sources come
    in as arguments; the root's uid is added at creation (mpijob.k8s.render.with_owner).
    `decisions`: the plan's (None: a spec rendered without a plan, what it names).
    `trainer_version`: the TrainJob API the cluster serves (None: the builder's own).
    `preflight_plan`: the preflight's expectations on the placement (None: the ranks of each
    pod only, nothing expected). `trainer_status`: a TrainJob's launcher posts its progress
    to Trainer's status endpoint there (None: the gate is off or unknown). `pod_monitor`:
    with --metrics-port, a PodMonitor for the launcher (False: the cluster has no
    PodMonitor CRD, or the job runs on another cluster)."""
    objects = _render(spec, decisions, mode, placement, ssh, benchmark_source, elastic_source,
                      prediction, trainer_version, managed_by, gate_deadline, preflight_plan,
                      trainer_status)
    if spec.metrics_port is not None and pod_monitor and not managed_by:
        from mpijob.k8s.monitor import pod_monitor as monitor_object

        objects.append(monitor_object(spec, mode))
    return objects


def _render(spec: JobSpec, decisions: Decisions | None, mode: str, placement: Placement | None,
            ssh: SSHKeys | None, benchmark_source: str | None, elastic_source: str | None,
            prediction: dict | None, trainer_version: str | None, managed_by: str | None,
            gate_deadline: int | None, preflight_plan: dict | None,
            trainer_status: StatusEndpoint | None) -> list[dict]:
    from mpijob.jobspec.defaults import MODES
    from mpijob.k8s.workload import workload

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    work = workload(spec, placement, mode, decisions)
    files = preflight_files(work, preflight_plan)
    if mode == "operator":
        from mpijob.k8s.render_operator import render_operator

        return _only_the_root(spec, managed_by, render_operator(
            work, benchmark_source, prediction, managed_by, files))
    if mode == "trainjob":  # what a TrainJob cannot carry is refused there
        from mpijob.k8s.render_trainjob import render_trainjob

        version = {"version": trainer_version} if trainer_version else {}
        return _only_the_root(spec, managed_by, render_trainjob(
            work, benchmark_source, prediction, managed_by=managed_by, preflight_files=files,
            trainer_status=trainer_status, **version))
    from mpijob.k8s.render_pods import render_pods

    if ssh is None:
        raise ValueError("pods mode needs SSH keys")
    return render_pods(work, ssh, benchmark_source, prediction, elastic_source, gate_deadline, files)


def _only_the_root(spec: JobSpec, managed_by: str | None, objects: list[dict]) -> list[dict]:
    """A job sent to another cluster (MultiKueue: Kueue copies only the job object there)
    must need nothing else hvdk8s would create here; its files travel in its pods
    (mpijob.k8s.pod_files), and what cannot is refused before anything is created."""
    from mpijob.errors import SpecError
    from mpijob.jobspec.spec import option_of

    if not managed_by or len(objects) == 1:
        return objects
    kinds = sorted({o["kind"] for o in objects[1:]})
    dra = ", or --gpu-request device-plugin" if "ResourceClaimTemplate" in kinds else ""
    raise SpecError("queue", (
        f"{spec.queue} dispatches through Kueue's MultiKueue, which copies only the "
        f"{objects[0]['kind']} to the worker cluster, but this job also needs "
        f"{' and '.join(kinds)}, which hvdk8s would create here; use a queue that runs its "
        f"jobs in this cluster{dra}"), option_of("queue"))


def preflight_files(work: Workload, plan: dict | None) -> dict[str, str] | None:
    """The preflight's ConfigMap entries: its program, and its plan for these pods (the
    planned pods' expectations where the pods are the planned ones, made uniform where one
    template or an elastic start decides which pod runs where, none otherwise)."""
    import json

    from mpijob.k8s.command import PREFLIGHT_IN_POD, PREFLIGHT_PLAN_IN_POD
    from mpijob.k8s.render import pod_script
    from mpijob.perf import preflight

    spec = work.spec
    if not work.decisions.runs_preflight:
        return None
    source = pod_script(PREFLIGHT_IN_POD.rsplit("/", 1)[1])
    if work.shape is not None:  # one template: which worker lands on which node is the operator's
        slots = [work.shape.slots] * work.shape.replicas
        plan = preflight.for_template(plan, slots) if plan else None
    else:
        slots = [p.slots for p in work.workers]
        if spec.elastic and plan:
            plan = preflight.for_elastic(plan, spec.gpus_per_worker)
    if plan is None or (not spec.elastic and [p["slots"] for p in plan["pods"]] != slots):
        plan = preflight.plain_plan(slots, gpus=spec.gpus_per_worker > 0)
    return {PREFLIGHT_IN_POD.rsplit("/", 1)[1]: source,
            PREFLIGHT_PLAN_IN_POD.rsplit("/", 1)[1]: json.dumps(plan, indent=1, sort_keys=True) + "\n"}


@dataclass(frozen=True)
class KubernetesOptions(SubmitOptions):
    """Submit options of the Kubernetes backend (the offline dry run's too, where what only
    the cluster can say keeps its default)."""

    server_dry_run: bool = False  # --dry-run=server: the API server validates, creates nothing
    # all workers scheduled within
    schedule_timeout: float | None = defaults.SCHEDULE_TIMEOUT_SECONDS
    # On schedule timeout: None deletes the job unless a gang scheduler holds it (queued).
    delete_on_timeout: bool | None = None
    # Trainer mode: where its status server answers, its TrainJobStatus gate on (the
    # launcher posts there); else None and why, said once at submit.
    trainer_status: StatusEndpoint | None = None
    trainer_status_off: str | None = None


class KubernetesObjects(BaseBackend):
    name = "offline"

    def plan(self, spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
             *, mode: ModeDecision | None = None) -> Plan:
        """The base plan, with what only Kubernetes decides: a TrainJob takes only what it
        can carry (and RDMA the nodes offer is advised with the modes that carry it), the
        Pod Security level RDMA devices must pass (pod_security_for), each Multus network's
        device resource (networks_for) and on the host network an sshd port free on the
        job's nodes."""
        from launcher.preparing.planning import plan_job
        from mpijob.jobspec.decisions import Choices

        rdma_fix = choices = None
        if mode is not None and mode.mode == "trainjob":  # auto takes what a TrainJob carries
            from mpijob.k8s.modes import other_modes
            from mpijob.k8s.render_trainjob import within_trainjob

            choices = within_trainjob(spec)
            rdma_fix = ("a TrainJob cannot carry RDMA devices; "
                        f"{other_modes(spec, 'trainjob', mode.installed, mode.gang_unserved)}")
        if (spec.gpu_request == "auto" and cluster is not None
                and (mode is None or mode.mode != "pods")  # pods: MultiKueue takes no pods
                and any(n.dra_devices for n in cluster.nodes) and self.sent_away(spec)):
            # a DRA claim template would stay here: only the job travels (_only_the_root)
            choices = Choices((choices or Choices.of(spec)).rdma, "device-plugin")
            note("note: --gpu-request auto: the device plugin's GPUs, not DRA: Kueue's "
                 "MultiKueue copies only the job to the worker cluster, no claim template")
        return plan_job(spec, cluster, assumptions,
                        pod_security=self.pod_security_for(spec, cluster), rdma_fix=rdma_fix,
                        choices=choices, networks=self.networks_for(spec), host_ssh_port=True)

    def networks_for(self, spec: JobSpec) -> tuple[Network, ...]:
        """--network: each NetworkAttachmentDefinition with the device resource it names;
        offline nothing is read, so none is known."""
        return spec.networks

    def dry_run_notes(self, prepared: Prepared, options: SubmitOptions) -> list[str]:
        """Built-in mode: the ownerReferences a dry run cannot show (the root's uid does not
        exist yet)."""
        objects = prepared.objects
        if options.mode != "pods" or not objects or objects[0].get("kind") != "Job":
            return []
        from mpijob.jobspec import names

        gated = any(o.get("kind") == "Job" and names.LABEL_START_GATE in
                    (o["metadata"].get("labels") or {}) for o in objects)
        return [f"at creation every object gets an ownerReference to Job/{objects[0]['metadata']['name']} "
                "(its uid is assigned by the API server)"
                + (", but the workers, which get one to the start gate's pod "
                   "(docs/cleanup.md)" if gated else "")]

    def pod_security_for(self, spec: JobSpec, cluster: Cluster | None) -> str | None:
        """The Pod Security level of the job's namespace, where planning needs it; offline
        nothing is read."""
        return None

    def sent_away(self, spec: JobSpec) -> bool:
        """Whether the job's queue sends it to another cluster (MultiKueue); offline
        nothing is read."""
        return False

    def submit_options(self, *, mode: defaults.Mode, server_dry_run: bool,
                       schedule_timeout: float | None) -> KubernetesOptions:
        # Offline nothing says what the cluster has: auto shows built-in mode.
        return KubernetesOptions(mode="pods" if mode == "auto" else mode)

    def prepare(self, plan: Plan, options: SubmitOptions) -> Prepared:
        """Render the job's objects, once; computed here without a call to anything."""
        assert isinstance(options, KubernetesOptions), options  # this backend's submit_options
        # lazy: choosing a backend imports this module for every job command; SSH keys
        # (cryptography) load only to submit or dry-run
        from launcher.preparing.benchmark_program import benchmark_source, elastic_benchmark_source
        from launcher.preparing.sshkeys import generate_ssh_keys, placeholder_ssh_keys
        from mpijob.k8s.start_gate import initial_deadline

        spec = plan.spec
        keys = placeholder_ssh_keys if options.shown_only else generate_ssh_keys
        timeout = options.schedule_timeout
        objects = render(
            spec, decisions=plan.decisions, mode=options.mode, placement=plan.placement,
            ssh=keys(comment=f"hvdk8s-{spec.name}") if options.mode == "pods" else None,
            benchmark_source=benchmark_source() if spec.runs_benchmark else None,
            elastic_source=elastic_benchmark_source() if spec.runs_benchmark and spec.elastic
            else None,
            prediction=plan.prediction.to_json() if plan.prediction is not None else None,
            trainer_version=options.trainer_version, managed_by=options.managed_by,
            gate_deadline=initial_deadline(spec, timeout),
            preflight_plan=plan.preflight, pod_monitor=options.pod_monitor,
            # read at submit (the live backend's job_options); offline nothing is read
            trainer_status=options.trainer_status)
        return Prepared(spec, plan, tuple(objects))
