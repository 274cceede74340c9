"""`--pod-patch [launcher|worker|all=]FILE`: read the patch file (YAML) for the spec.

Any problem is one line naming the option and the file; the patch itself is applied and
checked by the pure core (mpijob.k8s.podpatch).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from launcher.errors import UsageError

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
    try:
        patch = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"--pod-patch {value}: {file} is not YAML{where}") from None
    if not isinstance(patch, dict) or not patch:
        raise UsageError(f"--pod-patch {value}: {file} must hold a pod template patch, a "
                         "mapping like {spec: {securityContext: {runAsUser: 1000}}}")
    return {"target": target, "patch": patch, "source": str(file)}
