"""The pods' stand-alone Python programs (mpijob/k8s/podscripts/), loaded as modules the
way the pod runs them: from their own file, with no package around them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from mpijob.k8s.podscripts import __file__ as _podscripts_init

PODSCRIPTS = Path(_podscripts_init).parent


def load_podscript(filename: str, module_name: str | None = None) -> ModuleType:
    """A fresh module of PODSCRIPTS/filename (`module_name`: its __name__, by default the
    file's stem with `_under_test`)."""
    path = PODSCRIPTS / filename
    spec = importlib.util.spec_from_file_location(module_name or f"{path.stem}_under_test", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
