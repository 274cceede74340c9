"""`hvdk8s` run in-process on a cluster file (--cluster) that a test writes."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from launcher.cli.app import app


def write(tmp_path, data) -> str:
    """The cluster file's path, its content `data` (mpijob.scheduling's cluster YAML)."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def docs_of(result) -> list[dict]:
    """The objects a dry run printed."""
    return [d for d in yaml.safe_load_all(result.stdout) if d]
