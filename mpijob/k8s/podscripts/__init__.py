"""What runs in the job's pods, shipped in its ConfigMap: shell scripts (launcher.sh,
worker.sh) and the preflight (hvdk8s_preflight.py: Python 3.8, no dependency, never
imported by hvdk8s itself; the local backend runs it from here too)."""

from __future__ import annotations

from importlib import resources

_BEGIN, _END = "# --- Open MPI 5 (begin) ---\n", "# --- Open MPI 5 (end) ---\n"


def openmpi5_env() -> str:
    """launcher.sh's Open MPI 5 block, between its markers, without its comments (they stay
    in launcher.sh): the operator-mode launcher (mpijob.k8s.command.OPERATOR_WAIT_SCRIPT)
    runs the same lines before mpirun."""
    text = resources.files(__name__).joinpath("launcher.sh").read_text()
    block = text[text.index(_BEGIN):text.index(_END)].splitlines(keepends=True)
    return "".join(line for line in block if not line.lstrip().startswith("#"))
