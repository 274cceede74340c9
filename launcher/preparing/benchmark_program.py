"""Where the built-in benchmark program is, and its source for the ConfigMap.

Its own module so that the backends need nothing from the submit pipeline.
"""

from __future__ import annotations

import os
from pathlib import Path

import launcher
from launcher.errors import UserError


def benchmark_source() -> str:
    """The benchmark program shipped in the ConfigMap so any TF+Horovod image can run it."""
    return _read(benchmark_path(), "the built-in benchmark", "set HVDK8S_BENCHMARK to its path")


def elastic_benchmark_source() -> str:
    """The benchmark's elastic loop (elastic.py beside it), which `--elastic` imports."""
    return _read(benchmark_path().with_name("elastic.py"), "the elastic benchmark",
                 "it must lie beside HVDK8S_BENCHMARK")


def _read(path: Path, what: str, remedy: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read {what} at {path}: {exc.strerror}; {remedy}") from None


def benchmark_path() -> Path:
    override = os.environ.get("HVDK8S_BENCHMARK")
    if override:
        return Path(override)
    return Path(launcher.__file__).resolve().parent.parent / "images" / "benchmark" / "hvd_cnn_bench.py"
