"""The local backend of the tests here: its own HVDK8S_HOME, and no process left behind."""

import pytest

from launcher.backends.local.backend import LocalBackend


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    b = LocalBackend(stop_grace_seconds=2.0)
    yield b
    for status in b.list(all_namespaces=True):  # never leave a process behind
        b.delete(status.name, status.namespace)
