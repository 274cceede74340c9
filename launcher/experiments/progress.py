"""The progress bar of `hvdk8s experiment run`: runs done, ETA, and one line per run."""

from __future__ import annotations

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from launcher.experiments.report import wide_console
from launcher.experiments.results import FAILED, NO_RESULT, SUCCEEDED, TIMED_OUT
from mpijob.jobspec.experiment_matrix import Run

MARKS = {SUCCEEDED: "[green]ok[/green]", FAILED: "[red]FAILED[/red]",
         TIMED_OUT: "[red]TIMED OUT[/red]", NO_RESULT: "[yellow]NO RESULT[/yellow]"}


def describe_record(record: dict) -> str:
    """One line per finished run, for people."""
    ips = record.get("images_per_sec")
    text = f"{record['run_id']}  "
    if ips is not None:
        text += f"{ips:.2f} images/sec"
        predicted = record.get("predicted_images_per_sec")
        if predicted:
            text += f" (predicted {predicted:.0f})"
        eff = record.get("scaling_efficiency")
        if eff is not None:
            source = " (predicted)" if record.get("efficiency_source") == "predicted" else ""
            text += f", scaling efficiency {eff:.0%}{source}"
    if record.get("reason"):
        text += f"{'; ' if ips is not None else ''}{record['reason']}"
    return text


class RichReporter:
    def __init__(self, console=None):
        self.console = console or wide_console(stderr=True)
        self.progress = None
        self.task = None

    def start(self, total: int, skipped: int) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=self.console, transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("starting", total=total)

    def submitted(self, run: Run) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=run.describe())

    def finished(self, record: dict) -> None:
        mark = MARKS.get(record["status"], record["status"])
        self.console.print(f"{mark} {escape(describe_record(record))}")
        if self.progress is not None:
            self.progress.advance(self.task)

    def note(self, message: str) -> None:
        self.console.print(message, markup=False)

    def stop(self) -> None:
        if self.progress is not None:
            task = self.progress.tasks[0]
            self.progress.update(self.task, description="done" if task.finished else "stopped")
            self.progress.stop()
            self.progress = None
