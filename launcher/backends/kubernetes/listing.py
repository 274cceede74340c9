"""`hvdk8s list`: every hvdk8s job in a namespace or all of them, as `kubectl get` pays for
it: one paged list per kind of object a job is made of (pods; the root Jobs; MPIJobs and
TrainJobs where their APIs are served), grouped here, and no request per job.

A read that never writes: a finished job's measured rate comes from its launcher pod's
termination message (the launch script writes the result there), else where `hvdk8s tidy`
or the start guard recorded it on the root (status.ANNOTATION_IMAGES_PER_SEC) before its
launcher pod went; reading it from each launcher's log would cost a request per job (`get
NAME` reads it). A launcher pod removed otherwise takes the rate with it: none is shown.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from launcher.backends.base import JobStatus
from launcher.backends.kubernetes import elastic
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.client import JOB, MPIJOB, POD, Kind, KubeClient
from launcher.backends.kubernetes.projections import StatusPod
from launcher.backends.kubernetes.queue import queued_without_calls
from mpijob.jobspec import names


def list_jobs(client: KubeClient, namespace: str, all_namespaces: bool) -> list[JobStatus]:
    """The rows of `hvdk8s list`, one per job, from one list of each kind."""
    with gc_paused():
        selector = names.job_selector()
        pods = client.items(POD, namespace, all_namespaces=all_namespaces,
                            label_selector=selector, item_type=StatusPod)
        roots = [j for j in client.items(JOB, namespace, all_namespaces=all_namespaces,
                                         label_selector=selector)
                 if not owned_by_mpijob(j) and not elastic.is_worker_job(j)]
        for job in roots:
            job.setdefault("kind", "Job")
        for kind, kind_name in root_kinds(client):
            for obj in client.items(kind, namespace, all_namespaces=all_namespaces,
                                    label_selector=selector):
                obj.setdefault("kind", kind_name)
                roots.append(obj)
        return st.group_statuses(roots, pods, refine=queued_without_calls)


def root_kinds(client: KubeClient) -> Iterator[tuple[Kind, str]]:
    """The custom kinds a job's root may be, of those this cluster serves. The served
    groups first (one discovery call, cached): a group that is not there costs nothing."""
    groups = client.api_groups()
    if MPIJOB.group in groups and client.serves(MPIJOB):
        yield MPIJOB, "MPIJob"
    if (kind := trainer.trainjob_kind(client)) is not None:
        yield kind, "TrainJob"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing thousands of pods allocates millions of containers, and every few thousand
    allocations the cyclic GC would walk them all again: JSON has no cycles, so pause it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def owned_by_mpijob(obj: dict) -> bool:
    """A Job the MPI Operator made for an MPIJob (its launcher): the MPIJob is the root."""
    return any(r.get("kind") == "MPIJob"
               for r in (obj.get("metadata") or {}).get("ownerReferences") or [])
