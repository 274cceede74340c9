"""A client dry run prints no private key (a CI log that keeps it leaks a working key):
the SSH key pair it shows is a placeholder, said so on stderr; `submit` makes its own, and
the objects are otherwise the same (test_dry_run_equals_submit.py)."""

from __future__ import annotations

import base64

import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.preparing.sshkeys import PLACEHOLDER


def test_the_dry_run_shows_a_placeholder_and_submit_makes_a_key(k8s):
    srv = k8s.server()
    base = ["submit", "mpi", "--name", "keys", "--image", k8s.image, "--workers", "2",
            "--gpus", "1", "-n", k8s.namespace]
    shown = CliRunner().invoke(app, [*base, "--dry-run", "-o", "yaml"])
    assert shown.exit_code == 0, shown.output
    assert "BEGIN OPENSSH PRIVATE KEY" in shown.stdout  # the shape is shown...
    [secret] = [d for d in yaml.safe_load_all(shown.stdout) if d and d["kind"] == "Secret"]
    values = {**(secret.get("stringData") or {}),
              **{k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}}
    assert all(PLACEHOLDER.split(":")[0] in v for v in values.values())  # ...not a key
    assert "the SSH key pair shown is a placeholder" in shown.stderr

    done = CliRunner().invoke(app, base)
    assert done.exit_code == 0, done.output
    made = srv.get("secrets", secret["metadata"]["name"], k8s.namespace)
    stored = {**(made.get("stringData") or {}),
              **{k: base64.b64decode(v).decode() for k, v in (made.get("data") or {}).items()}}
    assert sorted(stored) == sorted(values)
    assert not any("PLACEHOLDER" in v for v in stored.values())
    assert any("BEGIN OPENSSH PRIVATE KEY" in v for v in stored.values())
