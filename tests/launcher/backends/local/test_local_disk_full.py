"""A full disk under $HVDK8S_HOME costs a finished job neither its end nor its ranks' exit
codes: the supervisor writes the end from the space it set aside (Unknown, "state directory
full"), and where it could not, the reader says the same instead of "supervisor lost"."""

from __future__ import annotations

import errno
import json
import os
from collections import namedtuple

import pytest

from launcher.backends.local import backend as local_backend
from launcher.backends.local import supervisor
from launcher.backends.local.backend import LocalBackend
from launcher.backends.local.state import JobPaths, job_paths, new_status, read_status, write_status
from mpijob.phases import JobPhase


@pytest.fixture
def job(tmp_path, monkeypatch) -> JobPaths:
    """A two-rank job whose ranks both wrote `exit 0`, its supervisor Running and gone."""
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    paths = job_paths("full", "default")
    paths.dir.mkdir(parents=True)
    (paths.dir / "spec.json").write_text(json.dumps({"workers": 2, "gpus_per_worker": 0}))
    (paths.dir / "launch.json").write_text(json.dumps({"argv": ["mpirun"], "env": {}}))
    record = new_status(uid="u-full", phase=JobPhase.RUNNING, mode="cpu", node="here", ranks=2,
                        gpus=[], argv=["mpirun"], rank_logs=True)
    write_status(paths.status, record.model_copy(update={"supervisor_pid": 2 ** 22 + 7}))
    exits = paths.dir / "rank-exits"
    exits.mkdir()
    for rank in (0, 1):
        (exits / str(rank)).write_text("exit 0 1.0\n")
    return paths


def _full_disk_while_reserved(monkeypatch, paths: JobPaths) -> None:
    """Every write of the state fails with ENOSPC until the reserve is given back."""
    real = supervisor.update_status

    def update(p, **changes):
        if (paths.dir / supervisor.RESERVE).exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(p, **changes)
    monkeypatch.setattr(supervisor, "update_status", update)


def test_the_supervisor_writes_the_end_from_its_reserve(job, monkeypatch):
    supervisor.reserve(job)
    assert (job.dir / supervisor.RESERVE).stat().st_size == supervisor.RESERVE_BYTES
    _full_disk_while_reserved(monkeypatch, job)

    assert supervisor._finish(job, 0, supervisor._Stop()) == 1

    record = read_status(job.status)
    assert record.phase == JobPhase.UNKNOWN and record.reason == "state directory full"
    assert "mpirun exited with code 0" in record.message
    assert not (job.dir / supervisor.RESERVE).exists()
    status = LocalBackend().get("full")
    assert (status.phase, status.reason) == ("Unknown", "state directory full")
    assert [(r.phase, r.exit_code) for r in status.replicas] == [("Succeeded", 0)] * 2
    with pytest.raises(local_backend.UserError, match="state directory full|no space left"):
        LocalBackend(poll_seconds=0.01).wait("full", timeout=1)


def test_a_supervisor_gone_on_a_full_disk_is_unknown_not_lost(job, monkeypatch):
    Statvfs = namedtuple("Statvfs", "f_bavail f_frsize")
    monkeypatch.setattr(local_backend.os, "statvfs", lambda path: Statvfs(0, 4096))
    status = LocalBackend().get("full")
    assert status.phase == "Unknown" and status.reason == "state directory full"
    assert "no space left" in status.message
    assert [(r.phase, r.exit_code) for r in status.replicas] == [("Succeeded", 0)] * 2


def test_with_space_left_a_vanished_supervisor_is_still_lost(job):
    assert os.statvfs(job.dir).f_bavail > 0
    status = LocalBackend().get("full")
    assert (status.phase, status.reason) == ("Failed", "supervisor lost")
