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

from typing import TYPE_CHECKING

from launcher.backends.base import BaseBackend, ModeDecision, Prepared, SubmitOptions
from launcher.output import note
from launcher.preparing.planning import Plan
from mpijob.jobspec.ssh_port import free_ssh_port

if TYPE_CHECKING:  # types only: the models load when a job is rendered (lazy imports below)
    from mpijob.jobspec.spec import JobSpec
    from mpijob.k8s.render import SSHKeys
    from mpijob.k8s.workload import Workload
    from mpijob.perf.perfmodel import Assumptions
    from mpijob.scheduling.cluster import Cluster
    from mpijob.scheduling.placement import Placement


def render(
    spec: JobSpec,
    *,
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
    pod_monitor: bool = True,
) -> list[dict]:
    """The job's objects, the root first. Pure: the SSH keys and the benchmark sources come
    in as arguments; the root's uid is added at creation (mpijob.k8s.render.with_owner).
    `trainer_version`: the TrainJob API the cluster serves (None: the builder's own).
    `preflight_plan`: the preflight's expectations on the placement (None: the ranks of each
    pod only, nothing expected). `pod_monitor`: with --metrics-port, a PodMonitor for the
    launcher (False: the cluster has no PodMonitor CRD)."""
    objects = _render(spec, mode, placement, ssh, benchmark_source, elastic_source, prediction,
                      trainer_version, managed_by, gate_deadline, preflight_plan)
    if spec.metrics_port is not None and pod_monitor:
        from mpijob.k8s.monitor import pod_monitor as monitor_object

        objects.append(monitor_object(spec, mode))
    return objects


def _render(spec: JobSpec, mode: str, placement: Placement | None, ssh: SSHKeys | None,
            benchmark_source: str | None, elastic_source: str | None, prediction: dict | None,
            trainer_version: str | None, managed_by: str | None, gate_deadline: int | None,
            preflight_plan: dict | None) -> list[dict]:
    from mpijob.jobspec.defaults import MODES
    from mpijob.k8s.workload import workload

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    work = workload(spec, placement, mode)
    files = preflight_files(work, preflight_plan)
    if mode == "operator":
        from mpijob.k8s.render_operator import render_operator

        return render_operator(work, benchmark_source, prediction, managed_by, files)
    if mode == "trainjob":  # what a TrainJob cannot carry is refused there
        from mpijob.k8s.render_trainjob import render_trainjob

        version = {"version": trainer_version} if trainer_version else {}
        return render_trainjob(work, benchmark_source, prediction, managed_by=managed_by,
                               preflight_files=files, **version)
    from mpijob.k8s.render_pods import render_pods

    if ssh is None:
        raise ValueError("pods mode needs SSH keys")
    return render_pods(work, ssh, benchmark_source, prediction, elastic_source, gate_deadline, files)


def preflight_files(work: Workload, plan: dict | None) -> dict[str, str] | None:
    """The preflight's ConfigMap entries: its program, and its plan for these pods (the
    planned pods' expectations where the pods are the planned ones, made uniform where one
    template or an elastic start decides which pod runs where, none otherwise)."""
    import json

    from mpijob.k8s.command import PREFLIGHT_IN_POD, PREFLIGHT_PLAN_IN_POD
    from mpijob.k8s.render import pod_script
    from mpijob.perf import preflight

    spec = work.spec
    if not spec.runs_preflight:
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


class KubernetesObjects(BaseBackend):
    name = "offline"

    def plan(self, spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
             *, mode: ModeDecision | None = None) -> Plan:
        """The base plan, with what only Kubernetes decides: a TrainJob takes only what it
        can carry (and RDMA the nodes offer is advised with the modes that carry it), the
        Pod Security level RDMA devices must pass (pod_security_for), and on the host
        network an sshd port free on the job's nodes."""
        from launcher.preparing.planning import plan_job

        rdma_fix = None
        if mode is not None and mode.mode == "trainjob":  # auto takes what a TrainJob carries
            from mpijob.k8s.modes import other_modes
            from mpijob.k8s.render_trainjob import within_trainjob

            spec = within_trainjob(spec)
            rdma_fix = ("a TrainJob cannot carry RDMA devices; "
                        f"{other_modes(spec, 'trainjob', mode.installed, mode.gang_unserved)}")

        plan = plan_job(spec, cluster, assumptions,
                        pod_security=self.pod_security_for(spec, cluster), rdma_fix=rdma_fix)
        if plan.spec.host_network and cluster is not None:
            plan.spec = _free_host_ssh_port(plan.spec, cluster, plan.placement)
        return plan

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

    def prepare(self, plan: Plan, options: SubmitOptions) -> Prepared:
        """Render the job's objects, once; computed here without a call to anything."""
        # lazy: choosing a backend imports this module for every job command; SSH keys
        # (cryptography) load only to submit or dry-run
        from launcher.preparing.benchmark_program import benchmark_source, elastic_benchmark_source
        from launcher.preparing.sshkeys import generate_ssh_keys, placeholder_ssh_keys
        from mpijob.jobspec import defaults
        from mpijob.k8s.start_gate import initial_deadline

        spec = plan.spec
        keys = placeholder_ssh_keys if options.shown_only else generate_ssh_keys
        # The offline dry run's options carry no timeout: it shows submit's default.
        timeout = getattr(options, "schedule_timeout", defaults.SCHEDULE_TIMEOUT_SECONDS)
        objects = render(
            spec, mode=options.mode, placement=plan.placement,
            ssh=keys(comment=f"hvdk8s-{spec.name}") if options.mode == "pods" else None,
            benchmark_source=benchmark_source() if spec.runs_benchmark else None,
            elastic_source=elastic_benchmark_source() if spec.runs_benchmark and spec.elastic
            else None,
            prediction=plan.prediction.to_json() if plan.prediction is not None else None,
            trainer_version=options.trainer_version, managed_by=options.managed_by,
            gate_deadline=initial_deadline(spec, timeout),
            preflight_plan=plan.preflight, pod_monitor=options.pod_monitor)
        return Prepared(spec, plan, tuple(objects))


def _free_host_ssh_port(spec: JobSpec, cluster: Cluster, placement) -> JobSpec:
    """On the host network the job's sshd port is a port of its nodes: move it past ports
    the snapshot shows in use there (mpijob.jobspec.ssh_port)."""
    used_on = {a.node for a in placement.assignments} if placement is not None else None
    taken = {port for n in cluster.nodes if used_on is None or n.name in used_on
             for port in n.host_ports}
    if spec.ssh_port not in taken:
        return spec
    port = free_ssh_port(spec.namespace, spec.name, taken)
    note(f"note: --host-network: sshd port {spec.ssh_port} is in use on the job's nodes; "
         f"using {port}")
    return spec.model_copy(update={"ssh_port": port})
