"""Submitting to Kubernetes: preflight (refuse what the cluster cannot take, re-check
capacity), admit (what admission would refuse, asked first), submit (create all or
nothing), the start gate's release once the workers are scheduled, and rollback.

Writes: `submit` creates the job's objects (nothing with --dry-run=server), patches the
launcher Job to start it, and deletes what it created when it fails or times out."""

from __future__ import annotations

import builtins
import dataclasses
import sys
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from launcher.backends.base import Prepared, SubmitResult
from launcher.backends.kubernetes import gang as gang_control
from launcher.backends.kubernetes import operator_schema
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.admission_check import (
    check_admission,
    webhook_wants_earlier_object,
)
from launcher.backends.kubernetes.apply import (
    create,
    delete_job_objects,
    find_job_objects,
    new_submission_id,
)
from launcher.backends.kubernetes.client import (
    EVENT,
    JOB,
    MPIJOB,
    NAMESPACE,
    POD,
    POD_MONITOR,
    RESOURCE_SLICE,
    ApiError,
)
from launcher.backends.kubernetes.connection import _api_errors
from launcher.backends.kubernetes.rendering import KubernetesOptions
from launcher.backends.kubernetes.snapshot import (
    UNSCHEDULABLE_TAINT,
    SnapshotUnreadable,
    build_snapshot,
    network_label_keys,
    planned_nodes_view,
    take_snapshot,
)
from launcher.backends.kubernetes.start_gate import GatedCreation
from launcher.backends.kubernetes.watching import JobWatch
from launcher.errors import NotFound, Refused, UsageError, UserError
from launcher.output import note
from launcher.preparing.planning import Plan
from launcher.timestamps import parse_utc
from mpijob import gang as gangs
from mpijob.jobspec import defaults, names

if TYPE_CHECKING:  # types only: the models load when a job is planned or rendered
    from mpijob.jobspec.spec import JobSpec
    from mpijob.k8s.modes import Installed
from launcher.backends.kubernetes.observe import Observing

OPERATOR_MISSING = ("--mode operator: the Kubeflow MPI Operator is not installed (no kubeflow.org/v2beta1 MPIJob "
                    "in the API); install it, or use --mode pods")


DEFAULT_SCHEDULE_TIMEOUT = defaults.SCHEDULE_TIMEOUT_SECONDS


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "?"
    try:
        then = parse_utc(timestamp)
    except ValueError:
        return "?"
    seconds = max(0, int((datetime.now(timezone.utc) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"



class Submitting(Observing):
    @_api_errors
    def submit_options(self, *, mode: defaults.Mode, server_dry_run: bool,
                       schedule_timeout: float | None) -> KubernetesOptions:
        """`mode` as chosen (mpijob.k8s.modes); trainer mode speaks the newest Trainer API
        version served."""
        kind = trainer.trainjob_kind(self.client) if mode == "trainjob" else None
        version = kind.api_version.rsplit("/", 1)[1] if kind else "v1alpha1"
        return KubernetesOptions(mode=mode, server_dry_run=server_dry_run,
                                 schedule_timeout=schedule_timeout, trainer_version=version)

    @_api_errors
    def installed_modes(self, spec: JobSpec) -> Installed:
        """What the cluster serves for each mode (API discovery, cached) and whether
        hvdk8s's Trainer runtime for the job's image is there: --mode auto's inputs."""
        from mpijob.k8s.modes import Installed

        has_trainer = trainer.trainjob_kind(self.client) is not None
        return Installed(operator=self.client.serves(MPIJOB), trainer=has_trainer,
                         runtime_problem=trainer.runtime_problem(self.client, spec)
                         if has_trainer else None)

    @_api_errors
    def job_options(self, spec: JobSpec, options: KubernetesOptions) -> KubernetesOptions:
        """A Kueue queue whose ClusterQueue dispatches through MultiKueue: the job is
        created for Kueue to copy to a worker cluster (managedBy), not run here. A TrainJob
        run here: whether its launcher posts progress to Trainer's status endpoint. With
        --metrics-port, whether a PodMonitor can go with it (the cluster serves its CRD)."""
        from launcher.backends.kubernetes import multikueue

        if (spec.queue and options.mode != "pods"
                and getattr(gangs.get(spec.gang), "multicluster", False)):
            manager = multikueue.manager_for(self.client, spec.queue, spec.namespace)
            if manager:
                options = dataclasses.replace(options, managed_by=manager)
        if spec.metrics_port is not None and (options.managed_by
                                              or not self.client.serves(POD_MONITOR)):
            options = dataclasses.replace(options, pod_monitor=False)
        if options.mode != "trainjob":
            return options
        if options.managed_by:
            return dataclasses.replace(options, trainer_status_off=(
                "the worker cluster MultiKueue picks runs it, whose Trainer config hvdk8s "
                "does not read"))
        from launcher.backends.kubernetes.trainer_config import status_endpoint

        endpoint, why = status_endpoint(self.client)
        return dataclasses.replace(options, trainer_status=endpoint, trainer_status_off=why)

    @_api_errors
    def sent_away(self, spec: JobSpec) -> bool:
        from launcher.backends.kubernetes import multikueue

        return bool(spec.queue and getattr(gangs.get(spec.gang), "multicluster", False)
                    and multikueue.manager_for(self.client, spec.queue, spec.namespace))

    @_api_errors
    def preflight(self, plan: Plan, options: KubernetesOptions) -> tuple[Plan, builtins.list[str]]:
        """`_preflight`, and a note where --metrics-port gets no PodMonitor."""
        plan, notes = self._preflight(plan, options)
        port = plan.spec.metrics_port
        if port is not None and not options.pod_monitor:
            why = ("Kueue's MultiKueue runs the job on a worker cluster" if options.managed_by
                   else f"no PodMonitor CRD ({POD_MONITOR.api_version}) in the cluster")
            notes = [*notes, f"{why}: the launcher serves /metrics on port {port}, and no "
                     "PodMonitor is created"]
        return plan, notes

    def _preflight(self, plan: Plan, options: KubernetesOptions) -> tuple[Plan, builtins.list[str]]:
        """Refuse what the cluster cannot take (no MPI Operator, a gang scheduler missing or
        misconfigured, the name taken) and, without a gang scheduler, re-check capacity on a
        fresh snapshot: keep the plan if it still fits, else place again."""
        spec, client = plan.spec, self.client
        self._require_namespace(spec.namespace)
        said = ([f"Kubeflow Trainer progress is off for this job: {options.trainer_status_off}; "
                 "hvdk8s get reads progress from the launcher's log"]
                if options.mode == "trainjob" and options.trainer_status_off else [])
        if options.managed_by and (options.mode == "trainjob" or spec.runs_benchmark
                                   or plan.decisions.runs_preflight):
            said.append("Kueue's MultiKueue copies only the job to the worker cluster: its pods "
                        "carry their files (under /etc/hvdk8s) in their annotations, not in a "
                        "ConfigMap (mpijob/k8s/pod_files.py)")
        if options.mode == "operator" and not client.serves(MPIJOB):
            raise UsageError(OPERATOR_MISSING)
        if options.mode == "trainjob":  # the runtime the TrainJob names exists and fits
            trainer.require_runtime(client, spec)
            if options.managed_by:  # and where MultiKueue runs it
                said += self._worker_runtime(spec)
        # lazy: choosing a backend imports this module for every job command; rendering, SSH keys
        # and placement (pydantic models, cryptography: ~25 ms) load only to submit or plan
        from mpijob.k8s.gang import refusal

        if (why := refusal(spec.gang, options.mode)) is not None:
            raise UsageError(why)
        gang = gang_control.control(spec.gang)
        if gang:
            gang.require(client, spec, options.mode)
        self._refuse_existing(spec.name, spec.namespace)
        # lazy: its volume models load pydantic (~85 ms), which list/get/wait/logs never need
        from launcher.backends.kubernetes.volumes import check_claims

        if options.server_dry_run or gang or (plan.placement is None and not spec.gpus_per_worker):
            check_claims(client, spec, plan.placement, options.mode)
            return plan, said
        placement, notes = self._recheck_capacity(spec, plan.placement)
        # --data: each claim must exist and its access modes allow the final placement, or
        # the pods would wait on a volume that never attaches
        check_claims(client, spec, placement, options.mode)
        return dataclasses.replace(plan, placement=placement), [*said, *notes]

    @_api_errors
    def multikueue_target(self, queue: str, namespace: str) -> tuple[str | None, str | None]:
        """(the context to plan on, what to say) for a Kueue queue that dispatches through
        MultiKueue: its only worker cluster where the kubeconfig has that context, else
        none (the job runs where Kueue admits it, unknown until then); (None, None) for a
        queue that runs jobs here."""
        from launcher.backends.kubernetes import multikueue
        from launcher.backends.kubernetes.kubeconfig import context_names

        clusters = multikueue.worker_clusters(self.client, queue, namespace)
        if clusters is None:
            return None, None
        if len(clusters) == 1 and clusters[0] in context_names(self._kubeconfig):
            return clusters[0], (f"--queue {queue} dispatches through Kueue's MultiKueue to "
                                 f"its only worker cluster {clusters[0]}: planned there "
                                 f"(context {clusters[0]})")
        seen = ("" if len(clusters) != 1 else
                f"; no kubeconfig context {clusters[0]} shows its nodes")
        return None, (f"--queue {queue} dispatches through Kueue's MultiKueue: the job runs on "
                      "the worker cluster Kueue admits it on"
                      + (f" ({', '.join(clusters)})" if clusters else "") + seen
                      + ", so no placement is planned (that cluster's scheduler places it)")

    def _worker_runtime(self, spec: JobSpec) -> builtins.list[str]:
        """A TrainJob MultiKueue dispatches runs on the worker cluster's Trainer, which
        needs the runtime there too (Kueue copies only the TrainJob): refused where the
        only worker cluster, seen through its kubeconfig context, lacks it; else said."""
        worker, _ = self.multikueue_target(spec.queue, spec.namespace)
        if worker is None:
            from mpijob.k8s.render_trainjob import runtime_name

            return [f"the worker cluster Kueue's MultiKueue picks needs ClusterTrainingRuntime "
                    f"{runtime_name(spec)} (hvdk8s install runtime --context <cluster>); not "
                    "checked: hvdk8s sees no single worker cluster"]
        remote = type(self)(worker, spec.namespace, kubeconfig=self._kubeconfig, poll=self.poll)
        why = trainer.runtime_problem(remote.client, spec, context=worker)
        if why is not None:
            raise Refused(f"MultiKueue worker cluster {worker} (context {worker}), where this "
                          f"TrainJob runs: {why}")
        return []

    @_api_errors
    def admit(self, prepared: Prepared, options: KubernetesOptions, *,
              dry_run: bool = False) -> builtins.list[str]:
        return self._admit(prepared, options, create_optional=dry_run)

    def _admit(self, prepared: Prepared, options: KubernetesOptions, *,
               create_optional: bool = False) -> builtins.list[str]:
        """What the cluster would refuse of these objects, asked before any is created.
        `create_optional`: a user who may not create pods (a client dry run) is told the
        admission chain went unasked, instead of being refused."""
        spec, objects, client = prepared.spec, prepared.objects, self.client
        if options.mode == "operator":  # an operator too old for a field would drop it silently
            operator_schema.check(client, objects[0])
        # Pod Security, quotas, LimitRanges: refused now, not after half the job exists.
        pods = (trainer.expected_pods(trainer.require_runtime(client, spec), objects[0])
                if options.mode == "trainjob" else None)
        return check_admission(client, spec, objects, options.mode, pods=pods,
                               create_optional=create_optional)

    @_api_errors
    def submit(self, prepared: Prepared, options: KubernetesOptions) -> SubmitResult:
        """Create exactly the prepared objects, all or nothing (module docstring). With a gang
        scheduler the job is left queued on timeout unless `options.delete_on_timeout`;
        without one it is deleted."""
        spec, objects, client = prepared.spec, prepared.objects, self.client
        ns, mode = spec.namespace, options.mode
        gang = gang_control.control(spec.gang)
        if not prepared.admitted:
            self._admit(prepared, options)
        submission = new_submission_id()
        if options.server_dry_run:
            made = [self._dry_run_create(obj, submission) for obj in objects]
            return SubmitResult(spec.name, ns, self.name, made,
                                f"server dry run: {len(made)} object(s) accepted by the API "
                                "server, nothing created")
        created: builtins.list[dict] = []
        try:
            from mpijob.k8s.render import with_owner

            # The root first; everything else (the MPIJob's ConfigMap and PodGroup too) is
            # owned by it, so the garbage collector follows the root wherever it goes.
            root = create(client, objects[0], submission)
            created.append(root)
            unowned = gang.scheduler.unowned_kinds if gang else ()
            # Built-in mode: the workers are owned by the start gate's pod (start_gate.py).
            gate = GatedCreation(client, ns, spec.start_timeout)
            for obj in with_owner(list(objects), root["metadata"]["uid"], unowned)[1:]:
                created.append(create(client, gate.owned(obj), submission))
                gate.created(created[-1])
            if options.managed_by:  # MultiKueue: Kueue runs it on a worker cluster
                outcome: str | UserError = (
                    f"{root['kind']} {spec.name} created for Kueue's MultiKueue (queue "
                    f"{spec.queue}): Kueue copies it to the worker cluster it admits it on; "
                    f"hvdk8s get {spec.name} -n {ns} follows it there")
            elif mode == "operator":  # the operator makes the pods and starts the launcher
                outcome = (
                    gang.operator_created(client, root, spec, options.schedule_timeout or 30.0,
                                          self.poll) if gang else
                    f"MPIJob {spec.name} created; the MPI operator creates its pods")
            elif mode == "trainjob":  # Trainer makes the JobSet, which makes the pods
                outcome = self._trainjob_created(spec, gang, options)
            else:
                outcome = self._release_when_scheduled(spec, gang, options.schedule_timeout,
                                                       options.delete_on_timeout, gate)
        except ApiError as exc:
            self._rollback(spec.name, ns, created)
            if exc.already_exists and not created:  # a concurrent submit won the name
                self._refuse_existing(spec.name, ns)
            if exc.already_exists:
                raise UserError(
                    f"cannot create {exc.resource} {exc.name} in namespace {ns}: it already "
                    f"exists and is not part of job {spec.name}; choose another --name or "
                    "delete that object") from None
            raise exc.user_error() from None
        except BaseException:  # Ctrl-C included: leave nothing half-made behind
            self._rollback(spec.name, ns, created)
            raise
        if isinstance(outcome, UserError):
            raise outcome
        return SubmitResult(spec.name, ns, self.name, created, f"job {spec.name}: {outcome}")

    def _dry_run_create(self, obj: dict, submission: str) -> dict:
        """One object sent with dryRun=All; where a webhook wants an object this job creates
        before it (a dry run made none), the object as sent, said in a note."""
        try:
            return create(self.client, obj, submission, dry_run=True)
        except ApiError as exc:
            if not webhook_wants_earlier_object(exc):
                raise
            note(f"note: {obj['kind']} {obj['metadata']['name']}: not dry-run by the server: "
                 f"its webhook looks up an object of this job that a dry run does not create "
                 f"({exc.message})")
            return obj

    def _require_namespace(self, ns: str) -> None:
        """-n names a namespace that exists (where namespaces can be read)."""
        try:
            found = self.client.get(NAMESPACE, ns)
        except ApiError as exc:
            if exc.status == 403:  # no get on namespaces: the create says
                return
            raise
        if found is None:
            raise UsageError(f"-n/--namespace {ns}: no namespace {ns} in this cluster "
                             "(kubectl get namespaces)")

    def _refuse_existing(self, name: str, ns: str) -> None:
        """A name in use (or leftovers of it) fails before anything is created."""
        found = find_job_objects(self.client, name, ns, limit=1)
        if not found:
            root = self.client.get(JOB, names.launcher(name), ns)
            if root is not None:
                raise Refused(f"a Job named {names.launcher(name)} that is not an hvdk8s job "
                                f"exists in namespace {ns}; choose another --name")
            return
        oldest = min(found, key=lambda o: o["metadata"].get("creationTimestamp") or "")
        try:
            phase = self._status(name, ns).phase
        except NotFound:
            phase = "partially deleted"
        raise Refused(
            f"job {name} already exists in namespace {ns} (created "
            f"{_age(oldest['metadata'].get('creationTimestamp'))} ago, phase {phase}); "
            f"delete it first: hvdk8s delete {name} -n {ns}")

    def _recheck_capacity(self, spec, placement):
        """Right before creating, the planned nodes read fresh (the plan came from the API
        server's cache): keep the plan if it still fits, else re-place on a fresh snapshot;
        refuse with the placer's reason when nothing fits any more."""
        from mpijob.scheduling.placement import PlacementRequest, place

        notes: list[str] = []
        if placement is not None and placement.feasible:
            stale = self._planned_nodes_conflict(spec, placement)
            if not stale:
                return placement, notes
            notes.append(f"the plan went stale ({stale}); placed again")
        try:
            snap = take_snapshot(self.client, spec.namespace, gpu_nodes_only=True)
        except SnapshotUnreadable:
            return placement, []  # said at plan time; the scheduler has the last word
        notes = [*snap.notes, *notes]
        fresh = place(snap.cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)
        if not fresh.feasible:
            raise Refused(f"job {spec.name} does not fit the cluster now: {fresh.reason}"
                            + "".join(f"; {n}" for n in notes))
        return dataclasses.replace(fresh, explanation=(*fresh.explanation, *notes)), notes

    def _planned_nodes_conflict(self, spec, placement) -> str | None:
        """Why the plan no longer fits its nodes as they are now, or None."""
        if self.client.serves(RESOURCE_SLICE):
            # GPUs held through DRA claims are known only from every slice and claim.
            try:
                snap = take_snapshot(self.client, spec.namespace, gpu_nodes_only=True)
            except SnapshotUnreadable:
                return None
            return _plan_conflicts(snap.cluster, placement, spec)
        try:
            nodes, pods = planned_nodes_view(self.client, [a.node for a in placement.assignments])
        except ApiError as exc:
            if exc.status != 403:
                raise
            return None  # said at plan time; the scheduler has the last word
        return _plan_conflicts(build_snapshot(nodes, pods, label_keys=network_label_keys()).cluster,
                               placement, spec)

    def _trainjob_created(self, spec, gang, options: KubernetesOptions) -> str | UserError:
        """Kueue holds a queued TrainJob suspended until it admits it whole; without a gang
        scheduler hvdk8s's own all-or-nothing check applies: every node pod scheduled
        within the timeout (the launcher, a node too, starts once they are Ready: the
        runtime's dependsOn), else the job is deleted."""
        if gang:
            return (f"TrainJob {spec.name} created, queued in {gang.scheduler.title} "
                    f"{spec.queue}: Trainer makes its pods once admitted (hvdk8s get "
                    f"{spec.name} -n {spec.namespace} says why it waits)")
        name, ns, timeout = spec.name, spec.namespace, options.schedule_timeout
        unscheduled = self._await_scheduled(name, ns, timeout)
        if not unscheduled:
            return ("all node pods scheduled; Kubeflow Trainer starts the launcher once they "
                    "are Ready" + self._where(name, ns))
        why = self._unscheduled_reasons(ns, unscheduled)
        delete_job_objects(self.client, name, ns, grace_seconds=0)
        return UserError(f"node pods not scheduled within {timeout or DEFAULT_SCHEDULE_TIMEOUT:g}s: "
                         f"{why}; job {name} was deleted (all or nothing: no pod keeps GPUs "
                         "while the others wait)")

    def _release_when_scheduled(self, spec, gang, timeout, delete_on_timeout,
                                gate: GatedCreation | None = None) -> str | UserError:
        """Wait for the workers to be scheduled, then release the launcher (and set the
        start gate's deadline: from now on --start-timeout counts)."""
        client, ns, name = self.client, spec.namespace, spec.name
        unscheduled = self._await_scheduled(name, ns, timeout,
                                            spec.min_size if spec.elastic else None)
        if not unscheduled:
            if gate is not None:
                gate.arm()
            client.patch(JOB, names.launcher(name), {"spec": {"suspend": False}}, ns)
            # The launcher Job is unsuspended: its pod still has to pull and start.
            return "all workers scheduled; launcher released" + self._where(name, ns)
        why = self._unscheduled_reasons(ns, unscheduled)
        summary = f"workers not scheduled within {timeout:g}s: {why}"
        delete = delete_on_timeout if delete_on_timeout is not None else not gang
        if delete:
            delete_job_objects(client, name, ns, grace_seconds=0)
            return UserError(f"{summary}; job {name} was deleted (all or nothing: no worker "
                             "keeps GPUs while the others wait)")
        # The gang scheduler binds the whole group at once, so waiting holds no GPUs; the
        # launcher is released now and waits (HVDK8S_WORKER_WAIT_SECONDS) for the workers.
        client.patch(JOB, names.launcher(name), {"spec": {"suspend": False}}, ns)
        return (f"queued by {gang.scheduler.title}: {summary}; the gang starts when it fits "
                f"(hvdk8s delete {name} -n {ns} to give up)")

    def _where(self, name: str, ns: str) -> str:
        pods = self.client.items(POD, ns, label_selector=f"{names.job_selector(name)},"
                                 f"{names.LABEL_ROLE}={names.ROLE_WORKER}")
        parts = []
        for p in sorted(pods, key=st.pod_index):
            r = st.replica(p)
            parts.append(f"{r.name} on {r.node}" + (f" GPUs {','.join(map(str, r.gpus))}"
                                                     if r.gpus else ""))
        return f" ({'; '.join(parts)})" if parts else ""

    def _await_scheduled(self, name: str, ns: str, timeout: float | None,
                         enough: int | None = None) -> builtins.list[dict]:
        """Worker pods still unscheduled when the time is up (empty: all scheduled, or
        `enough` of them: an elastic job's minimum)."""
        selector = f"{names.job_selector(name)},{names.LABEL_ROLE}={names.ROLE_WORKER}"
        deadline = time.monotonic() + (timeout if timeout is not None else DEFAULT_SCHEDULE_TIMEOUT)
        # A watch on the workers (watching.py) wakes at the scheduler's last binding, where a
        # poll answered up to an interval later and listed the workers each time.
        with JobWatch(self.client, ns, selector, (POD,),
                      watch_timeout=self.watch_timeout) as seen:
            while True:
                pods = seen.of(POD).items()
                waiting = [p for p in pods if not st.is_scheduled(p)]
                if pods and not waiting:
                    return []
                if enough is not None and len(pods) - len(waiting) >= enough:
                    return []
                left = deadline - time.monotonic()
                if left <= 0:
                    return waiting or pods
                seen.wait(left)

    def _unscheduled_reasons(self, ns: str, pods: builtins.list[dict]) -> str:
        events = self.client.items(EVENT, ns, field_selector="involvedObject.kind=Pod,"
                                   "reason=FailedScheduling")
        parts = []
        for p in sorted(pods, key=st.pod_index):
            parts.append(f"{p['metadata']['name']}: "
                         f"{st.unscheduled_reason(p, events) or 'no scheduler decision yet'}")
        return "; ".join(parts) or "no worker pods were created"

    def _rollback(self, name: str, ns: str, created: builtins.list[dict]) -> None:
        if not created:
            return
        try:
            delete_job_objects(self.client, name, ns, grace_seconds=0, wait_seconds=30)
        except (ApiError, UserError) as exc:
            print(f"warning: rollback of job {name} incomplete ({exc}); run: hvdk8s delete "
                  f"{name} -n {ns}", file=sys.stderr)


def _plan_conflicts(cluster, placement, spec) -> str | None:
    """Why a plan no longer fits the fresh snapshot, or None when it still does: the node
    screening placement itself uses (mpijob.scheduling.placement), then the planned GPUs."""
    from mpijob.scheduling.placement import PlacementRequest, room_by_resources, screen_node

    request = PlacementRequest.from_spec(spec)
    workers_on: dict[str, int] = {}
    for a in placement.assignments:
        workers_on[a.node] = workers_on.get(a.node, 0) + a.workers
    taken: dict[str, set[int]] = {}
    for a in placement.assignments:
        try:
            node = cluster.node(a.node)
        except KeyError:
            return f"node {a.node} is gone"
        verdict = screen_node(node, request)
        if verdict.blocked == "not-ready":
            return f"node {a.node} is not Ready"
        if verdict.blocked == "selector":
            return f"node {a.node} no longer matches --selector"
        if verdict.blocked == "taint" and verdict.taint is not None:
            key = verdict.taint.key
            what = "cordoned" if key == UNSCHEDULABLE_TAINT else f"tainted {key}"
            return f"node {a.node} is {what}"
        busy = set(a.gpus) & (set(node.allocated) | taken.setdefault(a.node, set()))
        if busy:
            return f"GPU(s) {','.join(map(str, sorted(busy)))} of {a.node} are taken now"
        taken[a.node] |= set(a.gpus)
        by_cpu, by_mem = room_by_resources(node, request)
        if by_cpu is not None and by_cpu < workers_on[a.node]:
            return f"node {a.node} has {node.free_cpu:g} free CPUs now"
        if by_mem is not None and by_mem < workers_on[a.node]:
            return f"node {a.node} has {node.free_memory / 2**30:.3g}Gi of free memory now"
    return None
