"""Commands that train for real (minutes each), run once per session in this process and
read by every test that needs their outcome: the help examples that print them
(tests/launcher/cli/test_help_examples.py) and the tests of what they wrote (the local-cpu
experiment's results: tests/launcher/experiments/test_experiment_local.py)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from typer.testing import CliRunner

from launcher.cli.app import app
from tests.paths import ROOT
from tests.slow_set import slow_fixture

# The repository folders the commands name by relative path; results/ is written beside them.
REPO_DIRS = ("tests", "benchmarks")
# The local-cpu experiment as its help example and the README print it.
LOCAL_CPU = "hvdk8s experiment run benchmarks/experiments/local-cpu.yaml"


def run_in_process(machine: tuple[Path, dict[str, str]], line: str) -> tuple[int, str]:
    """One `hvdk8s` command, in this process, with the machine's environment and folder."""
    work, env = machine
    # Only what differs from this process: the machine's variables, the others unset.
    changes: dict[str, str | None] = {k: v for k, v in env.items() if os.environ.get(k) != v}
    changes.update({k: None for k in os.environ if k not in env})
    before = os.getcwd()
    os.chdir(work)
    try:
        done = CliRunner().invoke(app, shlex.split(line)[1:], prog_name="hvdk8s", env=changes)
    finally:
        os.chdir(before)
    output = done.output
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        output += f"\n{done.exception!r}"
    return done.exit_code, output


class RealRuns:
    """Each line run once, in a folder of its own (`work`, the repository's tests/ and
    benchmarks/ linked in; HVDK8S_HOME is `work/../home`): its exit status, output and
    folder, by line. Readers copy what they change."""

    def __init__(self, top: Path):
        self.top = top
        self.done: dict[str, tuple[int, str, Path]] = {}

    def run(self, line: str) -> tuple[int, str, Path]:
        if line not in self.done:
            top = self.top / f"run-{len(self.done)}"
            work = top / "work"
            work.mkdir(parents=True)
            for d in REPO_DIRS:
                (work / d).symlink_to(ROOT / d)
            (top / "config.yaml").write_text("")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HVDK8S_", "KUBE"))}
            env.update(HVDK8S_HOME=str(top / "home"), HVDK8S_CONFIG=str(top / "config.yaml"),
                       COLUMNS="80")
            code, output = run_in_process((work, env), line)
            self.done[line] = (code, output, work)
        return self.done[line]


@slow_fixture(scope="session")
def real_runs(tmp_path_factory) -> RealRuns:
    return RealRuns(tmp_path_factory.mktemp("real-runs"))


__all__ = ["real_runs", "RealRuns", "run_in_process", "REPO_DIRS", "LOCAL_CPU"]
