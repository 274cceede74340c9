"""Option values passed through without typer's pydantic conversion are exactly what that
conversion returns, for every option of the CLI; and `list` no longer imports pydantic."""

from __future__ import annotations

import types
from typing import get_args

import pytest
import typer
from typer._coercion import build_runtime_param

from launcher.cli.app import app
from launcher.cli.globalflags import _commands
from launcher.cli.plainvalues import PlainValues


def _params():
    return [("/".join(path) or "hvdk8s", p)
            for path, command in _commands(typer.main.get_command(app))
            for p in command.params
            if getattr(p, "type_descriptor", None) is not None
            and p.type_descriptor.file_annotation is None]


def _samples(p) -> list:
    # a choice's own values too (get_args of a Literal), and one that is not a choice
    return [None, p.default, "x", "3", 3, 2.5, True, False, ("a", "b"), ["a"], (), "tcsh",
            *get_args(p.type_descriptor.annotation), *(p.type_descriptor.choices or ())]


@pytest.mark.parametrize("where, param", _params(), ids=lambda v: getattr(v, "name", v))
def test_plain_values_are_what_typer_would_make_of_them(where, param):
    ctx = types.SimpleNamespace(resilient_parsing=False, command=None, params={})
    plain, typers = PlainValues(param.type_descriptor), build_runtime_param(param.type_descriptor)
    for value in _samples(param):
        try:
            expected = typers.coerce(value, param=param, ctx=ctx)
        except Exception as exc:  # typer refuses it: so must the plain path
            with pytest.raises(type(exc)):
                plain.coerce(value, param=param, ctx=ctx)
            continue
        got = plain.coerce(value, param=param, ctx=ctx)
        assert got == expected and type(got) is type(expected), (where, param.name, value)
