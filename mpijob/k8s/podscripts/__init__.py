"""What runs in the job's pods, shipped in its ConfigMap: shell scripts (launcher.sh,
worker.sh), the preflight (hvdk8s_preflight.py), the launcher's progress monitor
(hvdk8s_monitor.py) and, in a TrainJob's, the poster of its progress to Trainer's status
endpoint (hvdk8s_trainer_status.py, which the monitor calls): Python 3.8, no dependency,
never imported by hvdk8s itself (the local backend runs the preflight from here too)."""

from __future__ import annotations

from importlib import resources


def _launcher_block(title: str) -> str:
    """launcher.sh's block between `# --- title (begin) ---` and its end marker, without its
    comments (they stay in launcher.sh)."""
    begin, end = f"# --- {title} (begin) ---\n", f"# --- {title} (end) ---\n"
    text = resources.files(__name__).joinpath("launcher.sh").read_text()
    block = text[text.index(begin):text.index(end)].splitlines(keepends=True)
    return "".join(line for line in block if not line.lstrip().startswith("#"))


def openmpi5_env() -> str:
    """The Open MPI 5 block: the operator-mode launcher (mpijob.k8s.command.
    OPERATOR_WAIT_SCRIPT) runs the same lines before mpirun."""
    return _launcher_block("Open MPI 5")


def launch_recording_result() -> str:
    """The result block (hvdk8s_launch, hvdk8s_launched): the operator- and trainjob-mode
    launcher runs mpirun through it too, so every mode leaves the result in the launcher's
    termination message."""
    return _launcher_block("result")
