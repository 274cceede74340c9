"""The Kubernetes backend's connection: the client, the namespace, the job's root and pods
(every command reads these), and the wrappers that turn the client's ApiError into UserError.

Reads only: nothing here writes to the cluster."""

from __future__ import annotations

import builtins
import functools
from typing import TYPE_CHECKING

from launcher.backends.base import check_job, check_namespace
from launcher.backends.kubernetes import status as st
from launcher.backends.kubernetes import trainjob as trainer
from launcher.backends.kubernetes.client import JOB, MPIJOB, POD, ApiError, KubeClient, connect
from launcher.backends.kubernetes.kubeconfig import default_namespace
from launcher.backends.kubernetes.listing import owned_by_mpijob
from launcher.backends.kubernetes.rendering import KubernetesObjects
from launcher.backends.kubernetes.watching import WATCH_TIMEOUT_SECONDS
from launcher.output import note
from mpijob.jobspec import names

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


def _api_errors(fn):
    """Public methods raise UserError, never the client's ApiError."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ApiError as exc:
            raise exc.user_error() from None

    return wrapper


def _api_errors_gen(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except ApiError as exc:
            raise exc.user_error() from None

    return wrapper


class Connection(KubernetesObjects):
    name = "kubernetes"

    def __init__(self, context: str | None = None, namespace: str | None = None, *,
                 kubeconfig: str | None = None, client: KubeClient | None = None,
                 poll: float = 0.5):
        self.watch_timeout = WATCH_TIMEOUT_SECONDS  # tests shorten it to count reconnections
        self.context = context
        self._namespace = namespace
        self._kubeconfig = kubeconfig
        self._client = client
        self.poll = poll

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = connect(self.context, self._namespace, self._kubeconfig)
        return self._client

    @property
    def namespace(self) -> str:
        """-n, else the context's namespace, else the service account's, else 'default'."""
        if self._namespace:
            return self._namespace
        if self._client is not None:
            return self._client.namespace
        return default_namespace(self.context, self._kubeconfig)

    def _ns(self, namespace: str | None) -> str:
        return check_namespace(namespace or self.namespace)

    def _job_ns(self, name: str, namespace: str | None) -> str:
        return check_job(name, namespace or self.namespace)

    @_api_errors
    def reachable(self) -> None:
        """One discovery read: UserError naming why when the API server cannot be used."""
        self.client.served_resources("v1")

    def _root(self, name: str, ns: str) -> tuple[dict | None, str]:
        """The job's root and its mode: the launcher Job (pods) or the MPIJob (operator)."""
        job = self.client.get(JOB, names.launcher(name), ns)
        if job is not None and st.job_name_of(job) == name and not owned_by_mpijob(job):
            return job, "pods"
        if self.client.serves(MPIJOB):
            mpijob = self.client.get(MPIJOB, name, ns)
            if mpijob is not None:
                return mpijob, "operator"
        if (kind := trainer.trainjob_kind(self.client)) is not None:
            found = self.client.get(kind, name, ns)
            if found is not None and st.job_name_of(found) == name:
                found.setdefault("kind", "TrainJob")
                return found, "trainjob"
        return None, "pods"

    def _pods(self, name: str, ns: str) -> builtins.list[dict]:
        return self.client.items(POD, ns, label_selector=names.job_selector(name))

    def _dispatched(self, root: dict | None, name: str, ns: str) -> Self | None:
        """The backend of the worker cluster MultiKueue ran this job (its root here) on,
        when the job was dispatched and the kubeconfig has a context of that cluster's name;
        None to read the job here (not dispatched, not visible: the manager's copy carries
        its status). No request for a root that MultiKueue does not manage."""
        from launcher.backends.kubernetes import multikueue
        from launcher.backends.kubernetes.kubeconfig import context_names

        if root is None or multikueue.managed_by(root) != multikueue.MULTIKUEUE:
            return None
        cluster = multikueue.worker_cluster(self.client, root)
        if cluster is None:
            return None
        if cluster not in context_names(self._kubeconfig):
            note(f"note: job {name} runs on MultiKueue worker cluster {cluster}; no kubeconfig "
                 f"context {cluster}, so its pods are not visible here (status from Kueue)")
            return None
        note(f"note: job {name} runs on MultiKueue worker cluster {cluster} (context {cluster})")
        return type(self)(cluster, ns, kubeconfig=self._kubeconfig, poll=self.poll)
