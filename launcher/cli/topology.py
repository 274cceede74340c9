"""`hvdk8s topology parse|presets|show`: read `nvidia-smi topo -m` output and the presets."""

from __future__ import annotations

import json
import sys

import typer

from launcher.cli import options as opt
from launcher.errors import UsageError

app = typer.Typer(no_args_is_help=True, help="GPU topology: parse nvidia-smi output, list presets.")


@app.command("parse")
def parse(
    file: str = typer.Argument(..., help="File with `nvidia-smi topo -m` output, or - for stdin."),
    output: opt.ReportOutput = opt.TABLE,
):
    """Parse `nvidia-smi topo -m` output and print the GPU link matrix."""
    # lazy: every CLI start imports the command modules; the topology parser and presets (~3 ms)
    # load only for this one
    from mpijob.scheduling.topology import TopologyParseError, parse_topo_matrix

    if file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(file, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except FileNotFoundError:
            raise UsageError(f"{file}: no such file") from None
        except OSError as exc:
            raise UsageError(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        topo = parse_topo_matrix(text)
    except TopologyParseError as exc:
        raise UsageError(f"{file}: {exc}") from None
    _emit(topo, output)


@app.command("presets")
def presets(output: opt.ReportOutput = opt.TABLE):
    """List the built-in topology presets."""
    from mpijob.scheduling.presets import PRESET_DESCRIPTIONS, PRESETS

    if output == "json":
        typer.echo(json.dumps([
            {"name": name, "gpus": topo.gpus, "description": PRESET_DESCRIPTIONS.get(name, "")}
            for name, topo in PRESETS.items()
        ], indent=2))
        return
    width = max(len(n) for n in PRESETS)
    for name, topo in PRESETS.items():
        typer.echo(f"{name.ljust(width)}  {topo.gpus:>2} GPUs  {PRESET_DESCRIPTIONS.get(name, '')}")
    typer.echo("also: pcie-<N> (N PCIe GPUs) and uniform-<N>-<CODE> (every pair CODE)")


@app.command("show")
def show(
    name: str = typer.Argument(..., help="Preset name (see `hvdk8s topology presets`)."),
    output: opt.ReportOutput = opt.TABLE,
):
    """Print a preset's GPU link matrix."""
    from mpijob.scheduling.presets import preset

    try:
        topo = preset(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _emit(topo, output)


def _emit(topo, output: str) -> None:
    from mpijob.scheduling.topology import format_matrix

    if output == "json":
        typer.echo(json.dumps(topo.to_json(), indent=2))
        return
    typer.echo(format_matrix(topo))
    if topo.nics:
        typer.echo(f"NICs: {', '.join(topo.nics)}")
