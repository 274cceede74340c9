"""Before anything is created: would the namespace's admission take the job's pods?

Every pod the job will have is sent with server-side dry run (`dryRun=All`): the API
server runs the whole admission chain (LimitRange defaults, Pod Security, ResourceQuota,
webhooks) and stores nothing. In operator mode these are the pods the MPI Operator will
make from the MPIJob's templates. A dry run checks one pod at a time, so a quota that
holds one worker but not the whole job would pass; the pods' usage (with the LimitRange
defaults the dry run filled in) is then summed against each ResourceQuota's headroom
(status.hard - status.used), which is how the quota admission counts
(k8s.io/apiserver/pkg/admission/plugin/resourcequota, pkg/quota/v1/evaluator/core/pods.go).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal

from launcher.backends.kubernetes.client import RESOURCE_QUOTA, ApiError
from launcher.backends.kubernetes.references import check_references
from launcher.errors import UsageError
from launcher.output import note
from mpijob.jobspec import names
from mpijob.jobspec.quantity import QuantityError, parse_quantity

_STANDARD = ("cpu", "memory")
_LEVEL = re.compile(r'violates PodSecurity "(\w+):')


def job_pods(objects: Sequence[dict], mode: str) -> list[tuple[dict, int]]:
    """The pods the job will have, each with how many alike it stands for."""
    out: list[tuple[dict, int]] = []
    if mode == "operator":
        mpijob = objects[0]
        for role, spec in (mpijob["spec"].get("mpiReplicaSpecs") or {}).items():
            tmpl = spec.get("template") or {}
            name = (names.worker(mpijob["metadata"]["name"], 0) if role == "Worker"
                    else names.launcher(mpijob["metadata"]["name"]))
            pod_spec = {**(tmpl.get("spec") or {}), "restartPolicy": spec.get("restartPolicy")
                        or "Never"}
            out.append((_pod(name, mpijob["metadata"]["namespace"], tmpl, pod_spec),
                        int(spec.get("replicas") or 1)))
        return out
    alike: dict[str, int] = {}  # worker pods that differ only in name and node: one dry run
    for obj in objects:
        if obj.get("kind") == "Job":
            tmpl = obj["spec"]["template"]
            labels = obj["metadata"]["labels"]
            # The launcher, or the start gate (its own label: mpijob.k8s.start_gate).
            name = (names.launcher(labels[names.LABEL_JOB]) if names.LABEL_JOB in labels
                    else obj["metadata"]["name"])
            out.append((_pod(name, obj["metadata"]["namespace"], tmpl, tmpl["spec"]), 1))
        elif obj.get("kind") == "Pod":
            key = json.dumps({k: v for k, v in obj["spec"].items()
                              if k not in ("hostname", "affinity")}, sort_keys=True)
            if key in alike:
                pod, count = out[alike[key]]
                out[alike[key]] = (pod, count + 1)
            else:
                alike[key] = len(out)
                out.append((obj, 1))
    return out


def _pod(name: str, ns: str, tmpl: dict, spec: dict) -> dict:
    meta = {**(tmpl.get("metadata") or {}), "name": name, "namespace": ns}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def webhook_wants_earlier_object(exc: ApiError) -> bool:
    """A webhook refusing a dry-run pod for want of an object the same job creates first:
    a gang scheduler's webhook looks up the job's PodGroup, which a dry run cannot have
    made (Volcano's validatepod.volcano.sh). The real create asks it again, in order."""
    return "admission webhook" in exc.message and exc.status != 403


def check_admission(client, spec, objects: Sequence[dict], mode: str, *,
                    pods: list[tuple[dict, int]] | None = None,
                    create_optional: bool = False) -> list[str]:
    """Refuse (exit 2, one line, nothing created) what admission would refuse. `pods`: the
    job's pods where another controller makes them from more than the objects (Trainer
    from its runtime: launcher.backends.kubernetes.trainjob.expected_pods). With
    `create_optional` (a client dry run), a user RBAC keeps from creating pods gets a note
    instead: the pods are then summed against the quotas as rendered."""
    admitted = []
    notes: list[str] = []
    if pods is None:
        pods = job_pods(objects, mode)
    # A missing ServiceAccount, PriorityClass, Secret...: named, not read as a 403 (RBAC).
    check_references(client, spec, [pod for pod, _ in pods], objects)
    for pod, count in pods:
        try:
            made, warnings = client.create_with_warnings(pod, dry_run=True)
        except ApiError as exc:
            if exc.status == 403 and exc.admission_refusal():
                raise UsageError(_refusal(spec, pod, exc)) from None
            if create_optional and exc.status == 403:
                if not notes:
                    notes.append(f"cannot create pods in {spec.namespace} (RBAC): admission "
                                 "(Pod Security, LimitRange, webhooks) was not asked; submit "
                                 "would be refused the same way")
                admitted.append((pod, count))
                continue
            if webhook_wants_earlier_object(exc):
                admitted.append((pod, count))
                continue
            raise
        for w in warnings:
            note(f"warning: {pod['metadata']['name']}: {w}")
        admitted.append((made, count))
    _check_quotas(client, spec, admitted)
    return notes


def _refusal(spec, pod: dict, exc: ApiError) -> str:
    said = exc.message.split("is forbidden: ", 1)[-1]
    ns, name = spec.namespace, pod["metadata"]["name"]
    found = _LEVEL.search(said)
    if found:
        level = found.group(1)
        if spec.host_network and "host namespaces" in said:
            return (f"--host-network: namespace {ns} enforces Pod Security \"{level}\", which "
                    "forbids hostNetwork; drop --host-network, or use a namespace labelled "
                    "pod-security.kubernetes.io/enforce=privileged (nothing was created; "
                    f"server said for {name}: {said})")
        if spec.data_dirs and "hostPath volumes" in said:
            return (f"--data-dir: namespace {ns} enforces Pod Security \"{level}\", which "
                    "forbids hostPath volumes; mount the data from a PersistentVolumeClaim "
                    "with --data PVC:MOUNT, or use a namespace labelled "
                    "pod-security.kubernetes.io/enforce=privileged (nothing was created; "
                    f"server said for {name}: {said})")
        if level == "restricted" and spec.run_as_user is None:
            return (f"namespace {ns} enforces Pod Security \"restricted\": pods must run as "
                    "a non-root user; add --run-as-user UID (a uid the image serves: it runs "
                    f"sshd and ssh) (nothing was created; server said for {name}: {said})")
        return (f"pod {name} refused by Pod Security \"{level}\" in namespace {ns} (nothing "
                f"was created): {said}")
    return (f"pod {name} refused by {exc.admission_plugin()}{exc.where()} "
            f"(nothing was created): {said}; ask for less (--cpu, --memory, --gpus, "
            "--workers) or ask the namespace's admin for more")


def pod_usage(pod: dict) -> dict[str, Decimal]:
    """What one pod counts against a ResourceQuota (pods.go PodUsageFunc).

    The test API server models the same function (kubesim/quota.py): the two
    stay separate on purpose, so that the test cluster checks this code instead of sharing it.
    """
    usage = {"pods": Decimal(1), "count/pods": Decimal(1)}
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for part, into in (("requests", requests), ("limits", limits)):
            values = {**(res.get("limits") or {}), **(res.get("requests") or {})} \
                if part == "requests" else (res.get("limits") or {})
            for k, v in values.items():
                try:
                    into[k] = into.get(k, Decimal(0)) + parse_quantity(v)
                except QuantityError:
                    continue
    for k, v in requests.items():
        usage[f"requests.{k}"] = v
        if k in _STANDARD:
            usage[k] = v
    for k in _STANDARD:
        if k in limits:
            usage[f"limits.{k}"] = limits[k]
    return usage


def _show(resource: str, value: Decimal) -> str:
    if resource.endswith("memory") and value >= 2**20:
        return f"{value / 2**30:.3g}Gi"
    return f"{value.normalize():f}"


def _check_quotas(client, spec, admitted: list[tuple[dict, int]]) -> None:
    try:
        quotas = client.items(RESOURCE_QUOTA, spec.namespace)
    except ApiError as exc:
        if exc.status == 403:
            note(f"note: cannot read ResourceQuotas in {spec.namespace} (RBAC); the quota "
                 "is checked pod by pod only")
            return
        raise
    need: dict[str, Decimal] = {}
    for pod, count in admitted:
        for k, v in pod_usage(pod).items():
            need[k] = need.get(k, Decimal(0)) + v * count
    for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        status = q.get("status") or {}
        hard = status.get("hard") or (q.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        gaps = []
        for k in sorted(hard):
            if k not in need:
                continue
            limit, taken = parse_quantity(hard[k]), parse_quantity(used.get(k, "0"))
            if taken + need[k] > limit:
                free = max(limit - taken, Decimal(0))
                gaps.append(f"{k}: the job needs {_show(k, need[k])}, {_show(k, free)} of "
                            f"{_show(k, limit)} free")
        if gaps:
            raise UsageError(
                f"job {spec.name} does not fit ResourceQuota {q['metadata']['name']} in "
                f"namespace {spec.namespace} ({'; '.join(gaps)}); ask for less (--workers, "
                "--gpus, --cpu, --memory) or wait for the namespace's other jobs to finish "
                "(nothing was created)")
