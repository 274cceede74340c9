"""Every figure the README prints has a source that can make it again: an entry in
benchmarks/figures/figures.yaml with the files it comes from, the command that regenerates
it, and the machine and load it was measured on. A figure re-measured by
benchmarks/figures/measure.py must read as its JSON says. Goals ("target 2 s") are not
measurements and need none; nor do sizes of a job ("64 x 8 GPUs")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "benchmarks" / "figures" / "figures.yaml"
# A measured quantity: a number with a unit of time, size, rate or share, or a ratio (4.2x).
FIGURE = re.compile(r"(?<![\w.])[~+]?\d[\d,]*(?:\.\d+)?(?:\s?(?:ms|s|min|minutes|MiB|GB|MB|"
                    r"images/sec|%)|x)(?![\w/])")


def readme_figures(text: str) -> list[str]:
    goals = [g.span() for g in re.finditer(r"\(targets? [^)]*\)", text)]
    return [m.group() for m in FIGURE.finditer(text)
            if not any(a <= m.start() < b for a, b in goals)]


def registry() -> list[dict]:
    return yaml.safe_load(REGISTRY.read_text())


def test_every_readme_figure_has_a_source():
    known = {e["text"] for e in registry()}
    missing = [f for f in readme_figures((ROOT / "README.md").read_text()) if f not in known]
    assert missing == [], f"README figures with no entry in {REGISTRY.name}: {missing}"


def test_every_source_exists_and_says_machine_and_load():
    for entry in registry():
        for path in entry["source"]:
            assert (ROOT / path).exists(), (entry["text"], path)
        assert entry["regenerate"].strip(), entry["text"]
        assert entry["machine"].strip() and str(entry["load"]).strip(), entry["text"]


def test_remeasured_figures_read_as_measured():
    for entry in registry():
        measured = entry.get("measured")
        if measured is None:
            continue
        data = json.loads((ROOT / measured["json"]).read_text())
        assert measured["format"].format(**data) == entry["text"], entry
        assert str(data["load_1min_before"]) in str(entry["load"]), entry


def test_the_pattern_finds_what_it_should():
    text = ("simulate 13.4 s (target 60 s); 1 s (target 2 s, 150 MiB); 64 x 8 GPUs; 4.2x; "
            "+2.7%; 1,195 images/sec; "
            "Horovod 0.28.1; port 22")
    assert readme_figures(text) == ["13.4 s", "1 s", "4.2x", "+2.7%", "1,195 images/sec"]


def test_the_readme_rdma_example_prints_what_the_readme_shows():
    from typer.testing import CliRunner

    from launcher.cli.app import app

    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\n( +)(hvdk8s plan [^\n]*rdma-two-nodes\.yaml[^\n]*)\n((?:\1[^\n]*\n)+)",
                      readme)
    assert block is not None
    shown = " ".join(block.group(3).split())
    result = CliRunner().invoke(app, block.group(2).split()[1:])
    assert result.exit_code == 0, result.output
    printed = " ".join(result.output.split())
    for line in re.split(r"(?=network: |warning: )", shown):
        assert line.strip() in printed, line


def test_the_figure_the_cli_prints_has_a_source_too():
    """submit on this machine says how long the quick benchmark takes when nothing
    predicts it (launcher.backends.local.quick_benchmark.describe_start)."""
    from launcher.backends.local.quick_benchmark import QUICK_BENCHMARK_SECONDS

    assert f"~{QUICK_BENCHMARK_SECONDS:.0f} s" in {e["text"] for e in registry()}
