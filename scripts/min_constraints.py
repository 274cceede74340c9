"""Print pip constraints that pin each dependency of pyproject.toml to its lower bound.

The lower bounds are the oldest versions hvdk8s claims to work with; CI installs exactly these
(scripts/test-min-versions.sh) so a bound can never drift below what the code uses.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*[^;]*?>=\s*([0-9][^,;\s]*)")


def constraints(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = []
    for requirement in requirements:
        match = LOWER_BOUND.match(requirement)
        if match:
            pins.append(f"{match[1]}=={match[2]}")
    return pins


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print("\n".join(constraints(root / "pyproject.toml", sys.argv[1:])))
