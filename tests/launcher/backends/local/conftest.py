"""The local backend of the tests here: its own HVDK8S_HOME, and no process left behind,
whether a test drives the backend (`backend`) or the CLI (`home`). A test that starts jobs
(a supervisor running mpirun) takes `backend` or `local_jobs` (tests/conftest.py): the slow
set."""

import pytest

from launcher.backends.local.backend import LocalBackend
from tests.slow_set import slow_fixture


def _delete_all(b: LocalBackend) -> None:
    for status in b.list(all_namespaces=True):  # never leave a process behind
        b.delete(status.name, status.namespace)


@slow_fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    b = LocalBackend(stop_grace_seconds=2.0)
    yield b
    _delete_all(b)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """HVDK8S_HOME for CLI tests; the jobs they started are deleted after."""
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    _delete_all(LocalBackend(stop_grace_seconds=2.0))
