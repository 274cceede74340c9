"""Which backend runs a job: asked for, or Kubernetes wherever Kubernetes is configured.

This machine is the fallback only when nothing names a cluster: no --kubeconfig, no
$KUBECONFIG, no ~/.kube/config, no pod service account. A kubeconfig, context or namespace
that was given but cannot be used is an error naming it, never a quiet run here (on a login
node, an 8-GPU job would land on the shared CPU while its user thinks it is on the cluster).
"""

from __future__ import annotations

from launcher.errors import UsageError, UserError
from mpijob.jobspec.defaults import BACKENDS

# What the local fallback is called in `backend: local (...)` and in hints.
NOTHING_CONFIGURED = "no kubeconfig configured and not in a pod"


def kubernetes_configured() -> bool:
    """Whether anything names a cluster (usable or not): only when not does a command fall
    back to this machine."""
    from launcher.backends.kubernetes.kubeconfig import kubeconfig_source

    return kubeconfig_source() is not None


def resolve_backend_name(requested: str | None, context: str | None = None, *,
                         hint: str | None = None) -> tuple[str, str]:
    """The backend name and why it was chosen; `hint` is the way on that the command offers
    when nothing is configured (e.g. `--backend local`)."""
    if requested:
        if requested not in BACKENDS:
            raise UsageError(f"--backend: expected one of {', '.join(BACKENDS)}, got {requested!r}")
        if requested == "local" and context:
            raise UsageError("--context names a Kubernetes context: it does not go with "
                             "--backend local")
        return requested, "asked for"
    # lazy: only the backend in use is imported (local: pydantic models, ~70 ms; Kubernetes: ~12 ms)
    from launcher.backends.kubernetes.kubeconfig import (
        config_problem,
        kubeconfig_source,
        kubeconfig_usable,
    )

    source = kubeconfig_source()
    if context is None and source is None:
        return "local", NOTHING_CONFIGURED
    if not kubeconfig_usable(context):
        # Given but unusable (a typo, a file gone): say which, run nothing.
        raise UserError(config_problem(context, offline=hint))
    return "kubernetes", f"--context {context}" if context else f"from {source}"


def local_gpu_count() -> int:
    """The GPUs this machine shows to the local backend (0 without NVML or a driver)."""
    from launcher.backends.local.gpus import gpu_count

    return gpu_count()


def offline_backend():
    """A client dry run's backend when none is asked anything: the Kubernetes objects the
    job would be."""
    from launcher.backends.kubernetes.rendering import KubernetesObjects

    return KubernetesObjects()


def make_backend(name: str, *, context: str | None = None, namespace: str | None = None):
    if name == "local":
        from launcher.backends.local.backend import LocalBackend

        return LocalBackend()
    from launcher.backends.kubernetes.backend import KubernetesBackend

    return KubernetesBackend(context=context, namespace=namespace)
