"""Whether the user's command is the whole launch line (`mpirun ...`, as arena users write
it), which hvdk8s then runs as given instead of wrapping the command in its own."""

from __future__ import annotations

import posixpath
import shlex

LAUNCHER_PROGRAMS = frozenset({"mpirun", "mpiexec", "orterun", "horovodrun", "mpiexec.hydra"})


def is_launcher_line(command: tuple[str, ...] | list[str], shell: bool) -> bool:
    if not command:
        return False
    first = shlex.split(command[0])[0] if shell else command[0]
    return posixpath.basename(first) in LAUNCHER_PROGRAMS
