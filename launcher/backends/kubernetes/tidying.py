"""`hvdk8s tidy`: the writes a job's state calls for, taken when the user asks (the read
commands name it: owed.py). For each job, in order, each said only once the API server
confirmed it:
- past --start-timeout: the job failed, its pods released (start_guard.enforce);
- a built-in job that started: its workers handed from the start gate's pod to the launcher
  Job; finished: its rate recorded on its root and its idle pods removed (cleanup.py).
The start guard's sweep takes the same steps with nobody's hvdk8s running."""

from __future__ import annotations

from collections.abc import Iterator

from launcher.backends.kubernetes import cleanup, start_guard
from launcher.backends.kubernetes.connection import _api_errors_gen
from launcher.backends.kubernetes.listing import list_jobs
from launcher.backends.kubernetes.observe import Observing
from launcher.errors import NotFound


class Tidying(Observing):
    @_api_errors_gen
    def tidy(self, name: str, namespace: str | None = None) -> Iterator[str]:
        """One line per step taken; 'nothing to tidy' when the job's state calls for none."""
        ns = self._job_ns(name, namespace)
        root, mode = self._root(name, ns)
        if (worker := self._dispatched(root, name, ns)) is not None:
            yield from worker.tidy(name, ns)
            # MultiKueue copies back only the job's status (kueue
            # mpijob_multikueue_adapter.go SyncJob): the rate goes on the manager's copy too,
            # where `list` reads it.
            status = worker.get(name, ns)
            if status.done and root is not None and (
                    recorded := cleanup.record_rate(self.client, root, mode, status)):
                yield f"job {name}: {recorded} (MultiKueue's manager cluster)"
            return
        pods = self._pods(name, ns)
        if root is None and not pods:
            raise NotFound(f"job {name} not found in namespace {ns}")
        said = False
        if (failed := start_guard.enforce(self.client, root, mode, pods)) is not None:
            reason, deleted = failed
            said = True
            yield (f"job {name}: failed ({start_guard.REASON}: {reason})"
                   + (f"; removed {', '.join(deleted)}" if deleted else ""))
            root, mode = self._root(name, ns)  # read again what failing it changed
            pods = self._pods(name, ns)
        status = self._status_of(name, ns, root, mode, pods, detail=True)
        if root is not None:
            found = cleanup.due(root, mode, pods, status,
                                cleanup.worker_job_of(self.client, root, mode))
            for done in cleanup.take(self.client, root, mode, found, status):
                said = True
                yield f"job {name}: {done}"
        if not said:
            yield f"job {name}: nothing to tidy"

    @_api_errors_gen
    def tidy_all(self, namespace: str | None = None,
                 all_namespaces: bool = False) -> Iterator[str]:
        """`hvdk8s tidy` of every job in the namespace (or all namespaces)."""
        for status in list_jobs(self.client, self._ns(namespace), all_namespaces):
            yield from self.tidy(status.name, status.namespace)
