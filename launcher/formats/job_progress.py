"""A running job's progress, stragglers and stall, from its ranks' reports (pure).

The ranks write `progress` and `heartbeat` reports (rank_reports.py;
images/benchmark/hvdk8s_report.py writes them); `summarize` turns the latest of them into
what `get`, `list` and `top job` show:

- step n of N, images/sec now (the median of the ranks' latest interval rates: in an
  all-reduce every rank runs at the job's pace) and since the warm-up, the ETA at the
  current pace, and how long ago the last step was seen;
- stragglers: a rank whose own compute time per step (not its wall time, which the
  all-reduce evens out) exceeded the median of the other ranks' by more than
  STRAGGLER_RATIO in each of its last STRAGGLER_REPORTS reports;
- a stall: no new step for STALL_STEPS times the expected step time (the step time
  measured since the warm-up, else the warm-up's last step, else the prediction), and
  for at least STALL_HEARTBEATS heartbeat intervals, since steps are seen only through
  reports. Ranks whose reports ceased for STALL_HEARTBEATS heartbeat intervals are named:
  a rank stopped (SIGSTOP, a dead node) stops beating, while ranks waiting for it in a
  collective keep beating.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from mpijob.progress import (  # defined once: the launcher pod's monitor gets them too
    HEARTBEAT_SECONDS,
    STALL_HEARTBEATS,
    STALL_STEPS,
    STRAGGLER_RATIO,
    STRAGGLER_REPORTS,
)


@dataclass(frozen=True)
class Straggler:
    rank: int
    compute_time: float  # its mean over its last reports, seconds per step
    median: float  # the other ranks' median of the same

    def describe(self, who: str | None = None) -> str:
        return (f"{who or f'rank {self.rank}'} computes {self.compute_time:.3g}s per step against the "
                f"other ranks' median {self.median:.3g}s ({self.compute_time / self.median:.2f}x)")


@dataclass
class JobProgress:
    step: int
    total_steps: int | None
    images_per_sec: float | None  # now: over the ranks' last report interval
    images_per_sec_avg: float | None  # since the warm-up
    predicted_images_per_sec: float | None
    last_step_age: float  # seconds since the last step was seen
    expected_step_time: float | None
    eta_seconds: float | None
    warmup: bool  # no timed step yet
    stalled: bool = False
    stall_after: float | None = None  # the threshold, seconds
    silent_ranks: list[int] = field(default_factory=list)
    stragglers: list[Straggler] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> the host it reported from
    # rank -> where it runs, for people ("pod j-worker-1, node n3, GPUs 0,1"): the backend
    # fills it from the hosts and its replicas
    places: dict[int, str] = field(default_factory=dict)
    # Where the figures came from: "reports" (the ranks'), or "trainerStatus" (a TrainJob's
    # status.trainerStatus: trainer_status.py); percent: its progressPercentage where it
    # names no step
    source: str = "reports"
    percent: int | None = None

    def who(self, rank: int) -> str:
        """`rank 1 (pod j-worker-1, node n3, GPUs 0,1)`, or with the reported host only."""
        where = self.places.get(rank) or (f"host {self.hosts[rank]}" if rank in self.hosts
                                          else None)
        return f"rank {rank} ({where})" if where else f"rank {rank}"

    @property
    def ratio(self) -> float | None:
        if self.images_per_sec and self.predicted_images_per_sec:
            return self.images_per_sec / self.predicted_images_per_sec
        return None

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}

    def line(self) -> str:
        """One line for people: `step 30/60  images/sec 7.9 (predicted 8.4, 0.94x)
        ETA 1m02s  last step 1s ago`."""
        parts = [self.step_text() + (" (warm-up)" if self.warmup else "")]
        if self.images_per_sec is not None:
            rate = f"images/sec {self.images_per_sec:.1f}"
            if self.predicted_images_per_sec:
                rate += f" (predicted {self.predicted_images_per_sec:.1f}"
                rate += f", {self.ratio:.2f}x)" if self.ratio else ")"
            parts.append(rate)
        elif self.predicted_images_per_sec:
            parts.append(f"images/sec - (predicted {self.predicted_images_per_sec:.1f})")
        if self.eta_seconds is not None and not self.stalled:
            parts.append(f"ETA {duration(self.eta_seconds)}")
        parts.append(f"last step {duration(self.last_step_age)} ago")
        return "  ".join(parts)

    def step_text(self) -> str:
        """`step 30/60`, or `45% done` where only a percentage is known."""
        if self.percent is not None:
            return f"{self.percent}% done"
        return f"step {self.step}" + (f"/{self.total_steps}" if self.total_steps else "")

    def problems(self) -> list[str]:
        """The stall and the stragglers, one line each."""
        found = []
        if self.stalled:
            who = (f"; not reporting: {', '.join(map(self.who, self.silent_ranks))}"
                   if self.silent_ranks else
                   "; every rank still beats (waiting in a collective?)")
            found.append(f"stalled: no step for {duration(self.last_step_age)} (threshold "
                         f"{duration(self.stall_after or 0)}){who}")
        found += [f"straggler: {s.describe(self.who(s.rank))}" for s in self.stragglers]
        return found


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def summarize(reports: Iterable[dict], now: float, *, ranks: int | None = None,
              predicted_images_per_sec: float | None = None,
              running: bool = True) -> JobProgress | None:
    """The job's progress from its reports (oldest first), None when no rank reported
    progress. `ranks`: how many the job has (a rank that never reported is silent too);
    `running`: False once the job ended (nothing is stalled then)."""
    latest: dict[int, dict] = {}  # each rank's latest progress report
    computes: dict[int, list[float]] = {}
    last_seen: dict[int, float] = {}
    hosts: dict[int, str] = {}
    beat_every = HEARTBEAT_SECONDS
    step, step_seen = -1, 0.0
    for r in reports:
        kind, rank, when = r["kind"], r["rank"], float(r["time"])
        if kind not in ("progress", "heartbeat"):
            continue
        last_seen[rank] = max(last_seen.get(rank, when), when)
        if isinstance(r.get("host"), str) and r["host"]:
            hosts[rank] = r["host"]
        if kind == "heartbeat" and isinstance(r.get("every"), int | float):
            beat_every = float(r["every"])
        reported = r.get("step")
        if isinstance(reported, int) and reported > step:
            step, step_seen = reported, when
        elif kind == "progress" and r.get("warmup") and reported == step:
            # the warm-up just ended: its steps are not counted, but they were steps
            step_seen = max(step_seen, when)
        if kind == "progress":
            latest[rank] = r
            if not r.get("warmup") and isinstance(r.get("compute_time"), int | float):
                computes.setdefault(rank, []).append(float(r["compute_time"]))
    if not latest:
        return None
    total = _first_int(latest.values(), "total_steps")
    images_per_step = _median(r.get("images_per_step") for r in latest.values())
    now_rate = _median(r.get("images_per_sec") for r in latest.values() if not r.get("warmup"))
    avg_rate = _median(r.get("images_per_sec_avg") for r in latest.values())
    warmup_step = _median(r.get("step_time") for r in latest.values() if r.get("warmup"))
    expected = None
    if images_per_step and avg_rate:
        expected = images_per_step / avg_rate
    elif warmup_step:
        expected = warmup_step
    elif images_per_step and predicted_images_per_sec:
        expected = images_per_step / predicted_images_per_sec
    eta = None
    pace = now_rate or avg_rate
    if total is not None and images_per_step and pace:
        eta = max(0, total - step) * images_per_step / pace
    progress = JobProgress(
        step=max(step, 0), total_steps=total, images_per_sec=now_rate,
        images_per_sec_avg=avg_rate, predicted_images_per_sec=predicted_images_per_sec,
        last_step_age=max(0.0, now - step_seen), expected_step_time=expected,
        eta_seconds=eta, warmup=now_rate is None,
        stragglers=_stragglers(computes), hosts=hosts,
    )
    if running and not (total is not None and step >= total):
        quiet_after = STALL_HEARTBEATS * beat_every
        progress.stall_after = max(quiet_after, STALL_STEPS * expected if expected else 0.0)
        progress.stalled = progress.last_step_age > progress.stall_after
        every = range(ranks) if ranks else sorted(last_seen)
        progress.silent_ranks = [r for r in every
                                 if now - last_seen.get(r, float("-inf")) > quiet_after]
    return progress


def _stragglers(computes: dict[int, list[float]]) -> list[Straggler]:
    recent = {rank: times[-STRAGGLER_REPORTS:] for rank, times in computes.items()
              if len(times) >= STRAGGLER_REPORTS}
    if len(recent) < 2:
        return []
    means = {rank: statistics.fmean(times) for rank, times in recent.items()}
    found = []
    for rank, times in sorted(recent.items()):
        # the others' median: with two ranks, the one against the other
        median = statistics.median(m for r, m in means.items() if r != rank)
        if median > 0 and all(t > STRAGGLER_RATIO * median for t in times):
            found.append(Straggler(rank, means[rank], median))
    return found


def _median(values: Iterable) -> float | None:
    found = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)
             and v > 0]
    return statistics.median(found) if found else None


def _first_int(reports: Iterable[dict], key: str) -> int | None:
    for r in reports:
        value = r.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
