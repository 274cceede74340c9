"""Calibration files: read, write, and the default location ($HVDK8S_HOME/calibration.json)
that --calibration (launcher.cli.options) falls back to.

The file is `mpijob.perf.calibration.Calibration` as JSON. A bad file is one line naming it and
what is wrong; writing never overwrites a file the user did not name with -o."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from launcher.errors import UsageError
from launcher.formats.home import home

DEFAULT_NAME = "calibration.json"


def default_path() -> Path:
    return home() / DEFAULT_NAME


def load(path: str | None, *, option: str = "--calibration"):
    """(Calibration, its path) for `path`, else the default file if it exists, else (None, None)."""
    from pydantic import ValidationError

    from mpijob.perf.calibration import Calibration

    if path is None:
        candidate = default_path()
        if not candidate.is_file():
            return None, None
        file = candidate
    else:
        file = Path(path)
        if not file.is_file():
            raise UsageError(f"{option}: no such file {path!r}; make one with hvdk8s calibrate DIR -o FILE")
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option}: {file}: not a readable JSON calibration file ({exc})") from None
    if isinstance(data, dict) and data.get("version") not in (None, 1):
        raise UsageError(f"{option}: {file}: calibration version {data.get('version')!r} is not "
                         "supported (this hvdk8s reads version 1); run hvdk8s calibrate again")
    try:
        return Calibration.model_validate(data), str(file)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"{option}: {file}: {where}: {first['msg']}") from None


def check_writable(path: Path, option: str) -> None:
    """UserError, in one line naming what to change, when `path` cannot be written: said
    before a fit, not after it. Tried, not judged from permissions (root passes those)."""
    from launcher.errors import UserError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory", str(path))
    except OSError as exc:
        raise UserError(f"cannot write the calibration to {path} ({exc.strerror}); give "
                        f"{option} FILE somewhere writable, or set $HVDK8S_HOME") from None


def save(calibration, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(calibration.model_dump(), indent=2) + "\n")
    tmp.replace(path)


def assumptions(calibration, source: str | None):
    """perfmodel Assumptions carrying the calibration (defaults when there is none)."""
    from mpijob.perf.perfmodel import DEFAULT_ASSUMPTIONS, Assumptions

    if calibration is None:
        return DEFAULT_ASSUMPTIONS
    return Assumptions(calibration=calibration, calibration_source=source or "")
