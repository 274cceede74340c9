"""Gang schedulers live behind one protocol (mpijob.gang, issue 19): nothing else compares
or spells their names, and the registry agrees with the declared choices."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from mpijob import gang as gangs
from mpijob.jobspec import defaults
from tests.paths import ROOT

# The registry and its implementations; the test API server models the schedulers
# themselves; defaults.py declares the Literal of choices (checked against the registry below).
ALLOWED = ("mpijob/gang/", "kubesim/", "mpijob/jobspec/defaults.py")


def spelled_names(root: Path, names: tuple[str, ...]) -> list[str]:
    quoted = re.compile("|".join(re.escape(f'"{n}"') + "|" + re.escape(f"'{n}'") for n in names))
    return [f"{path.relative_to(root)}:{i}: {line.strip()}"
            for top in ("launcher", "mpijob")
            for path in sorted((root / top).rglob("*.py"))
            if not str(path.relative_to(root)).startswith(ALLOWED)
            for i, line in enumerate(path.read_text().splitlines(), 1)
            if quoted.search(line)]


def test_no_gang_scheduler_name_outside_the_gang_package():
    assert spelled_names(ROOT, tuple(gangs.SCHEDULERS)) == []


def test_the_check_finds_a_comparison(tmp_path):
    (tmp_path / "launcher").mkdir()
    (tmp_path / "launcher" / "x.py").write_text('if gang == "volcano":\n    pass\n')
    (tmp_path / "mpijob" / "gang").mkdir(parents=True)
    (tmp_path / "mpijob" / "gang" / "y.py").write_text("NAME = 'volcano'\n")
    assert spelled_names(tmp_path, ("volcano",)) == ['launcher/x.py:1: if gang == "volcano":']


def test_the_declared_choices_are_the_registry():
    assert get_args(defaults.GangScheduler) == gangs.NAMES
    placing = {s.name for s in gangs.SCHEDULERS.values() if s.keeps_network_domain}
    assert set(get_args(defaults.NetworkScheduler)) == placing


def test_every_scheduler_declares_what_the_protocol_asks():
    for s in gangs.SCHEDULERS.values():
        assert s.name and s.title and s.reason_word and s.short_title and s.group, s
        assert set(s.support) == {gangs.PODS, gangs.OPERATOR}, s.name
        assert s.queue in ("", "optional", "required"), s.name
        assert not s.operator_podgroup or s.podgroup is not None, s.name
