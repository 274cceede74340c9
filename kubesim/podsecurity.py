"""Pod Security Admission: the `baseline` and `restricted` levels, per namespace label.

Modelled on k8s.io/pod-security-admission (kubernetes/staging/src/k8s.io/pod-security-admission):
- policy/check_*.go: each check's forbidden reason and detail, worded as there (baseline:
  check_hostNamespaces, check_privileged, check_capabilities_baseline, check_hostPathVolumes,
  check_hostPorts, check_seccompProfile_baseline; restricted adds check_restrictedVolumes,
  check_allowPrivilegeEscalation, check_runAsNonRoot, check_runAsUser,
  check_seccompProfile_restricted, check_capabilities_restricted);
- admission/admission.go: the level comes from the namespace's
  `pod-security.kubernetes.io/enforce|warn|audit` labels, else the AdmissionConfiguration's
  `defaults` (PodSecurityConfiguration); enforce refuses a pod with 403
  `pods "x" is forbidden: violates PodSecurity "restricted:latest": <reason> (<detail>), ...`,
  warn answers a `Warning: would violate PodSecurity ...` header and admits it. Workload
  objects (Jobs) only get warn/audit, never enforce: their pods are checked when made.
- exemptions.namespaces of the configuration (kube-system in most distributions' defaults).
Not modelled: AppArmor, SELinux options, /proc mount, sysctls, Windows pods (hvdk8s sets none).
"""

from __future__ import annotations

from . import errors

LEVELS = ("privileged", "baseline", "restricted")
LABEL = "pod-security.kubernetes.io/"
# check_capabilities_baseline.go: capabilities a baseline pod may add.
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
# check_restrictedVolumes.go: the volume sources a restricted pod may use.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def _plural(names: list[str], one: str, many: str) -> str:
    return f'{one if len(names) == 1 else many} {", ".join(chr(34) + n + chr(34) for n in names)}'


def _containers(spec: dict) -> list[dict]:
    return [c for kind in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(kind) or [] if isinstance(c, dict)]


def _sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


def baseline_violations(spec: dict) -> list[str]:
    out = []
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        out.append(f"host namespaces ({', '.join(hosts)})")
    cs = _containers(spec)
    priv = [c["name"] for c in cs if _sc(c).get("privileged")]
    if priv:
        out.append(f"privileged ({_plural(priv, 'container', 'containers')} must not set "
                   "securityContext.privileged=true)")
    added = {}
    for c in cs:
        bad = [a for a in (_sc(c).get("capabilities") or {}).get("add") or []
               if a not in BASELINE_CAPS]
        if bad:
            added[c["name"]] = bad
    if added:
        caps = sorted({a for v in added.values() for a in v})
        out.append(f"non-default capabilities ({_plural(list(added), 'container', 'containers')} "
                   f"must not include {', '.join(chr(34) + a + chr(34) for a in caps)} in "
                   "securityContext.capabilities.add)")
    host_path = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    if host_path:
        out.append(f"hostPath volumes ({_plural(host_path, 'volume', 'volumes')})")
    ports = [(c["name"], p["hostPort"]) for c in cs for p in c.get("ports") or []
             if p.get("hostPort")]
    if ports:
        names = sorted({n for n, _ in ports})
        nums = ", ".join(str(p) for _, p in ports)
        out.append(f"hostPort ({_plural(names, 'container', 'containers')} uses "
                   f"{'hostPort' if len(ports) == 1 else 'hostPorts'} {nums})")
    unconfined = [c["name"] for c in cs
                  if (_sc(c).get("seccompProfile") or {}).get("type") == "Unconfined"]
    if (_sc(spec).get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append('seccompProfile (pod must not set securityContext.seccompProfile.type to '
                   '"Unconfined")')
    if unconfined:
        out.append(f"seccompProfile ({_plural(unconfined, 'container', 'containers')} must not "
                   'set securityContext.seccompProfile.type to "Unconfined")')
    return out


def restricted_violations(spec: dict) -> list[str]:
    out = baseline_violations(spec)
    bad_vols = [(v["name"], next((k for k in v if k != "name"), "")) for v in
                spec.get("volumes") or [] if not RESTRICTED_VOLUMES & set(v)]
    if bad_vols:
        types = sorted({t for _, t in bad_vols})
        out.append(f"restricted volume types ({_plural([n for n, _ in bad_vols], 'volume', 'volumes')} "
                   f"uses restricted volume type{'s' if len(types) > 1 else ''} "
                   f"{', '.join(chr(34) + t + chr(34) for t in types)})")
    cs = _containers(spec)
    pod_sc = _sc(spec)
    esc = [c["name"] for c in cs if _sc(c).get("allowPrivilegeEscalation") is not False]
    if esc:
        out.append(f"allowPrivilegeEscalation != false ({_plural(esc, 'container', 'containers')} "
                   "must set securityContext.allowPrivilegeEscalation=false)")
    caps_drop = [c["name"] for c in cs
                 if "ALL" not in ((_sc(c).get("capabilities") or {}).get("drop") or [])]
    caps_add = [c["name"] for c in cs
                if set((_sc(c).get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}]
    if caps_drop or caps_add:
        parts = []
        if caps_drop:
            parts.append(f"{_plural(caps_drop, 'container', 'containers')} must set "
                         'securityContext.capabilities.drop=["ALL"]')
        if caps_add:
            parts.append(f"{_plural(caps_add, 'container', 'containers')} must not include "
                         "capabilities other than NET_BIND_SERVICE in "
                         "securityContext.capabilities.add")
        out.append(f"unrestricted capabilities ({'; '.join(parts)})")
    # check_runAsNonRoot.go: the pod's value is the default of each container's.
    pod_nonroot = pod_sc.get("runAsNonRoot")
    if pod_nonroot is False or any(_sc(c).get("runAsNonRoot") is False for c in cs):
        out.append("runAsNonRoot != true (pod or containers must not set "
                   "securityContext.runAsNonRoot=false)")
    elif pod_nonroot is not True:
        unset = [c["name"] for c in cs if _sc(c).get("runAsNonRoot") is not True]
        if unset:
            out.append(f"runAsNonRoot != true (pod or {_plural(unset, 'container', 'containers')} "
                       "must set securityContext.runAsNonRoot=true)")
    root = [c["name"] for c in cs if _sc(c).get("runAsUser") == 0]
    if pod_sc.get("runAsUser") == 0:
        out.append("runAsUser=0 (pod must not set runAsUser=0)")
    if root:
        out.append(f"runAsUser=0 ({_plural(root, 'container', 'containers')} must not set "
                   "runAsUser=0)")
    ok_seccomp = ("RuntimeDefault", "Localhost")
    pod_ok = (pod_sc.get("seccompProfile") or {}).get("type") in ok_seccomp
    unset = [c["name"] for c in cs
             if (_sc(c).get("seccompProfile") or {}).get("type") not in ok_seccomp
             and not (pod_ok and not _sc(c).get("seccompProfile"))]
    if unset:
        out.append(f"seccompProfile (pod or {_plural(unset, 'container', 'containers')} must set "
                   'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')
    return out


def violations(level: str, spec: dict) -> list[str]:
    if level == "restricted":
        return restricted_violations(spec)
    if level == "baseline":
        return baseline_violations(spec)
    return []


class PodSecurity:
    """Admission for pods (enforce, warn) and pod templates of Jobs (warn only).

    `defaults` is the cluster's PodSecurityConfiguration defaults: what a namespace without
    labels gets. The test server defaults to enforce=baseline, as the production
    distributions do (GKE Autopilot, OpenShift's restricted-v2 is stricter still); a test
    that needs a kind cluster's privileged default says so.
    """

    def __init__(self, defaults: dict | None = None, exempt_namespaces=("kube-system",)):
        self.defaults = dict(defaults if defaults is not None else {"enforce": "baseline"})
        self.exempt_namespaces = set(exempt_namespaces)

    def levels(self, ns_obj: dict | None) -> dict[str, str]:
        labels = ((ns_obj or {}).get("metadata") or {}).get("labels") or {}
        out = {}
        for mode in ("enforce", "warn", "audit"):
            level = labels.get(LABEL + mode) or self.defaults.get(mode) or "privileged"
            out[mode] = level if level in LEVELS else "restricted"  # admission.go: invalid -> restricted
        return out

    def admit(self, rt, obj: dict, store) -> list[str]:
        """Raise 403 for an enforce violation; return the warnings to answer with."""
        ns = obj["metadata"].get("namespace") or ""
        if ns in self.exempt_namespaces:
            return []
        if rt.key == "/pods":
            spec, enforce = obj.get("spec") or {}, True
        elif rt.key == "batch/jobs":
            spec, enforce = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}, False
        else:
            return []
        levels = self.levels(store.get("/namespaces", "", ns))
        if enforce:
            found = violations(levels["enforce"], spec)
            if found:
                raise errors.forbidden("", "pods", obj["metadata"].get("name"),
                                       f'violates PodSecurity "{levels["enforce"]}:latest": '
                                       + ", ".join(found))
        warn = violations(levels["warn"], spec)
        if not enforce and not warn:
            warn = violations(levels["enforce"], spec)
            levels["warn"] = levels["enforce"]
        if warn:
            return [f'would violate PodSecurity "{levels["warn"]}:latest": ' + ", ".join(warn)]
        return []
