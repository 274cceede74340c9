"""Where hvdk8s keeps its files: $HVDK8S_HOME, else ~/.hvdk8s (local jobs, calibration)."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "HVDK8S_HOME"


def home() -> Path:
    configured = os.environ.get(HOME_ENV)
    # Absolute: the paths written into a job's launch line must not depend on a cwd.
    return (Path(configured).expanduser() if configured else Path.home() / ".hvdk8s").absolute()
