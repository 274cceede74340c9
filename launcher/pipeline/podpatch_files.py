"""`--pod-patch [launcher|worker|all=]FILE`: read the patch file (YAML) for the spec.

Any problem is one line naming the option and the file; the patch itself is applied and
checked by the pure core (mpijob.k8s.podpatch).
"""

from __future__ import annotations

from pathlib import Path

from launcher.errors import UsageError
from launcher.formats import yaml_errors

TARGETS = ("launcher", "worker", "all")


def read_pod_patch(value: str) -> dict:
    target, sep, path = str(value).partition("=")
    if not sep:
        target, path = "all", value
    elif target not in TARGETS:
        raise UsageError(f"--pod-patch {value}: expected launcher=FILE, worker=FILE, all=FILE "
                         f"or FILE, got target {target!r}")
    file = Path(path).expanduser()
    try:
        text = file.read_text()
    except OSError as exc:
        raise UsageError(f"--pod-patch {value}: cannot read {file}: {exc.strerror}") from None
    patch = yaml_errors.load(text, f"--pod-patch {value}: {file}")
    if not isinstance(patch, dict) or not patch:
        raise UsageError(f"--pod-patch {value}: {file} must hold a pod template patch, a "
                         "mapping like {spec: {securityContext: {runAsUser: 1000}}}")
    problem = schema_problem(patch)
    if problem:
        raise UsageError(f"--pod-patch {value}: {file}: {problem}")
    return {"target": target, "patch": patch, "source": str(file)}


_PRIMITIVES: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "bool": bool,
                                                   "float": (int, float)}


def schema_problem(patch: dict) -> str | None:
    """The first field the Kubernetes schema of a pod template (core/v1 PodTemplateSpec)
    does not have, or a value of the wrong shape; None when it fits. The schema is the
    kubernetes client's models (generated from the API's OpenAPI document), so a typo is
    refused here rather than silently dropped by the API server."""
    from kubernetes.client import models

    def walk(value, type_name: str, path: str) -> str | None:
        if value is None or type_name == "object":
            return None
        # the client's generators spell containers list[X]/dict(str, X) or List[X]/Dict[str, X]
        if type_name.startswith(("list[", "List[")):
            if not isinstance(value, list):
                return f"{path}: expected a list"
            inner = type_name[5:-1]
            return next((p for i, v in enumerate(value)
                         if (p := walk(v, inner, f"{path}[{i}]"))), None)
        if type_name.startswith(("dict(", "Dict[")):
            if not isinstance(value, dict):
                return f"{path}: expected a mapping"
            inner = type_name[5:-1].split(", ", 1)[1]
            return next((p for k, v in value.items() if (p := walk(v, inner, f"{path}.{k}"))),
                        None)
        if type_name in _PRIMITIVES:
            quantity = ".limits." in path or ".requests." in path or path.endswith("sizeLimit")
            if isinstance(value, _PRIMITIVES[type_name]) or (
                    type_name == "str" and quantity and isinstance(value, (int, float))):
                return None  # a quantity may be written as a number (`nvidia.com/gpu: 2`)
            return f"{path}: expected {type_name}, got {value!r}"
        model = getattr(models, type_name, None)
        if model is None:  # e.g. a quantity or int-or-string: the server checks those
            return None
        if not isinstance(value, dict):
            return f"{path}: expected a mapping ({type_name[2:]})"
        fields = {json_name: model.openapi_types[attr]
                  for attr, json_name in model.attribute_map.items()}
        for key, v in value.items():
            if key.startswith("$"):  # strategic-merge directives
                continue
            if key not in fields:
                return (f"{path}.{key}: no such field in {type_name[2:]} (Kubernetes "
                        "core/v1); check its spelling")
            if (p := walk(v, fields[key], f"{path}.{key}")):
                return p
        return None

    return walk(patch, "V1PodTemplateSpec", "")
