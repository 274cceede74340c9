"""Printing objects and results: multi-document YAML, JSON, or a table for people."""

from __future__ import annotations

import json
import os
from typing import Any

import typer


def _yaml():
    # lazy: every CLI start imports this module; PyYAML (~8 ms) only for YAML output
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value):
        # Scripts and hostfiles print as readable blocks, not one escaped line.
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return yaml, _Dumper


def dump_yaml_documents(objects: list[dict]) -> str:
    yaml, dumper = _yaml()
    return yaml.dump_all(objects, Dumper=dumper, sort_keys=False, default_flow_style=False,
                         explicit_start=True, width=1000)


def dump_yaml(obj: Any) -> str:
    yaml, dumper = _yaml()
    return yaml.dump(obj, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1000)


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)


def emit_objects(objects: list[dict], fmt: str) -> None:
    """Kubernetes objects: YAML documents, or one JSON List as kubectl prints it."""
    if fmt == "json":
        typer.echo(dump_json({"apiVersion": "v1", "kind": "List", "items": objects}))
    else:
        typer.echo(dump_yaml_documents(objects), nl=False)


MACHINE_FORMATS = ("json", "yaml")


def emit_data(data: Any, fmt: str) -> bool:
    """Print machine formats; returns False when the caller should draw its table."""
    if fmt == "json":
        typer.echo(dump_json(data))
        return True
    if fmt == "yaml":
        typer.echo(dump_yaml(data), nl=False)
        return True
    return False


_held: list[list[str]] = []


def note(message: str) -> None:
    """Information for people, on stderr so stdout stays machine-readable."""
    if _held:
        _held[-1].append(message)
        return
    typer.echo(message, err=True)


class HeldNotes:
    """Notes kept back while a request is checked: a request refused as asked (a
    UsageError, exit 2) is its one line, with no plan before it; any other end prints them."""

    def release(self) -> None:
        if _held:
            for line in _held.pop():
                typer.echo(line, err=True)
            _held.append([])

    def __enter__(self) -> HeldNotes:
        _held.append([])
        return self

    def __exit__(self, kind, exc, tb) -> None:
        from launcher.errors import UsageError  # lazy: errors imports nothing of output

        lines = _held.pop()
        if not (kind is not None and issubclass(kind, UsageError)):
            for line in lines:
                typer.echo(line, err=True)


def plain_when_piped(console, table):
    """A rich table as kubectl prints when stdout is no terminal: plain columns, no box
    characters (a script or `grep` reads them; people at a terminal get the box)."""
    if not console.is_terminal:
        table.box, table.show_edge = None, False
    return table


_debug = {"on": False}


def set_debug(on: bool) -> None:
    _debug["on"] = on


def debug(message: str) -> None:
    """What the tool does behind the scenes (watch fallbacks, retries), with --debug only."""
    if _debug["on"] or os.environ.get("HVDK8S_DEBUG") == "1":
        typer.echo(f"debug: {message}", err=True)
