"""The local backend keeps the read commands' contract too: `get`, `list`, `wait`, `logs`
only read the job's files (status.json has one writer, the job's supervisor; a supervisor
found gone is said, not written), and `tidy` has nothing to take."""

from __future__ import annotations

from pathlib import Path

from launcher.backends.local.backend import LocalBackend
from launcher.backends.local.state import job_paths, write_json


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_reading_a_job_whose_supervisor_is_gone_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    paths = job_paths("lost", "default")
    paths.dir.mkdir(parents=True)
    write_json(paths.spec, {"workers": 2, "gpus_per_worker": 0})
    write_json(paths.launch, {"argv": ["mpirun"], "env": {}})
    write_json(paths.status, {"phase": "Running", "ranks": 2, "node": "n", "gpus": [],
                              "supervisor_pid": None, "created": "2020-01-01T00:00:00Z"})
    paths.launcher_log.write_text("step 1\n")
    before = _tree(tmp_path)
    backend = LocalBackend()
    assert backend.get("lost").reason == "supervisor lost"
    assert [s.phase for s in backend.list()] == ["Failed"]
    assert backend.wait("lost", timeout=5).phase == "Failed"
    assert list(backend.logs("lost")) == ["step 1"]
    assert list(backend.logs("lost", follow=True)) == ["step 1"]
    assert _tree(tmp_path) == before
    assert list(backend.tidy("lost")) == ["job lost: nothing to tidy"]
    assert _tree(tmp_path) == before
