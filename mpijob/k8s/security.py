"""Pod and container security settings: the Pod Security levels' requirements.

Kubernetes Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards):
`baseline` forbids host namespaces (hostNetwork), hostPath volumes, hostPorts, privileged
containers and capabilities beyond the default set; `restricted` also requires
runAsNonRoot, allowPrivilegeEscalation false, capabilities drop ALL and a RuntimeDefault
(or Localhost) seccomp profile. With `--run-as-user` every pod hvdk8s renders meets
`restricted`; without it, every pod without `--host-network` meets `baseline`.
"""

from __future__ import annotations

from mpijob.jobspec.spec import JobSpec

# $HOME of a --run-as-user pod: an emptyDir the pod's fsGroup may write, so any uid has a
# home whatever the image's /etc/passwd says; ssh keys go in its .ssh (operator mode
# mounts its Secret there through sshAuthMountPath).
RUN_AS_HOME = "/home/hvdk8s"
HOME_VOLUME = "hvdk8s-home"


def pod_security_context(spec: JobSpec) -> dict | None:
    if spec.run_as_user is None:
        return None
    ctx: dict = {"runAsNonRoot": True, "runAsUser": spec.run_as_user}
    group = spec.run_as_group if spec.run_as_group is not None else spec.run_as_user
    ctx["runAsGroup"] = group
    ctx["fsGroup"] = group  # the home emptyDir and the Secret/ConfigMap files
    ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    return ctx


def container_security_context(spec: JobSpec) -> dict | None:
    if spec.run_as_user is None:
        return None
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def secure_pod(spec: JobSpec, pod_spec: dict) -> dict:
    """Add the security settings to a rendered pod spec (a copy): the pod's context, each
    container's, the run-as home, and no service account token unless one is asked for
    (CIS Kubernetes Benchmark 5.1.6: the training program needs no API access)."""
    out = {**pod_spec}
    if not spec.service_account:
        out["automountServiceAccountToken"] = False
    pod_ctx = pod_security_context(spec)
    if pod_ctx is None:
        return out
    out["securityContext"] = pod_ctx
    out["volumes"] = [*(out.get("volumes") or []), {"name": HOME_VOLUME, "emptyDir": {}}]
    containers = []
    for c in out.get("containers") or []:
        c = {**c, "securityContext": container_security_context(spec)}
        c["env"] = [*(c.get("env") or []), {"name": "HOME", "value": RUN_AS_HOME}]
        c["volumeMounts"] = [*(c.get("volumeMounts") or []),
                             {"name": HOME_VOLUME, "mountPath": RUN_AS_HOME}]
        containers.append(c)
    out["containers"] = containers
    return out


def ssh_auth_mount_path(spec: JobSpec) -> str | None:
    """Operator mode: where the operator mounts its SSH Secret (default /root/.ssh)."""
    return f"{RUN_AS_HOME}/.ssh" if spec.run_as_user is not None else None
