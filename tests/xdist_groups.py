"""`--dist loadgroup` as pytest-xdist documents it, on a pytest where its own does not work.

pytest-xdist groups the tests marked `xdist_group(name)` by renaming each in its workers
(`item._nodeid = nodeid@name`, xdist/remote.py); pytest 9.2 keeps a node's id elsewhere
(`Node._id`, _pytest/nodes.py), so the rename is lost and each grouped test is scheduled on
its own. Here the workers write down the groups they collected instead, and the controller's
scheduler (pytest-xdist's LoadScopeScheduling, its scope being the group) reads them once the
collection is complete: every test of a group runs on one worker, in order.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The file the workers write the groups to, made by the controller (its workers inherit it).
GROUPS_FILE_ENV = "HVDK8S_XDIST_GROUPS"


def _wants_groups(config: pytest.Config) -> bool:
    return config.getvalue("dist") == "loadgroup" if config.pluginmanager.has_plugin(
        "xdist") else False


def configure(config: pytest.Config) -> None:
    """The controller: a fresh file for this run's groups."""
    if hasattr(config, "workerinput") or not _wants_groups(config):
        return
    folder = tempfile.mkdtemp(prefix="hvdk8s-xdist-")
    os.environ[GROUPS_FILE_ENV] = os.path.join(folder, "groups.tsv")


def unconfigure(config: pytest.Config) -> None:
    path = os.environ.get(GROUPS_FILE_ENV)
    if path and not hasattr(config, "workerinput"):
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def record(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A worker: each grouped test and its group (every worker collects the same)."""
    path = os.environ.get(GROUPS_FILE_ENV)
    if not hasattr(config, "workerinput") or not path:
        return
    lines = [f"{item.nodeid}\t{mark.args[0] if mark.args else mark.kwargs.get('name')}"
             for item in items if (mark := item.get_closest_marker("xdist_group"))]
    partial = f"{path}.{config.workerinput['workerid']}"
    Path(partial).write_text("\n".join(lines) + "\n")
    os.replace(partial, path)


def make_scheduler(config: pytest.Config, log):
    if not _wants_groups(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # called once every worker has collected
                text = Path(os.environ[GROUPS_FILE_ENV]).read_text()
                self.groups = dict(line.split("\t") for line in text.splitlines() if line)
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
