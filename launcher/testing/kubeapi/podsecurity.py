"""The built-in PodSecurity admission plugin, as far as capabilities go.

kube-apiserver enforces the Pod Security Standards per namespace from its label
`pod-security.kubernetes.io/enforce` (k8s.io/pod-security-admission, api/constants.go). Of
its checks, the one a job's pods can trip by what hvdk8s adds is "capabilities":
- baseline (policy/check_capabilities_baseline.go): no capability in
  securityContext.capabilities.add beyond the runtime's defaults (AUDIT_WRITE, CHOWN,
  DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP,
  SETUID, SYS_CHROOT);
- restricted (policy/check_capabilities_restricted.go): only NET_BIND_SERVICE added (the
  drop ALL requirement and restricted's other checks: runAsNonRoot, seccomp,
  allowPrivilegeEscalation, are not modelled here).
The refusal reads as the plugin writes it (admission/admission.go, "violates PodSecurity").
Pods only: controllers' templates are checked through the pods they make.
"""

from __future__ import annotations

from . import errors

ENFORCE = "pod-security.kubernetes.io/enforce"
BASELINE_CAPS = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                           "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP",
                           "SETUID", "SYS_CHROOT"})
ALLOWED = {"baseline": BASELINE_CAPS, "restricted": frozenset({"NET_BIND_SERVICE"})}


def admit_pod(pod: dict, store) -> None:
    ns = store.get("/namespaces", None, pod["metadata"]["namespace"])
    level = (((ns or {}).get("metadata") or {}).get("labels") or {}).get(ENFORCE)
    allowed = ALLOWED.get(level or "")
    if allowed is None:
        return
    spec = pod.get("spec") or {}
    bad = []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        added = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        extra = [cap for cap in added if cap not in allowed]
        if extra:
            bad.append(f'container "{c["name"]}" must not include '
                       + ", ".join(f'"{cap}"' for cap in extra)
                       + " in securityContext.capabilities.add")
    if bad:
        check = "non-default capabilities" if level == "baseline" else "unrestricted capabilities"
        raise errors.forbidden("", "pods", pod["metadata"].get("name"),
                               f'violates PodSecurity "{level}:latest": {check} '
                               f"({'; '.join(bad)})")
