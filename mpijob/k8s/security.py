"""Pod and container security settings: the Pod Security levels' requirements.

Kubernetes Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards):
`baseline` forbids host namespaces (hostNetwork), hostPath volumes, hostPorts, privileged
containers and capabilities beyond the default set; `restricted` also requires
runAsNonRoot, allowPrivilegeEscalation false, capabilities drop ALL and a RuntimeDefault
(or Localhost) seccomp profile. With `--run-as-user` every pod hvdk8s renders meets
`restricted`; without it, every pod without `--host-network` meets `baseline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only a type here
    from mpijob.jobspec.spec import JobSpec

# $HOME of a --run-as-user pod: an emptyDir the pod's fsGroup may write, so any uid has a
# home whatever the image's /etc/passwd says; ssh keys go in its .ssh (operator mode
# mounts its Secret there through sshAuthMountPath).
RUN_AS_HOME = "/home/hvdk8s"
HOME_VOLUME = "hvdk8s-home"
# NCCL registers its buffers with ibv_reg_mr, which pins memory past the default memlock
# limit; the Network Operator's RDMA examples add IPC_LOCK for the same reason.
IPC_LOCK = "IPC_LOCK"


def pod_security_context(spec: JobSpec) -> dict | None:
    if spec.run_as_user is None:
        return None
    ctx: dict = {"runAsNonRoot": True, "runAsUser": spec.run_as_user}
    group = spec.run_as_group if spec.run_as_group is not None else spec.run_as_user
    ctx["runAsGroup"] = group
    ctx["fsGroup"] = group  # the home emptyDir and the Secret/ConfigMap files
    ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx


def container_security_context(spec: JobSpec, *, ipc_lock: bool = False) -> dict | None:
    """`ipc_lock`: the container pins RDMA buffers (a worker of a job with RDMA)."""
    ctx: dict = {}
    capabilities: dict = {}
    if spec.run_as_user is not None:
        ctx["allowPrivilegeEscalation"] = False
        capabilities["drop"] = ["ALL"]
    if ipc_lock:
        capabilities["add"] = [IPC_LOCK]
    if capabilities:
        ctx["capabilities"] = capabilities
    return ctx or None


def ssh_auth_mount_path(spec: JobSpec) -> str | None:
    """Operator mode: where the operator mounts its SSH Secret (default /root/.ssh)."""
    return f"{RUN_AS_HOME}/.ssh" if spec.run_as_user is not None else None
