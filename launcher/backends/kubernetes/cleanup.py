"""The writes a started or finished built-in job calls for, shared by whoever takes them
(`hvdk8s tidy`: tidying.py; the start guard's sweep: start_guard.sweep_node), and what each
would do, decided without a request (`due`) for the read commands to name:

- a started job's workers handed from the start gate's pod to the launcher Job
  (start_gate.hand_over);
- a finished job's measured rate recorded on its root, for `list` once its launcher pod is
  gone (cleanPodPolicy All), and its idle pods removed by its clean pod policy, an elastic
  job's worker Job stopped first (it would replace them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from launcher.backends.base import SUCCEEDED, TERMINAL, JobStatus
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.client import JOB, MPIJOB, POD, KubeClient
from launcher.backends.kubernetes.start_gate import hand_over, handover_due, is_elastic
from launcher.timestamps import parse_utc
from mpijob.jobspec import names

# worker.sh: a worker whose launcher's lease ended unreleased exits after
# HVDK8S_LAUNCHER_GRACE_SECONDS (120 by default), looking every second.
LEASE_SECONDS = 120 + 10


@dataclass
class Due:
    """What a job's state calls for (no request made to decide it)."""

    gated: list[dict] = field(default_factory=list)  # to hand to the launcher Job
    policy: str = "Running"
    doomed: list[str] = field(default_factory=list)  # pods to remove
    stop_worker_job: bool = False

    def phrases(self) -> list[tuple[str, str]]:
        """(what is seen, what `hvdk8s tidy` does about it), for the read commands' note."""
        out = []
        if self.gated:
            out.append(("has started, but its workers are still owned by its start gate's "
                        "pod (the pod garbage collector may take them with it once it has "
                        "finished)",
                        "hands them to its launcher Job"))
        if self.doomed or self.stop_worker_job:
            left = ", ".join(self.doomed) or "its worker Job"
            out.append((f"has finished, and {left} outlived its launcher "
                        f"(cleanPodPolicy {self.policy})", "removes them"))
        return out


def due(root: dict | None, mode: str, pods: list[dict], status: JobStatus,
        worker_job: dict | None = None, *, patient_at: datetime | None = None) -> Due:
    """What a built-in job calls for now; `worker_job`: an elastic job's, when read. With
    `patient_at` (the time now), a worker still running is counted only once its lease
    would have ended it (LEASE_SECONDS after the launcher ended): until then the cluster
    may still release it, so the read commands do not call for `tidy`."""
    found = Due()
    if root is None or mode != "pods":
        return found
    if not status.done:
        found.gated = handover_due(root, pods, worker_job)
    found.policy = st.clean_pod_policy(root)
    if found.policy == "None":
        return found
    # Finished for good: the Job says so, or its pod succeeded (a failed launcher pod
    # may still be retried by the Job and then needs its workers).
    launcher = st.current_launcher(pods)
    job_finished = (st.condition(root, "Complete") is not None
                    or st.condition(root, "Failed") is not None)
    if not (job_finished or (launcher is not None and (launcher.get("status") or {}).get(
            "phase") == SUCCEEDED)):
        return found
    ended = _ended_at(root, launcher)
    waits = patient_at is not None and (
        ended is None or (patient_at - ended).total_seconds() < LEASE_SECONDS)
    found.stop_worker_job = is_elastic(root) and worker_job is not None and not waits
    for p in pods:
        if p["metadata"].get("deletionTimestamp"):
            continue
        is_launcher = st.pod_role(p) == names.ROLE_LAUNCHER
        running = (p.get("status") or {}).get("phase") not in TERMINAL
        if running and waits:
            continue
        # Launcher pods go only once the Job has counted them (All).
        if (found.policy == "All" and (job_finished or not is_launcher)) or (
                not is_launcher and running):
            found.doomed.append(p["metadata"]["name"])
    return found


def _ended_at(root: dict, launcher: dict | None) -> datetime | None:
    """When the launcher ended: its Job's Complete or Failed condition, else its pod's
    container's end."""
    times = [c.get("lastTransitionTime") for kind in ("Complete", "Failed")
             if (c := st.condition(root, kind)) is not None]
    times += [((s.get("state") or {}).get("terminated") or {}).get("finishedAt")
              for s in ((launcher or {}).get("status") or {}).get("containerStatuses") or []]
    for when in times:
        try:
            return parse_utc(when or "")
        except ValueError:
            continue
    return None


def worker_job_of(client: KubeClient, root: dict | None, mode: str) -> dict | None:
    """An elastic built-in job's worker Job (one read), else None without a request."""
    if root is None or mode != "pods" or not is_elastic(root):
        return None
    job = st.job_name_of(root)
    return client.get(JOB, names.service(job), st.meta(root)["namespace"]) if job else None


def take(client: KubeClient, root: dict, mode: str, found: Due, status: JobStatus) -> list[str]:
    """Take what `found` calls for and record a finished job's rate; what the API server
    confirmed, one phrase each. An ApiError (but a 404: the object gone meanwhile) is
    raised: the caller says who may not do what."""
    done = []
    ns, name = st.meta(root)["namespace"], status.name
    if found.gated:
        handed = hand_over(client, root, found.gated)
        if handed:
            done.append(f"handed {', '.join(handed)} from its start gate's pod to Job "
                        f"{st.meta(root)['name']}")
    if status.done and (recorded := record_rate(client, root, mode, status)):
        done.append(recorded)
    if found.stop_worker_job and _deleted(client, JOB, names.service(name), ns,
                                          propagation="Background"):
        done.append(f"stopped its worker Job {names.service(name)}")
    removed = [pod for pod in found.doomed if _deleted(client, POD, pod, ns)]
    if removed:
        done.append(f"removed {', '.join(removed)} (cleanPodPolicy {found.policy})")
    return done


def record_rate(client: KubeClient, root: dict, mode: str, status: JobStatus) -> str | None:
    """Put a finished job's measured rate on its root, once, so that `list` shows it when
    its launcher pod (whose termination message carries it) is gone."""
    if status.images_per_sec is None or st.recorded_images_per_sec(root) is not None:
        return None
    kind = (MPIJOB if mode == "operator" else
            trainer.trainjob_kind(client) or JOB if mode == "trainjob" else JOB)
    patch = {"metadata": {"annotations": {
        st.ANNOTATION_IMAGES_PER_SEC: repr(float(status.images_per_sec))}}}
    client.patch(kind, st.meta(root)["name"], patch, st.meta(root)["namespace"])
    return (f"recorded its {status.images_per_sec:g} images/sec on {kind.kind} "
            f"{st.meta(root)['name']}")


def _deleted(client: KubeClient, kind, name: str, ns: str, **kw) -> bool:
    return client.delete(kind, name, ns, **kw)  # False: gone meanwhile
