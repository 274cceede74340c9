"""hvdk8s' monitor of a launch line, in the launcher pod: runs it, passes its output on
unchanged, and judges its ranks' progress from their `HVDK8S_REPORT` lines as the CLI does.

    python3 hvdk8s_monitor.py --result FILE -- mpirun ...

Python 3.8, no dependency; hvdk8s never imports it (launcher.sh runs it when the image has
python3, an awk filter otherwise). What it does beside passing the lines on:

- keeps the launch line's result (the last `HVDK8S_RESULT` JSON and `total images/sec`
  line) in --result FILE, for launcher.sh to put in the termination message on success;
- judges progress with the CLI's rules (launcher/formats/job_progress.py), whose thresholds
  come in HVDK8S_PROGRESS_RULES (rendered from mpijob/progress.py: defined once), and marks
  it in HVDK8S_MONITOR_DIR: `stalled` (the stall in words, the silent ranks named, their
  last lines when the launch line tags its output) while the job is stalled. The launcher's readiness probe reads them, so the kubelet, not a log read,
  tells `hvdk8s wait` about a stall;
- HVDK8S_STALL_TIMEOUT=SECONDS: ends the launch line once a stall lasted that long, with the
  reason in the termination message, and exits STALL_EXIT;
- HVDK8S_METRICS_PORT=N: serves the progress in Prometheus' text format on :N/metrics;
- hvdk8s_trainer_status.py beside it: posts the progress to Kubeflow Trainer
  (`from_environ(os.environ)`, then `.post(...)` on each progress report).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPORT_PREFIX = "HVDK8S_REPORT "
RESULT_PREFIX = "HVDK8S_RESULT "
RATE_MARK = "total images/sec:"
MESSAGE_LIMIT = 4000  # the kubelet keeps a termination message's last 4096 bytes
PROBE_OUTPUT_LIMIT = 1000  # the probe's output becomes an event's message: keep it short
LAST_LINES = 3  # of each silent rank, when the launch line tags its output
TICK_SECONDS = 1.0
KILL_AFTER_SECONDS = 15.0  # after SIGTERM, before SIGKILL
# After the launch line ended, how long its output may still come: a child it left behind
# (an ssh session) may hold the pipe open for ever.
DRAIN_SECONDS = 10.0
STALL_EXIT = 3  # `hvdk8s wait`'s exit status for a stalled job
# Open MPI's --tag-output ([1,0]<stdout>:) and Hydra's -prepend-rank ([0]).
_RANK_TAG = re.compile(r"^\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>:)? ?")
_TAGGING_FLAGS = ("--tag-output", "-tag-output", "-prepend-rank", "--prepend-rank")


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _median(values) -> float | None:
    found = [v for v in (_number(x) for x in values) if v is not None and v > 0]
    return statistics.median(found) if found else None


def parse_report(line: str) -> dict | None:
    """The report on `line` (anywhere in it: tags come first), None if none or invalid;
    the same checks as launcher/formats/rank_reports.py."""
    at = line.find(REPORT_PREFIX)
    if at < 0:
        return None
    try:
        value = json.loads(line[at + len(REPORT_PREFIX):].strip())
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        return None
    rank = value.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        return None
    if _number(value.get("time")) is None:
        return None
    return value


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """The ranks' reports, judged as launcher/formats/job_progress.py `summarize` judges
    them (pure: the caller gives the time)."""

    def __init__(self, rules: dict, ranks: int | None = None,
                 predicted: float | None = None) -> None:
        self.straggler_ratio = float(rules["straggler_ratio"])
        self.straggler_reports = int(rules["straggler_reports"])
        self.stall_steps = float(rules["stall_steps"])
        self.stall_heartbeats = float(rules["stall_heartbeats"])
        self.beat_every = float(rules["heartbeat_seconds"])
        self.ranks, self.predicted = ranks, predicted
        self.latest: dict[int, dict] = {}  # rank -> its latest progress report
        # rank -> its last compute times (after the warm-up)
        self.computes: dict[int, deque[float]] = {}
        self.last_seen: dict[int, float] = {}  # rank -> the time of its latest report
        self.hosts: dict[int, str] = {}
        self.step, self.step_seen = -1, 0.0

    def add(self, r: dict) -> None:
        kind, rank, when = r["kind"], r["rank"], float(r["time"])
        if kind not in ("progress", "heartbeat"):
            return
        self.last_seen[rank] = max(self.last_seen.get(rank, when), when)
        if isinstance(r.get("host"), str) and r["host"]:
            self.hosts[rank] = r["host"]
        if kind == "heartbeat" and _number(r.get("every")) is not None:
            self.beat_every = float(r["every"])
        reported = r.get("step")
        if isinstance(reported, int) and not isinstance(reported, bool) and reported > self.step:
            self.step, self.step_seen = reported, when
        elif kind == "progress" and r.get("warmup") and reported == self.step:
            self.step_seen = max(self.step_seen, when)  # the warm-up's end was a step
        if kind == "progress":
            self.latest[rank] = r
            compute = _number(r.get("compute_time"))
            if not r.get("warmup") and compute is not None:
                kept = self.computes.setdefault(rank, deque(maxlen=self.straggler_reports))
                kept.append(compute)

    def judge(self, now: float) -> dict | None:
        """What `get` would show now, None before any progress report."""
        if not self.latest:
            return None
        latest = list(self.latest.values())
        total = next((r["total_steps"] for r in latest if isinstance(r.get("total_steps"), int)
                      and not isinstance(r.get("total_steps"), bool)), None)
        per_step = _median(r.get("images_per_step") for r in latest)
        rate = _median(r.get("images_per_sec") for r in latest if not r.get("warmup"))
        avg = _median(r.get("images_per_sec_avg") for r in latest)
        warmup_step = _median(r.get("step_time") for r in latest if r.get("warmup"))
        expected = None
        if per_step and avg:
            expected = per_step / avg
        elif warmup_step:
            expected = warmup_step
        elif per_step and self.predicted:
            expected = per_step / self.predicted
        pace = rate or avg
        eta = (max(0, total - self.step) * per_step / pace
               if total is not None and per_step and pace else None)
        out: dict[str, Any] = {"step": max(self.step, 0), "total_steps": total, "images_per_sec": rate,
               "images_per_sec_avg": avg, "predicted_images_per_sec": self.predicted,
               "last_step_age": max(0.0, now - self.step_seen), "expected_step_time": expected,
               "eta_seconds": eta, "stalled": False, "stall_after": None, "silent_ranks": [],
               "stragglers": self._stragglers(), "hosts": dict(self.hosts)}
        if not (total is not None and self.step >= total):
            quiet_after = self.stall_heartbeats * self.beat_every
            out["stall_after"] = max(quiet_after, self.stall_steps * expected if expected else 0.0)
            out["stalled"] = out["last_step_age"] > out["stall_after"]
            every = range(self.ranks) if self.ranks else sorted(self.last_seen)
            out["silent_ranks"] = [r for r in every
                                   if now - self.last_seen.get(r, float("-inf")) > quiet_after]
        return out

    def _stragglers(self) -> list:
        recent = {rank: list(times) for rank, times in self.computes.items()
                  if len(times) >= self.straggler_reports}
        if len(recent) < 2:
            return []
        means = {rank: statistics.fmean(times) for rank, times in recent.items()}
        found = []
        for rank, times in sorted(recent.items()):
            median = statistics.median(m for r, m in means.items() if r != rank)
            if median > 0 and all(t > self.straggler_ratio * median for t in times):
                found.append({"rank": rank, "compute_time": means[rank], "median": median})
        return found


def who(judged: dict, rank: int) -> str:
    host = judged["hosts"].get(rank)
    return f"rank {rank} (host {host})" if host else f"rank {rank}"


def stall_line(judged: dict) -> str:
    """The stall in the words of job_progress.JobProgress.problems."""
    silent = judged["silent_ranks"]
    named = ("; not reporting: " + ", ".join(who(judged, r) for r in silent) if silent else
             "; every rank still beats (waiting in a collective?)")
    return "no step for {} (threshold {}){}".format(
        duration(judged["last_step_age"]), duration(judged["stall_after"] or 0), named)


def metrics_text(judged: dict | None, predicted: float | None) -> str:
    """The progress in Prometheus' text exposition format (version 0.0.4)."""
    judged = judged or {}
    rows = [
        ("hvdk8s_step", "The latest training step a rank reported.", judged.get("step")),
        ("hvdk8s_total_steps", "The steps the job runs.", judged.get("total_steps")),
        ("hvdk8s_images_per_second", "Images/sec over the ranks' last report interval.",
         judged.get("images_per_sec")),
        ("hvdk8s_predicted_images_per_second", "Images/sec hvdk8s predicted for the placement.",
         predicted),
        ("hvdk8s_seconds_since_last_step", "Seconds since the latest step was seen.",
         judged.get("last_step_age")),
        ("hvdk8s_stalled", "1 while no step came for the stall threshold.",
         int(bool(judged.get("stalled"))) if judged else None),
        ("hvdk8s_stragglers", "Ranks persistently slower than the others.",
         len(judged["stragglers"]) if judged else None),
    ]
    out = []
    for name, help_text, value in rows:
        if value is None:
            continue  # unknown: absent, not a made-up zero
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge",
                f"{name} {repr(float(value))}"]
    return "\n".join(out) + "\n"


class Monitor:
    """What the monitor keeps of the lines it passes on (thread-safe; pure but for the
    files `mark` writes)."""

    def __init__(self, progress: Progress, prefix: str, tagged: bool,
                 state_dir: str | None = None, trainer=None) -> None:
        self.progress, self.prefix, self.tagged = progress, prefix, tagged
        self.state_dir = state_dir
        self.trainer = trainer
        self.lock = threading.Lock()
        self.result_json, self.rate_line = "", ""
        # rank -> its last lines, when the launch line tags them
        self.rank_lines: dict[int, deque[str]] = {}
        self.stalled_since: float | None = None  # the time a stall was first seen
        self.marked: str | None = None  # what `stalled` holds now

    def line(self, text: str, now: float) -> None:
        report = parse_report(text)
        with self.lock:
            if report is not None:
                self.progress.add(report)
                if report["kind"] == "progress":
                    self._post(now)
                return
            at = text.find(RESULT_PREFIX)
            if at >= 0:
                self.result_json = text[at:].rstrip("\n")
            at = text.find(RATE_MARK)
            if at >= 0:
                self.rate_line = text[at:].rstrip("\n")
            found = _RANK_TAG.match(text) if self.tagged else None
            if found:
                kept = self.rank_lines.setdefault(int(found.group(1)), deque(maxlen=LAST_LINES))
                kept.append(text[found.end():].rstrip("\n"))

    def _post(self, now: float) -> None:
        if self.trainer is None:
            return
        judged = self.progress.judge(now)
        if judged is None:
            return
        try:  # it never raises, by its contract; a job is not failed for a status post
            self.trainer.post(step=judged["step"], total_steps=judged["total_steps"],
                              images_per_sec=judged["images_per_sec"],
                              eta_seconds=judged["eta_seconds"])
        except Exception as exc:  # noqa: BLE001
            say(f"hvdk8s: monitor: the Trainer status post failed: {exc}\n")
            self.trainer = None

    def result(self) -> str:
        """The lines for the termination message: the JSON left out when both do not fit;
        the rate last, so a cut keeps it."""
        with self.lock:
            json_line = self.result_json
            if len(json_line) + len(self.rate_line) > MESSAGE_LIMIT:
                json_line = ""
            return "".join(x + "\n" for x in (json_line, self.rate_line) if x)

    def judge(self, now: float) -> dict | None:
        with self.lock:
            return self.progress.judge(now)

    def probe_output(self, judged: dict) -> str:
        """What the readiness probe says of a stall: the stall, then each silent rank's last
        lines (tagged output only)."""
        lines = [self.prefix + stall_line(judged)]
        with self.lock:
            for rank in judged["silent_ranks"]:
                for text in self.rank_lines.get(rank, ()):
                    lines.append(f"[rank {rank}] {text}")
        out = "\n".join(lines)
        return out[:PROBE_OUTPUT_LIMIT] + "\n"

    def mark(self, judged: dict | None, now: float) -> str | None:
        """Writes `stalled` (or removes it) from the judgement; the stall's text when new."""
        if judged is None or not judged["stalled"]:
            self.stalled_since = None
            if self.marked is not None:
                self.marked = None
                self._remove("stalled")
            return None
        if self.stalled_since is None:
            self.stalled_since = now
        text = self.probe_output(judged)
        new = self.marked is None
        if text != self.marked:
            self.marked = text
            self._write("stalled", text)
        return text if new else None

    def _write(self, name: str, text: str) -> None:
        if self.state_dir is None:
            return
        path = os.path.join(self.state_dir, name)
        try:
            with open(path + ".new", "w") as f:
                f.write(text)
            os.replace(path + ".new", path)  # the probe never reads half a file
        except OSError as exc:  # never the job's end: the probe then fails, said why here
            say(f"hvdk8s: monitor: cannot write {path}: {exc}\n")

    def _remove(self, name: str) -> None:
        if self.state_dir is not None:
            try:
                os.remove(os.path.join(self.state_dir, name))
            except FileNotFoundError:
                pass


def serve_metrics(monitor: Monitor, port: int, host: str = "") -> ThreadingHTTPServer:
    """An HTTP server on port (0: any free one) answering /metrics, in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics_text(monitor.judge(time.time()),
                                monitor.progress.predicted).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # a scrape every 30 s is not the job's log
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def tags_output(argv: list) -> bool:
    """Whether the launch line tags each line with its rank (mpirun --tag-output, Hydra's
    -prepend-rank), anywhere in it: a shell line names them in its text."""
    words = [w for arg in argv for w in str(arg).split()]
    return any(w in _TAGGING_FLAGS for w in words)


def trainer_hook(environ) -> object | None:
    """hvdk8s_trainer_status.from_environ(environ) when that module sits beside this one."""
    try:
        import hvdk8s_trainer_status  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return hvdk8s_trainer_status.from_environ(environ)
    except Exception as exc:  # noqa: BLE001
        say(f"hvdk8s: monitor: no Trainer status: {exc}\n")
        return None


def _pump(src, dst, monitor: Monitor) -> None:
    for raw in iter(src.readline, b""):
        dst.write(raw)
        dst.flush()
        monitor.line(raw.decode("utf-8", "replace"), time.time())


def say(text: str) -> None:
    """A line of the monitor's own on the log, at once (Python 3.8 buffers a piped stderr)."""
    sys.stderr.write(text)
    sys.stderr.flush()


def _optional_number(environ, name: str) -> float | None:
    text = environ.get(name, "")
    if not text:
        return None
    value = float(text)  # rendered by hvdk8s: a bad one is a bug, said loudly
    return value if value > 0 else None


def main(argv: list, environ=os.environ) -> int:
    if "--" not in argv or argv.index("--") != 2 or argv[0] != "--result":
        sys.stderr.write("usage: hvdk8s_monitor.py --result FILE -- LAUNCH LINE...\n")
        return 2
    result_file, command = argv[1], argv[3:]
    rules = json.loads(environ["HVDK8S_PROGRESS_RULES"])
    ranks = _optional_number(environ, "HVDK8S_RANKS")
    predicted = _optional_number(environ, "HVDK8S_PREDICTED_IMAGES_PER_SEC")
    stall_timeout = _optional_number(environ, "HVDK8S_STALL_TIMEOUT")
    port = environ.get("HVDK8S_METRICS_PORT", "")
    state_dir = environ.get("HVDK8S_MONITOR_DIR") or None
    if state_dir:
        try:
            os.makedirs(state_dir, exist_ok=True)
        except OSError as exc:  # the job runs on; its probe says nothing watches it
            say(f"hvdk8s: monitor: cannot mark progress in {state_dir}: {exc}\n")
            state_dir = None
    prefix = rules["stall_message_prefix"]
    monitor = Monitor(Progress(rules, int(ranks) if ranks else None, predicted), prefix,
                      tags_output(command), state_dir, trainer_hook(environ))
    if port:
        try:
            serve_metrics(monitor, int(port))
            say(f"hvdk8s: metrics on port {port} (/metrics)\n")
        except OSError as exc:  # a port taken (host network): the job runs on, said
            say(f"hvdk8s: monitor: no metrics, port {port}: {exc}\n")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    pumps = [threading.Thread(target=_pump, args=(src, dst, monitor), daemon=True)
             for src, dst in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer))]
    for p in pumps:
        p.start()
    ended_for = None
    try:
        while proc.poll() is None:
            time.sleep(TICK_SECONDS)
            now = time.time()
            judged = monitor.judge(now)
            said = monitor.mark(judged, now)
            if said:
                say(said)
            if stall_timeout and judged is not None and judged["stalled"] and ended_for is None \
                    and judged["last_step_age"] >= stall_timeout:
                ended_for = (f"{stall_line(judged)} (--stall-timeout {stall_timeout:.0f}s); "
                             "the launch line was ended")
                say(prefix + ended_for + "\n")
                proc.terminate()
                try:
                    proc.wait(KILL_AFTER_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for p in pumps:
            p.join(DRAIN_SECONDS)
    finally:
        monitor._remove("stalled")
    status = proc.wait()
    if ended_for is not None:
        message = environ.get("HVDK8S_TERMINATION_LOG") or "/dev/termination-log"
        try:
            with open(message, "w") as f:
                f.write((prefix + ended_for)[-MESSAGE_LIMIT:] + "\n")
        except OSError:
            pass  # no termination log: the log line above says it
        return STALL_EXIT
    with open(result_file, "w") as f:
        f.write(monitor.result())
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
