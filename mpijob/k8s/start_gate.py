"""The start gate: built-in jobs whose pods never start give their GPUs back with nobody
watching, through what Kubernetes itself enforces (docs/cleanup.md, "2c").

A worker stuck in ImagePullBackOff stays Pending for ever, and no field of a pod or of the
launcher Job can end it without also bounding the training. What Kubernetes does end is an
active pod of a Job past its `activeDeadlineSeconds`: the Job controller fails the Job and
deletes its active pods (pkg/controller/job/job_controller.go, syncJob: pastActiveDeadline
-> deleteActivePods), and the garbage collector then deletes every object whose owners are
all gone (pkg/controller/garbagecollector/garbagecollector.go, attemptToDeleteItem: an
object with no "solid" owner left is deleted).

So a built-in job gets a second Job, `<job>-start-gate` (owned by the launcher Job like
everything else), whose one pod probes the workers' sshd and exits 0 once all answer. The
worker pods are owned by that pod, not by the launcher Job:

- the workers start: the gate pod ends Succeeded before its deadline, the gate Job is
  Complete (no TTL: it stays), and the deadline no longer counts. The workers are never cut
  short by it;
- they do not (an unpullable image, the gate's own included): at the deadline the Job
  controller deletes the gate pod, and the garbage collector the workers.

The deadline counts from the gate Job's start (its creation); `submit` sets it once every
worker is scheduled, to the seconds that took plus --start-timeout, so that it counts from
scheduling as --start-timeout does. A job left queued by a gang scheduler gets none (the
queue may last for any time): there the start guard and `hvdk8s tidy` enforce
--start-timeout.

Pure: the rendered gate Job; `launcher.backends.kubernetes.start_gate` does the I/O.
"""

from __future__ import annotations

from mpijob import gang as gangs
from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.render import CONFIG_DIR, SSH_DIR, finish_pod, metadata, pod_common, pod_script
from mpijob.k8s.security import HOME_VOLUME, RUN_AS_HOME, container_security_context

# The gate runs ssh to each worker and sleeps: a sliver of a node, limits too for quotas.
GATE_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"},
                  "limits": {"cpu": "50m", "memory": "64Mi"}}
GATE_CONTAINER = "gate"


def applies(spec: JobSpec) -> bool:
    """Built-in jobs with a start timeout, whose worker pods may have an owner (KAI's
    podgrouper wants them without one: mpijob.gang.kai)."""
    if not spec.start_timeout:
        return False
    gang = gangs.get(spec.gang)
    return gang is None or "Pod" not in gang.unowned_kinds


def initial_deadline(spec: JobSpec, schedule_timeout: float | None) -> int | None:
    """The deadline the gate is created with: the most `submit` would set once the workers
    are scheduled (all of --schedule-timeout, then --start-timeout), so that a submit cut
    short before it sets the real one still leaves a bounded gate, and a dry run shows what
    is sent. None where a gang scheduler may queue the job for any time."""
    if spec.gang != "none" or not schedule_timeout:
        return None
    return deadline_seconds(spec.start_timeout, schedule_timeout)


def gate_job(spec: JobSpec, deadline: int | None = None, *, ssh_port: int) -> dict:
    """The gate's Job; `ssh_port`: the workers' sshd port, as the plan decided it."""
    labels = {names.LABEL_START_GATE: spec.name, names.LABEL_MANAGED_BY: names.MANAGED_BY}
    meta = metadata(spec, names.start_gate(spec.name))
    meta["labels"] = {**spec.labels, **labels}
    pod = pod_common(spec)
    pod.pop("schedulerName", None)  # the default scheduler places it, as the launcher
    pod.pop("hostNetwork", None)  # it listens on nothing
    pod.pop("dnsPolicy", None)
    if spec.service_account:  # its imagePullSecrets pull the image for the gate too
        pod["serviceAccountName"] = spec.service_account
    container = {
        "name": GATE_CONTAINER,
        "image": spec.image,  # the workers' image: one that does not pull stops it too
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["/bin/sh", "-c", pod_script("gate.sh")],
        "env": [{"name": "HVDK8S_SSH_PORT", "value": str(ssh_port)},
                {"name": "HVDK8S_SSH_DIR", "value": SSH_DIR},
                {"name": "HVDK8S_HOSTFILE", "value": f"{CONFIG_DIR}/hostfile"},
                # Elastic: the job has started once its minimum answers (the worker Job's
                # pods <job>-worker-<index>, from index 0).
                *([{"name": "HVDK8S_GATE_HOSTS", "value": " ".join(
                    f"{names.worker(spec.name, i)}.{names.service(spec.name)}" for i in
                    range(spec.min_size))}] if spec.elastic else [])],
        "resources": GATE_RESOURCES,
        "volumeMounts": [{"name": "hvdk8s-config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "hvdk8s-ssh", "mountPath": SSH_DIR, "readOnly": True}],
    }
    # The run-as home and security context, as every container of the job; no data mounts
    # nor --working-dir (it reads no data, and the directory may be on a volume it lacks).
    if spec.run_as_user is not None:
        container["env"] = [*container["env"], {"name": "HOME", "value": RUN_AS_HOME}]
        container["volumeMounts"] = [*container["volumeMounts"],
                                     {"name": HOME_VOLUME, "mountPath": RUN_AS_HOME}]
    if (ctx := container_security_context(spec)) is not None:
        container["securityContext"] = ctx
    volumes = [
        {"name": "hvdk8s-config", "configMap": {"name": names.config(spec.name)}},
        {"name": "hvdk8s-ssh", "secret": {"secretName": names.ssh_secret(spec.name),
                                          "defaultMode": 0o444}},
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            # One try: a gate that fails for its own reasons leaves the workers alone (a
            # failed pod is not deleted at the deadline, so it stays their owner).
            "backoffLimit": 0,
            **({"activeDeadlineSeconds": deadline} if deadline is not None else {}),
            "template": {
                "metadata": {"labels": labels},
                "spec": finish_pod(spec, {**pod, "restartPolicy": "Never",
                                          "containers": [container], "volumes": volumes},
                                   data=False),
            },
        },
    }


def is_gate(obj: dict) -> bool:
    return obj.get("kind") == "Job" and names.LABEL_START_GATE in (
        (obj.get("metadata") or {}).get("labels") or {})


def is_worker(obj: dict) -> bool:
    """A worker pod, or an elastic job's worker Job (mpijob.k8s.render_elastic): what the
    gate's pod owns, so created after the gate (mpijob.k8s.render_pods)."""
    return obj.get("kind") in ("Pod", "Job") and (
        (obj.get("metadata") or {}).get("labels") or {}).get(
        names.LABEL_ROLE) == names.ROLE_WORKER


def deadline_seconds(spec_start_timeout: int, seconds_to_schedule: float) -> int:
    """The gate's activeDeadlineSeconds, set once the workers are scheduled: counted from
    the gate's start, never shorter than --start-timeout after scheduling."""
    return int(seconds_to_schedule + 0.999) + spec_start_timeout
