"""`--help` reads like kubectl's: values named for what they are, no Python types, examples."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from launcher.cli.app import app

runner = CliRunner()
PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|list\[[^>]*\]|[a-z]+ range)>|\b(int|float) range\b")


def _paths(command, path=()):
    yield path
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _paths(sub, (*path, name))


COMMANDS = list(_paths(typer.main.get_command(app)))


def _help(path) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_covered():
    # The walk reaches the leaves: a new command cannot slip past the checks below.
    assert ("submit", "mpi") in COMMANDS and ("list",) in COMMANDS and ("top", "job") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "hvdk8s")
def test_help_shows_no_python_types_and_flags_take_no_value(path):
    text = _help(path)
    assert "<bool>" not in text
    assert not PYTHON_TYPE.search(text), PYTHON_TYPE.search(text).group(0)
    # A flag's row holds the flag and its help, nothing in between.
    assert re.search(r"--help\s+Show this message and exit", text)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "hvdk8s")
def test_help_ends_with_two_or_three_examples_of_this_command(path):
    text = _help(path)
    assert "Examples:" in text
    examples = text.split("Examples:", 1)[1]
    lines = [line.strip(" │") for line in examples.splitlines() if line.strip(" │")]
    commands = " ".join(line for line in lines if not line.startswith("#"))
    commands = commands.replace("\\ ", "").split("hvdk8s ")[1:]  # a long one continues
    commands = ["hvdk8s " + c.strip() for c in commands if not c.strip().endswith(";")]
    assert 2 <= len(commands) <= 3, commands
    comments = [line for line in lines if line.startswith("#")]
    assert comments, "each example says what it does"
    # Examples of a command run that command (a group's may run any of its subcommands).
    assert any(" ".join(("hvdk8s", *path)) in line for line in commands), commands


def test_values_are_named_for_what_they_are():
    text = _help(("submit", "mpi"))
    for option, value in (("--name", "NAME"), ("--workers", "N"), ("--cluster", "FILE"),
                          ("--memory", "QUANTITY"), ("--env", "KEY=VALUE"),
                          ("--timeout", "SECONDS")):
        assert re.search(rf"{re.escape(option)}\s+(-\w\s+)?{re.escape(value)}\b", text), option
    assert re.search(r"--gang\s+Gang-schedule", text)  # a flag shows no value
    assert "[COMMAND]..." in text  # the argument too, in the usage line
