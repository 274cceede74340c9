"""Each job option declared once: the spec's fields name the options that set them, and
submit, plan and experiment share one declaration of each option."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
import typer
from pydantic import BaseModel

from launcher.cli import options
from launcher.cli.app import app
from mpijob.jobspec import defaults
from mpijob.jobspec.spec import Flag, JobSpec


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
    return command


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


SUBMIT = ("submit", "mpi", "--name", "x", "--dry-run")
PLAN = ("plan", "-w", "1", "-g", "1", "--cluster", "tests/data/clusters/two-dgx1.yaml")


@pytest.mark.parametrize(("command", "option", "kind"), [
    (SUBMIT, "--mode", defaults.Mode),
    (SUBMIT, "--mpi", defaults.MPIImplementation),
    (SUBMIT, "--clean-pod-policy", defaults.CleanPodPolicy),
    (SUBMIT, "--image-pull-policy", defaults.PullPolicy),
    (SUBMIT, "--gpu-request", defaults.GpuRequestChoice),
    (SUBMIT, "--gang-scheduler", defaults.GangScheduler),
    (SUBMIT, "--placement", defaults.PlacementPolicy),
    (SUBMIT, "--backend", defaults.BackendName),
    (SUBMIT, "--dry-run", defaults.DryRun),
    (SUBMIT, "-o", options.ObjectFormat),
    (PLAN, "--placement", defaults.PlacementPolicy),
    (PLAN, "--precision", defaults.Precision),
    (PLAN, "-o", options.Format),
    (("list",), "-o", options.Format),
    (("top", "node"), "-o", options.Format),
    (("topology", "presets"), "-o", options.ReportFormat),
    (("simulate", "--nodes", "1", "--jobs", "1"), "--precision", defaults.Precision),
    (("experiment", "report", "results"), "-o", options.ReportFormat),
])
def test_a_value_outside_a_choice_exits_2_before_the_command_runs(command, option, kind):
    # --opt=value: a bare --dry-run means client, and a value after it starts the command.
    result = _run(*command, *([f"{option}=bogus"] if option.startswith("--") else [option, "bogus"]))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    hint = "-o/--output" if option == "-o" else option
    assert result.stderr == f"error: {hint}: expected {options.one_of(get_args(kind))}, got 'bogus'\n"


def test_options_submit_and_plan_share_are_one_declaration():
    submit = {p.name: p for p in _command("submit", "mpi").params}
    plan = {p.name: p for p in _command("plan").params}
    shared = submit.keys() & plan.keys()
    assert {"workers", "gpus", "placement", "selector", "model", "batch_size", "cluster",
            "calibration", "context"} <= shared
    for name in shared - {"output"}:  # -o prints objects from submit, a plan from plan
        assert (submit[name].opts, submit[name].help) == (plan[name].opts, plan[name].help), name


def _literal_defaults_of_shared_options():
    """(file, parameter) of every `x: opt.Something = <literal>` in the CLI modules."""
    root = Path(__file__).resolve().parents[1] / "launcher" / "cli"
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

    result = _run("submit", "mpi", "--name", "np", "-w", str(workers), "-g", str(gpus),
                  "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.stderr
    launcher = json.loads(result.stdout)["items"][0]["spec"]["template"]["spec"]["containers"][0]
    command = launcher["command"]
    assert command[command.index("-np") + 1] == str(ranks)
