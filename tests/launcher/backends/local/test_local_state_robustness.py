"""One local job's broken state never breaks the backend: list shows it as Unknown, get and
wait say which file in one line, delete always removes it and its processes; a submit that
cannot write its state (read-only or full disk) says so and leaves nothing behind."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launcher.backends.local import backend as local_module
from launcher.backends.local import procs as local_procs
from launcher.backends.local.state import job_paths
from launcher.cli.app import app

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")

runner = CliRunner()
LOCAL = ["--backend", "local"]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    from launcher.backends.local.backend import LocalBackend

    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))  # a test may have moved it

    backend = LocalBackend(stop_grace_seconds=2.0)
    for status in backend.list(all_namespaces=True):
        backend.delete(status.name, status.namespace)


def invoke(*args: str):
    if args[:2] == ("submit", "mpi"):  # ours before the job's command
        return runner.invoke(app, [*args[:2], *LOCAL, *args[2:]])
    return runner.invoke(app, [*args, *LOCAL])


def _one_line_error(result, *words: str) -> None:
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in result.output and all(w in lines[0] for w in words), lines


def _running(name: str, timeout: float = 60.0) -> None:
    """Wait until the job's supervisor has recorded it Running: after that it writes
    status.json only when the job ends, so a breakage made now stays (under load the
    Running record can come after `submit` returns and would repair it)."""
    import time

    path = job_paths(name, "default").status
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads(path.read_text()).get("phase") == "Running":
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"job {name} never recorded Running")


def _half(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


BREAKAGES = {
    "status-half": ("status.json", _half),
    "status-missing": ("status.json", Path.unlink),
    "status-empty": ("status.json", lambda p: p.write_text("")),
    "status-not-an-object": ("status.json", lambda p: p.write_text("[1, 2]\n")),
    "status-hand-edited": ("status.json",
                           lambda p: p.write_text(json.dumps({**json.loads(p.read_text()),
                                                              "ranks": "many"}))),
    "status-binary": ("status.json", lambda p: p.write_bytes(b"\xff\xfe\x00garbage")),
    "spec-half": ("spec.json", _half),
    "spec-missing": ("spec.json", Path.unlink),
    "launch-half": ("launch.json", _half),
    "launch-missing": ("launch.json", Path.unlink),
}


@pytest.mark.parametrize("case", sorted(BREAKAGES))
def test_a_broken_state_file_breaks_only_its_own_job(local_jobs, case):
    filename, breakage = BREAKAGES[case]
    for name in ("good", "bad"):
        submitted = invoke("submit", "mpi", "--name", name, "sleep", "60")
        assert submitted.exit_code == 0, submitted.output
    bad = job_paths("bad", "default")
    assert local_procs.job_pids(None, None, str(bad.dir))  # found without status.json
    _running("bad")
    breakage(bad.dir / filename)

    listed = invoke("list")
    assert listed.exit_code == 0, listed.output
    rows = {line.split()[0]: line.split()[3] for line in listed.stdout.splitlines()[1:]}
    assert rows == {"bad": "Unknown", "good": "Running"}
    warning = listed.stderr.strip().splitlines()
    assert len(warning) == 1 and filename in warning[0] and "Traceback" not in listed.output

    as_json = invoke("list", "-o", "json")
    assert as_json.exit_code == 0
    unknown = next(j for j in json.loads(as_json.stdout) if j["name"] == "bad")
    assert unknown["phase"] == "Unknown" and filename in unknown["message"]

    _one_line_error(invoke("get", "bad"), "bad", filename)
    _one_line_error(invoke("wait", "bad", "--timeout", "5"), "bad", filename)

    deleted = invoke("delete", "bad")
    assert deleted.exit_code == 0, deleted.output
    assert "job bad deleted" in deleted.stdout
    assert not bad.dir.exists() and os.listdir(bad.dir.parent) == ["good"]  # nothing hidden left
    assert local_procs.job_pids(None, None, str(bad.dir)) == []
    assert invoke("get", "good").exit_code == 0


def test_logs_of_a_broken_job_still_print_the_combined_log(local_jobs):
    assert invoke("submit", "mpi", "--name", "bad", "sh", "-c", "echo hello; sleep 60").exit_code == 0
    bad = job_paths("bad", "default")
    _half(bad.dir / "status.json")
    for _ in range(100):
        if "hello" in invoke("logs", "bad").stdout:
            break
    logs = invoke("logs", "-f", "bad")  # follows nothing forever: Unknown is not running
    assert logs.exit_code == 0 and "hello" in logs.stdout
    _one_line_error(invoke("logs", "bad", "--rank", "0"), "status.json")


def _assert_nothing_created(home: Path) -> None:
    jobs = home / "jobs"
    left = [p for p in jobs.rglob("*")] if jobs.exists() else []
    assert all(p.is_dir() and not any(p.iterdir()) for p in left if p.parent != jobs), left
    assert invoke("list").stdout.strip().splitlines()[1:] == []


def test_a_full_disk_at_submit_is_one_line_and_leaves_nothing(home, monkeypatch):
    real = local_module.write_json
    calls = []

    def write_until_full(path, data):
        calls.append(path)
        if len(calls) == 2:  # spec.json was written; launch.json hits the full disk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(local_module, "write_json", write_until_full)
    result = invoke("submit", "mpi", "--name", "full", "sleep", "60")
    _one_line_error(result, "no space left", "nothing was created")
    _assert_nothing_created(home)


@pytest.fixture
def tmpfs(tmp_path):
    """A real filesystem of our own (root can mount one): skip where we cannot."""
    where = tmp_path / "mnt"
    where.mkdir()

    def mount(*options: str) -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs",
                               str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    mounted: list[Path] = []
    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_really_full_disk_at_submit(tmpfs, monkeypatch):
    home = tmpfs("size=64k")
    (home / "jobs" / "default").mkdir(parents=True)
    fd = os.open(home / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # fill it to the last block
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    monkeypatch.setenv("HVDK8S_HOME", str(home))
    _one_line_error(invoke("submit", "mpi", "--name", "full", "sleep", "60"), "no space left")
    assert os.listdir(home / "jobs" / "default") == []


def test_a_read_only_home_at_submit(tmpfs, monkeypatch):
    home = tmpfs("ro", "size=64k")
    monkeypatch.setenv("HVDK8S_HOME", str(home))
    _one_line_error(invoke("submit", "mpi", "--name", "ro", "sleep", "60"),
                    "cannot create job ro", "Read-only file system", "HVDK8S_HOME")
    assert os.listdir(home) == []
    listed = invoke("list")
    assert listed.exit_code == 0 and listed.stdout.strip().splitlines()[1:] == []


def test_a_home_that_cannot_be_a_directory(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "file" / "home"))
    _one_line_error(invoke("submit", "mpi", "--name", "nd", "sleep", "60"),
                    "cannot create job nd", "Not a directory", "HVDK8S_HOME")
