"""Each job option declared once: the spec's fields name the options that set them, and
submit, plan and experiment share one declaration of each option."""

from __future__ import annotations

import ast

import pytest
import typer
from pydantic import BaseModel

from launcher.cli import options
from launcher.cli.app import app
from mpijob.jobspec.spec import Flag, JobSpec
from tests.paths import ROOT


def _flags(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    out = {}
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            out.update(_flags(info.annotation, f"{prefix}{name}."))
        for meta in info.metadata:
            if isinstance(meta, Flag):
                out[f"{prefix}{name}"] = meta.option
    return out


def _command(*path: str):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return _materialized(command)


def _materialized(command):
    """The command with the job options it adds when first used (spec_options)."""
    return command.materialize() if hasattr(command, "materialize") else command


def test_every_flag_a_spec_field_carries_is_an_option_of_submit():
    submit = _command("submit", "mpi")
    declared = {opt for p in submit.params for opt in p.opts} | {"COMMAND"}
    flags = _flags(JobSpec)
    assert len(flags) > 30  # the walk reached the nested models too
    for field, flag in flags.items():
        assert set(flag.split("/")) <= declared, (field, flag)


def _run(*args):
    from typer.testing import CliRunner

    return CliRunner().invoke(app, list(args))


def _choice_options():
    """(command path, option) of every option that takes one of a Literal's values: help
    shows those values as its metavar (`pods|operator`)."""
    root = typer.main.get_command(app)

    def walk(command, path):
        for name, sub in (getattr(command, "commands", None) or {}).items():
            yield from walk(sub, (*path, name))
        for param in _materialized(command).params:
            # help lists a long choice's values in the text (launcher.cli.helptext)
            if getattr(param, "choice_values", None) and param.opts[0].startswith("-"):
                yield path, param

    return list(walk(root, ()))


CHOICES = _choice_options()


def test_the_choices_are_found():
    found = {(" ".join(path), max(p.opts, key=len)) for path, p in CHOICES}
    assert {("submit mpi", "--mode"), ("submit mpi", "--dry-run"), ("plan", "--precision"),
            ("list", "--output"), ("experiment run", "--backend"),
            ("simulate", "--precision")} <= found


@pytest.mark.parametrize(("path", "param"), CHOICES,
                         ids=[f"{' '.join(path)} {max(p.opts, key=len)}" for path, p in CHOICES])
def test_a_value_outside_a_choice_exits_2_before_the_command_runs(path, param):
    # --opt=value: a bare --dry-run means client, so a value after it would be the command.
    long = max(param.opts, key=len)
    result = _run(*path, f"{long}=bogus")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    hint = "/".join(sorted(param.opts, key=len))
    choices = param.choice_values
    assert result.stderr == f"error: {hint}: expected {options.one_of(choices)}, got 'bogus'\n"


def test_options_submit_and_plan_share_are_one_declaration():
    # (not kubectl's global flags, which commands that read no cluster take and ignore)
    submit = {p.name: p for p in _command("submit", "mpi").params if p.expose_value}
    plan = {p.name: p for p in _command("plan").params if p.expose_value}
    shared = submit.keys() & plan.keys()
    assert {"workers", "gpus", "placement", "selector", "model", "batch_size", "cluster",
            "calibration", "context"} <= shared
    for name in shared - {"output"}:  # -o prints objects from submit, a plan from plan
        assert (submit[name].opts, submit[name].help) == (plan[name].opts, plan[name].help), name


def _literal_defaults_of_shared_options():
    """(file, parameter) of every `x: opt.Something = <literal>` in the CLI modules."""
    root = ROOT / "launcher" / "cli"
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            args = node.args.args
            for arg, default in zip(args[len(args) - len(node.args.defaults):],
                                    node.args.defaults, strict=True):
                shared = (isinstance(arg.annotation, ast.Attribute)
                          and isinstance(arg.annotation.value, ast.Name)
                          and arg.annotation.value.id == "opt")
                # None and False mean "not given"; any other value is a default to name once.
                if (shared and isinstance(default, ast.Constant)
                        and default.value not in (None, False)):
                    yield path.name, arg.arg


def test_no_shared_option_writes_its_default_as_a_value():
    assert list(_literal_defaults_of_shared_options()) == [
        ("experiment.py", "plots"), ("simulate.py", "plots")]


@pytest.mark.parametrize(("workers", "gpus", "ranks"), [(3, 2, 6), (5, 0, 5)])
def test_workers_reach_the_rendered_np(workers, gpus, ranks):
    # --workers -> JobOptions.workers -> JobSpec.workers -> spec.ranks -> mpirun -np.
    import json

    # A cluster file: the objects for a cluster, wherever the test runs (without one, a CPU
    # job's dry run shows this machine's mpirun line when no kubeconfig is configured).
    result = _run("submit", "mpi", "--name", "np", "-w", str(workers), "-g", str(gpus),
                  "--cluster", "tests/data/clusters/two-dgx1.yaml", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.stderr
    launcher = json.loads(result.stdout)["items"][0]["spec"]["template"]["spec"]["containers"][0]
    command = launcher["command"]
    assert command[command.index("-np") + 1] == str(ranks)


def test_commands_start_without_the_spec_models_and_submit_loads_them_when_used():
    # The job options come from the spec's pydantic models (~130 ms to import): they are
    # added when submit or plan is used (launcher.cli.spec_options), so `list` and every
    # other command start without them.
    import subprocess
    import sys

    probe = ("import sys; from launcher.cli.app import main; main([{args}]); "
             "print('mpijob.jobspec.spec' in sys.modules, file=sys.stderr)")

    def loads_the_spec(*args: str) -> bool:
        done = subprocess.run([sys.executable, "-c", probe.format(args=", ".join(map(repr, args)))],
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stderr.strip().splitlines()[-1] == "True"

    assert not loads_the_spec("--help")
    assert not loads_the_spec("top", "--help")
    assert loads_the_spec("submit", "mpi", "--help")
    assert loads_the_spec("plan", "--help")


def test_every_declared_option_is_presented_and_nothing_else():
    """The spec declares the options; the CLI says how each reads in --help
    (launcher.cli.job_help), for those and only those."""
    from launcher.cli.job_help import SHOWN
    from mpijob.jobspec.spec import DECLARED_OPTIONS

    assert set(SHOWN) == {d.path for d in DECLARED_OPTIONS}
    assert all(s.help for s in SHOWN.values())


def test_the_job_model_holds_no_presentation():
    """Help texts, panels and value names are the CLI's: spec.py is the model and its
    validation (a Flag names the option, its parsing and the backends it applies to)."""
    from dataclasses import fields

    assert {f.name for f in fields(Flag)}.isdisjoint({"help", "panel", "metavar"})
