"""The per-user defaults file: `$HVDK8S_HOME/config.yaml` (or `--config FILE`).

    # defaults of `hvdk8s submit mpi` options, by the option's long name
    image: registry.example.com/train:1
    namespace: team-a
    image-pull-secret: [regcred]
    gang: true
    contexts:              # per kubeconfig context, over the defaults above
      prod:
        queue: research

Only the file's shape is checked here (a mapping, `contexts` a mapping of mappings); the
keys and values are the CLI's to check (launcher.cli.userdefaults), against the options.
Writing rewrites the whole file through a temporary file, so a crash never leaves half a
file; YAML comments are not kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from launcher.errors import UsageError
from launcher.formats import yaml_errors
from launcher.formats.home import home

CONFIG_ENV = "HVDK8S_CONFIG"
CONTEXTS = "contexts"


def config_path(override: str | None = None) -> tuple[Path, bool]:
    """(the file, whether the user named it): --config, then $HVDK8S_CONFIG, then
    $HVDK8S_HOME/config.yaml."""
    named = override or os.environ.get(CONFIG_ENV)
    if named:
        return Path(named).expanduser(), True
    return home() / "config.yaml", False


def load(path: Path, *, must_exist: bool) -> dict:
    """The file's mapping ({} when it does not exist and was not named)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        if must_exist:
            raise UsageError(f"--config {path}: no such file") from None
        return {}
    except OSError as exc:
        raise UsageError(f"config {path}: cannot read it: {exc.strerror}") from None
    data = yaml_errors.load(text, f"config {path}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config {path}: expected a mapping of option names to values, "
                         f"got a {type(data).__name__}")
    contexts = data.get(CONTEXTS, {})
    if not isinstance(contexts, dict) or not all(isinstance(v, dict) for v in contexts.values()):
        raise UsageError(f"config {path}: key {CONTEXTS}: expected a mapping of kubeconfig "
                         "context names to option defaults")
    return data


def layers(data: dict, context: str | None) -> list[tuple[str | None, dict]]:
    """(context or None, defaults), the context's last so that it wins."""
    out: list[tuple[str | None, dict]] = [(None, {k: v for k, v in data.items() if k != CONTEXTS})]
    if context and context in (data.get(CONTEXTS) or {}):
        out.append((context, data[CONTEXTS][context]))
    return out


def save(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(data, f, sort_keys=False, default_flow_style=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
