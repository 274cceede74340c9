"""`--pod-patch [launcher|worker|all=]FILE`: a strategic-merge patch of the built pod
templates, for fields hvdk8s has no flag for (sidecars, volumes, securityContext, affinity).

The merge follows Kubernetes' strategic merge patch for core/v1 pods
(k8s.io/apimachinery/pkg/util/strategicpatch/patch.go; the merge keys are the
`patchMergeKey` tags of k8s.io/api/core/v1/types.go): maps merge recursively, `null`
deletes a key, lists with a merge key (containers by name, volumes by name, volumeMounts
by mountPath, env by name, ports by containerPort, ...) merge element by element, any
other list is replaced; `$patch: delete` on a keyed element removes it and
`$patch: replace` on a map replaces it whole.

Then what hvdk8s relies on is checked (`relied_on`): a patch that changes the sshd port,
the hostfile and script mounts, the containers' commands, the GPU request or the job's
labels is refused with the reason. Pure.
"""

from __future__ import annotations

import copy

from mpijob.errors import SpecError
from mpijob.jobspec import names
from mpijob.k8s.render import CONFIG_DIR, SSH_DIR
from mpijob.wellknown import GPU_RESOURCE

# field name -> merge key, as core/v1 declares them (patchMergeKey).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "env": "name", "ports": "containerPort", "imagePullSecrets": "name",
    "hostAliases": "ip", "resourceClaims": "name", "readinessGates": "conditionType",
    "topologySpreadConstraints": "topologyKey",
}
DIRECTIVE = "$patch"


class PatchError(ValueError):
    pass


def strategic_merge(base, patch, field: str = ""):
    if isinstance(patch, dict):
        directive = patch.get(DIRECTIVE)
        body = {k: v for k, v in patch.items() if k != DIRECTIVE and not k.startswith("$")}
        if directive == "replace":
            return copy.deepcopy(body)
        if directive not in (None, "merge"):
            raise PatchError(f"{field or 'the patch'}: unknown $patch: {directive!r} "
                             "(replace, or delete in a list element)")
        out = dict(base) if isinstance(base, dict) else {}
        for key, value in body.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(out.get(key), value, key)
        return out
    if isinstance(patch, list):
        key = MERGE_KEYS.get(field)
        if key is None or not isinstance(base, list):
            return [strategic_merge(None, item, field) if isinstance(item, dict) else item
                    for item in patch]
        return _merge_list(base, patch, field, key)
    return patch


def _merge_list(base: list, patch: list, field: str, key: str) -> list:
    out = [copy.deepcopy(item) for item in base]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"{field}: every element needs its merge key {key!r}")
        at = next((i for i, cur in enumerate(out) if cur.get(key) == item[key]), None)
        if item.get(DIRECTIVE) == "delete":
            if at is not None:
                del out[at]
            continue
        if at is None:
            out.append(strategic_merge(None, item, field))
        else:
            out[at] = strategic_merge(out[at], item, field)
    return out


def _container(pod_spec: dict, name: str) -> dict:
    return next((c for c in pod_spec.get("containers") or [] if c.get("name") == name), {})


def relied_on(template: dict, role: str, mode: str) -> dict[str, object]:
    """What hvdk8s needs of a pod template, by what it is for."""
    spec = template.get("spec") or {}
    c = _container(spec, role)
    labels = (template.get("metadata") or {}).get("labels") or {}
    mounts = {m.get("mountPath"): (m.get("name"), m.get("readOnly"))
              for m in c.get("volumeMounts") or []}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    out: dict[str, object] = {
        f"the {role} container": bool(c),
        f"the {role} container's command (hvdk8s's {'launch line' if role == 'launcher' else 'sshd'})":
            (c.get("command"), c.get("args")),
        "the job's labels (hvdk8s finds its pods by them)":
            {k: v for k, v in labels.items() if k.startswith(names.GROUP)},
        "the host network setting (the sshd port depends on it)": spec.get("hostNetwork"),
    }
    if mode == "pods":
        out["the hostfile and scripts mount (" + CONFIG_DIR + ")"] = (
            mounts.get(CONFIG_DIR), volumes.get((mounts.get(CONFIG_DIR) or ("",))[0]))
        out["the SSH key mount (" + SSH_DIR + ")"] = (
            mounts.get(SSH_DIR), volumes.get((mounts.get(SSH_DIR) or ("",))[0]))
        out["restartPolicy"] = spec.get("restartPolicy")
    if role == "worker":
        out["the ssh port"] = ([p for p in c.get("ports") or [] if p.get("name") == "ssh"],
                               c.get("readinessProbe"))
        res = c.get("resources") or {}
        out["the GPU request"] = ((res.get("limits") or {}).get(GPU_RESOURCE),
                                  (res.get("requests") or {}).get(GPU_RESOURCE),
                                  res.get("claims"), spec.get("resourceClaims"))
    return out


def patch_template(template: dict, patch: dict, role: str, mode: str, source: str) -> dict:
    """The patched template, or a SpecError naming the file and what it broke."""
    try:
        patched = strategic_merge(template, patch)
    except PatchError as exc:
        raise SpecError("pod_patches", f"{source}: {exc}", option="--pod-patch") from None
    before, after = relied_on(template, role, mode), relied_on(patched, role, mode)
    for what, value in before.items():
        if after.get(what) != value:
            raise SpecError("pod_patches", f"{source} changes {what} of the {role} pod, "
                            "which hvdk8s relies on; leave it out of the patch",
                            option="--pod-patch")
    return patched


def _targets(target: str) -> tuple[str, ...]:
    return (names.ROLE_LAUNCHER, names.ROLE_WORKER) if target == "all" else (target,)


def patched_template(spec, template: dict, role: str, mode: str) -> dict:
    """A pod template as built, with the user's patches for its role applied in order:
    the last step of building it, so the patch sees every other field."""
    for p in spec.pod_patches:
        if role in _targets(p.target):
            template = patch_template(template, p.patch, role, mode, p.source)
    return template
