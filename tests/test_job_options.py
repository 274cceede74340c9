"""Each job option declared once: the spec's fields name the options that set them, and
submit, plan and experiment share one declaration of each option."""

from __future__ import annotations

import typer
from pydantic import BaseModel

from launcher.cli.app import app
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
