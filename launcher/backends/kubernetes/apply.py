"""Creating a job's objects and removing every trace of one.

Every object of a job carries the `hvdk8s.io/job-name` label, so "the job" is whatever
carries that label: checking that a name is free, rolling back a half-created job and
`delete` all select by it, kind by kind, and nothing relies on the garbage collector
alone (it is asynchronous, and absent for objects created without an owner).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from launcher.backends.kubernetes.client import (
    CONFIGMAP,
    GANG_KINDS,
    JOB,
    MPIJOB,
    POD,
    RESOURCE_CLAIM_TEMPLATE,
    SECRET,
    SERVICE,
    TRAINJOBS,
    ApiError,
    KubeClient,
    kind_of,
)
from launcher.backends.kubernetes.start_gate import delete_gate
from launcher.errors import UserError
from mpijob.jobspec import names

SUBMISSION_ANNOTATION = f"{names.GROUP}/submission"
BASE_KINDS = (JOB, POD, SERVICE, CONFIGMAP, SECRET)
# ResourceClaimTemplates: a DRA job's worker GPUs (mpijob.k8s.dra).
OPTIONAL_KINDS = (MPIJOB, *TRAINJOBS, *GANG_KINDS, RESOURCE_CLAIM_TEMPLATE)


def job_kinds(client: KubeClient) -> list:
    """Kinds a job's objects can have here: the built-in ones plus the installed CRDs'."""
    return [*BASE_KINDS, *(k for k in OPTIONAL_KINDS if client.serves(k))]


def find_job_objects(client: KubeClient, name: str, namespace: str, kinds=None,
                     limit: int | None = None) -> list[dict]:
    """Objects labelled as this job's, one list call per kind."""
    found = []
    for kind in kinds or job_kinds(client):
        for obj in client.items(kind, namespace, label_selector=names.job_selector(name),
                                limit=limit):
            obj.setdefault("kind", kind.kind)
            obj.setdefault("apiVersion", kind.api_version)
            found.append(obj)
    return found


def new_submission_id() -> str:
    return uuid.uuid4().hex[:12]


def _tagged(obj: dict, submission: str) -> dict:
    meta = dict(obj["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), SUBMISSION_ANNOTATION: submission}
    return {**obj, "metadata": meta}


def create(client: KubeClient, obj: dict, submission: str, *, dry_run: bool = False) -> dict:
    """Create one object. A retried POST whose first try did land answers 409 with our own
    object: recognised by the submission id, it counts as created."""
    obj = _tagged(obj, submission)
    try:
        # Strict for custom resources (the MPIJob, gang objects): a field the installed CRD
        # does not declare is an error, never silently dropped (operator_schema.py).
        group = kind_of(obj).group
        strict = "Strict" if "." in group and not group.endswith(".k8s.io") else None
        if strict:
            return client.create(obj, dry_run=dry_run, field_validation=strict)
        return client.create(obj, dry_run=dry_run)
    except ApiError as exc:
        if not exc.already_exists or dry_run:
            raise
        kind, meta = kind_of(obj), obj["metadata"]
        existing = client.get(kind, meta["name"], meta.get("namespace"))
        mine = ((existing or {}).get("metadata") or {}).get("annotations") or {}
        if existing is not None and mine.get(SUBMISSION_ANNOTATION) == submission:
            return existing
        raise


def delete_job_objects(client: KubeClient, name: str, namespace: str, *,
                       grace_seconds: int | None = None, wait_seconds: float = 60.0,
                       poll: float = 0.25, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Delete every object of a job and wait until none is left; False when none existed.

    The roots go first (with background propagation, so the Job controller cannot start a
    replacement launcher pod while its pods are being deleted), then every labelled kind
    by label selector, stragglers included."""
    kinds = job_kinds(client)
    existing = find_job_objects(client, name, namespace, kinds)
    roots = [(JOB, names.launcher(name))] + [(k, name) for k in (MPIJOB, *TRAINJOBS)
                                             if k in kinds]
    existed = bool(existing)
    for kind, root in roots:
        existed |= client.delete(kind, root, namespace, propagation="Background",
                                 grace_seconds=grace_seconds)
    existed |= delete_gate(client, name, namespace, grace_seconds)
    if not existed:
        return False
    for kind in kinds:
        client.delete_collection(kind, namespace, names.job_selector(name),
                                 grace_seconds=grace_seconds)
    deadline = time.monotonic() + wait_seconds
    forced = grace_seconds == 0
    while True:
        left = find_job_objects(client, name, namespace, kinds)
        if not left:
            return True
        if time.monotonic() >= deadline:
            if not forced:  # pods past their grace period: ask once more, without one
                forced = True
                for kind in {kind_of(o) for o in left}:
                    client.delete_collection(kind, namespace, names.job_selector(name),
                                             grace_seconds=0)
                deadline = time.monotonic() + 10.0
                continue
            listed = ", ".join(f"{o['kind'].lower()}/{o['metadata']['name']}" for o in left[:5])
            raise UserError(f"job {name} was deleted but {len(left)} object(s) are still "
                            f"terminating in namespace {namespace}: {listed} (finalizers?)")
        sleep(poll)
