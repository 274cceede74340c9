"""The writes that follow from a job's state, as explicit steps of the commands that take
them: `fail_overdue` (get, wait, logs -f: a pod past --start-timeout fails the job and frees
its GPUs; the start-guard Deployment does the same in the cluster) and `tidy` (get, wait:
a finished job's measured rate recorded on its root for `list`, its idle pods removed by
its clean pod policy). A user whom RBAC lets only read gets a note instead."""

from __future__ import annotations

import builtins

from launcher.backends.base import SUCCEEDED, TERMINAL, JobStatus
from launcher.backends.kubernetes import elastic, start_guard
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.client import JOB, MPIJOB, POD, ApiError
from launcher.backends.kubernetes.connection import Connection
from launcher.output import note
from mpijob.jobspec import names


class Tidying(Connection):
    def fail_overdue(self, root: dict | None, mode: str, pods: builtins.list[dict]) -> bool:
        """The explicit step `get` and `wait` take before reading a status: a job with a pod
        not running --start-timeout after it was scheduled is failed and its GPUs released
        (start_guard). True when it was failed just now. A read-only user gets a note."""
        try:
            return start_guard.enforce(self.client, root, mode, pods)
        except ApiError as exc:
            if exc.status != 403:
                raise
            name = (root or {}).get("metadata", {}).get("name", "?")
            note(f"note: read-only: job {name} missed its start timeout, but failing it is "
                 "not allowed to you (RBAC); ask someone allowed to run hvdk8s delete")
            return False

    def _followed(self, root: dict | None, mode: str, status: JobStatus) -> JobStatus:
        """A dispatched job's status, read on its worker cluster, with its measured rate
        recorded on the manager's copy too, where `list` reads: MultiKueue copies back only
        the job's status (kueue mpijob_multikueue_adapter.go SyncJob), and the launcher's
        termination message stays on the worker's pod."""
        self.tidy(root, mode, [], status)
        return status

    def tidy(self, root: dict | None, mode: str, pods: list[dict], status: JobStatus) -> None:
        """The writes reading a finished job's status calls for, as one explicit step: its
        measured rate recorded on the root (for `list`), and its idle pods removed (clean
        pod policy). A user RBAC lets only read skips them, with a note."""
        if not status.done:
            return
        skipped = self._record_images_per_sec(root, mode, status)
        if mode == "pods":
            skipped += self._clean_pods(root, pods, status)
        if skipped:
            note(f"note: read-only: skipped {' and '.join(skipped)} of finished job "
                 f"{status.name} (RBAC); `hvdk8s delete {status.name} -n {status.namespace}` "
                 "by someone allowed to removes everything")

    def _record_images_per_sec(self, root: dict | None, mode: str,
                               status: JobStatus) -> list[str]:
        """Put the rate measured in a finished job's launcher log on its root, once, so that
        `list` shows it without reading a log per job (k8s_status.ANNOTATION_IMAGES_PER_SEC)."""
        if root is None or status.images_per_sec is None:
            return []
        if st.recorded_images_per_sec(root) is not None:
            return []
        kind = (MPIJOB if mode == "operator" else
                trainer.trainjob_kind(self.client) or JOB if mode == "trainjob" else JOB)
        patch = {"metadata": {"annotations": {
            st.ANNOTATION_IMAGES_PER_SEC: repr(float(status.images_per_sec))}}}
        try:
            self.client.patch(kind, root["metadata"]["name"], patch, status.namespace)
        except ApiError as exc:  # reporting status must not fail on it: `get` shows the rate
            if exc.status == 403:
                return [f"recording its images/sec on {kind.kind} {root['metadata']['name']}"]
        return []

    def _clean_pods(self, root: dict | None, pods: builtins.list[dict],
                    status: JobStatus) -> builtins.list[str]:
        """Belt and braces for the in-pod release: once the launcher is done, no worker may
        keep its GPUs (cleanPodPolicy Running), or no pod stays at all (All)."""
        policy = st.clean_pod_policy(root)
        if policy == "None":
            return []
        # Finished for good: the Job says so, or its pod succeeded (a failed launcher pod
        # may still be retried by the Job and then needs its workers).
        launcher = st.current_launcher(pods)
        job_finished = (st.condition(root, "Complete") is not None
                        or st.condition(root, "Failed") is not None)
        launcher_done = job_finished or (
            launcher is not None and (launcher.get("status") or {}).get("phase") == SUCCEEDED)
        if not launcher_done:
            return []
        if elastic.bounds(root) is not None:  # its worker Job would replace them
            elastic.stop_workers(self.client, status.name, status.namespace)
        doomed, forbidden = [], []
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            is_launcher = st.pod_role(p) == names.ROLE_LAUNCHER
            running = (p.get("status") or {}).get("phase") not in TERMINAL
            # Launcher pods go only once the Job has counted them (All).
            if (policy == "All" and (job_finished or not is_launcher)) or (
                    not is_launcher and running):
                doomed.append(p["metadata"]["name"])
        for pod_name in list(doomed):
            try:
                self.client.delete(POD, pod_name, status.namespace)
            except ApiError as exc:  # reporting status must not fail on cleanup
                doomed.remove(pod_name)
                if exc.status == 403:
                    forbidden.append(pod_name)
                    continue
                status.message = "; ".join(filter(None, [
                    status.message, f"could not remove {pod_name}: {exc.user_error()}"]))
        for r in status.replicas:
            if r.name in doomed:
                r.reason = "Deleted"
                r.message = f"cleanPodPolicy {policy}: removed after the launcher finished"
        return [f"removing its pods {', '.join(forbidden)} (cleanPodPolicy {policy})"] \
            if forbidden else []
