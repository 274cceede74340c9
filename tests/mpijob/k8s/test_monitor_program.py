"""The launcher pod's monitor (mpijob/k8s/podscripts/hvdk8s_monitor.py): Python 3.8, judges
the ranks' reports as the CLI does with the thresholds rendered from mpijob.progress, keeps
the result, marks a stall for the probe, serves metrics, and posts to Trainer's hook."""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from launcher.formats import job_progress
from launcher.formats.job_progress import summarize
from mpijob import progress as rules_module
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s import monitor as rendering
from tests.podscripts import PODSCRIPTS, load_podscript

PROGRAM = PODSCRIPTS / "hvdk8s_monitor.py"
T0 = 1_000_000.0


mon = load_podscript(PROGRAM.name, "hvdk8s_monitor")
RULES = json.loads(rules_module.rules_env()[rules_module.RULES_ENV])


def progress(rank, when, step, *, rate=None, avg=None, compute=None, step_time=None,
             warmup=False, total=60, per_step=16, host=None):
    r = {"kind": "progress", "rank": rank, "time": T0 + when, "step": step,
         "total_steps": total, "warmup": warmup, "images_per_step": per_step}
    for key, value in (("images_per_sec", rate), ("images_per_sec_avg", avg),
                       ("compute_time", compute), ("step_time", step_time), ("host", host)):
        if value is not None:
            r[key] = value
    return r


def beat(rank, when, step, every=2.0):
    return {"kind": "heartbeat", "rank": rank, "time": T0 + when, "step": step, "every": every}


def line(report: dict, tag: str = "") -> str:
    return f"{tag}HVDK8S_REPORT {json.dumps(report)}\n"


def test_it_is_python_3_8():
    ast.parse(PROGRAM.read_text(), feature_version=(3, 8))


def test_the_rules_it_gets_are_the_clis():
    spec = JobSpec(name="j", workers=2)
    env = rendering.env(spec, {"images_per_sec": 812.5})
    rules = json.loads(env[rules_module.RULES_ENV])
    assert rules == {"straggler_ratio": job_progress.STRAGGLER_RATIO,
                     "straggler_reports": job_progress.STRAGGLER_REPORTS,
                     "stall_steps": job_progress.STALL_STEPS,
                     "stall_heartbeats": job_progress.STALL_HEARTBEATS,
                     "heartbeat_seconds": job_progress.HEARTBEAT_SECONDS,
                     "stall_message_prefix": rules_module.STALL_MESSAGE_PREFIX}
    assert env["HVDK8S_PREDICTED_IMAGES_PER_SEC"] == "812.5"
    assert "HVDK8S_STALL_TIMEOUT" not in env and "HVDK8S_METRICS_PORT" not in env


# Report sequences both judges must agree on: steady, stalled with a silent rank, a
# straggler, a warm-up only, an ended job, a prediction-only expectation.
STALLED = ([progress(r, 4, 4, rate=16.0, avg=16.0, compute=0.9, host=f"j-worker-{r}")
            for r in (0, 1, 2)] + [beat(0, t, 4) for t in (6, 8, 10, 12)]
           + [beat(2, t, 4) for t in (6, 8, 10, 12)] + [beat(1, 5, 4)])
CASES = {
    "steady": ([progress(0, 5, 10, rate=7.0, avg=7.0, compute=1.0),
                progress(1, 5, 10, rate=9.0, avg=9.0, compute=1.0),
                progress(0, 10, 20, rate=8.0, avg=7.5, compute=1.0),
                progress(1, 10, 20, rate=8.0, avg=8.5, compute=1.0)], 11.0),
    "stalled": (STALLED, 12.0),
    "not yet stalled": (STALLED, 9.0),
    "straggler": ([progress(r, t, t, rate=8.0, avg=8.0, compute=2.0 if r == 1 else 1.0)
                   for t in (1, 2, 3, 4) for r in (0, 1, 2)], 4.5),
    "warm-up": ([progress(0, 3, 2, warmup=True, step_time=2.5)], 20.0),
    "ended": ([progress(0, 3, 60, rate=8.0, avg=8.0)], 100.0),
    "predicted": ([progress(0, 1, 0, per_step=32)], 30.0),
}
COMPARED = ("step", "total_steps", "images_per_sec", "images_per_sec_avg", "last_step_age",
            "expected_step_time", "eta_seconds", "stalled", "stall_after", "silent_ranks")


@pytest.mark.parametrize("case", sorted(CASES))
def test_it_judges_as_the_cli_does(case):
    reports, at = CASES[case]
    judge = mon.Progress(RULES, predicted=4.0)
    for r in reports:
        judge.add(r)
    mine = judge.judge(T0 + at)
    cli = summarize(reports, T0 + at, predicted_images_per_sec=4.0).to_dict()
    assert {k: mine[k] for k in COMPARED} == {k: cli[k] for k in COMPARED}
    assert [(s["rank"], s["compute_time"], s["median"]) for s in mine["stragglers"]] == [
        (s["rank"], s["compute_time"], s["median"]) for s in cli["stragglers"]]


def test_the_stall_is_said_in_the_clis_words():
    judge = mon.Progress(RULES)
    for r in STALLED:
        judge.add(r)
    cli = summarize(STALLED, T0 + 12.0)
    cli.places.update({r: f"host {h}" for r, h in cli.hosts.items()})
    assert RULES["stall_message_prefix"] + mon.stall_line(judge.judge(T0 + 12.0)) == \
        "hvdk8s: " + cli.problems()[0]


def monitor(tmp_path, tagged=True, trainer=None):
    return mon.Monitor(mon.Progress(RULES), RULES["stall_message_prefix"], tagged,
                       str(tmp_path), trainer)


def test_the_stall_file_names_the_silent_ranks_and_their_last_lines(tmp_path):
    m = monitor(tmp_path)
    m.line("[1,1]<stdout>:loading batch 17\n", T0)
    m.line("[1,1]<stderr>:NCCL WARN socket timeout\n", T0)
    m.line("[1,0]<stdout>:fine\n", T0)
    for r in STALLED:
        m.line(line(r, f"[1,{r['rank']}]<stdout>:"), r["time"])
    assert m.mark(m.judge(T0 + 9.0), T0 + 9.0) is None
    assert not (tmp_path / "stalled").exists()
    said = m.mark(m.judge(T0 + 12.0), T0 + 12.0)
    assert said == (tmp_path / "stalled").read_text() == (
        "hvdk8s: stalled: no step for 8s (threshold 6s); not reporting: rank 1 (host j-worker-1)\n"
        "[rank 1] loading batch 17\n[rank 1] NCCL WARN socket timeout\n")
    assert m.mark(m.judge(T0 + 12.5), T0 + 12.5) is None  # said once
    m.line(line(progress(0, 13, 5, rate=16.0, avg=16.0)), T0 + 13)
    assert m.mark(m.judge(T0 + 13.5), T0 + 13.5) is None
    assert not (tmp_path / "stalled").exists()


def test_untagged_output_keeps_no_rank_lines(tmp_path):
    m = monitor(tmp_path, tagged=False)
    m.line("[1] looks like a tag\n", T0)
    assert m.rank_lines == {}
    assert mon.tags_output(["mpirun", "--tag-output", "-np", "2", "python", "t.py"])
    assert mon.tags_output(["/bin/sh", "-c", "mpiexec -prepend-rank -n 2 python t.py"])
    assert not mon.tags_output(["mpirun", "-np", "2", "python", "t.py"])


def test_the_result_keeps_the_last_lines_and_drops_a_json_too_long(tmp_path):
    m = monitor(tmp_path)
    m.line('[1,0]<stdout>:HVDK8S_RESULT {"a": 1}\n', T0)
    m.line("[1,0]<stdout>:total images/sec: 9.5\n", T0)
    assert m.result() == 'HVDK8S_RESULT {"a": 1}\ntotal images/sec: 9.5\n'
    m.line("HVDK8S_RESULT " + json.dumps({"pad": "x" * 5000}) + "\n", T0)
    assert m.result() == "total images/sec: 9.5\n"


class Trainer:
    def __init__(self, fail=False):
        self.posts, self.fail = [], fail

    def post(self, **fields):
        if self.fail:
            raise RuntimeError("the endpoint moved")
        self.posts.append(fields)


def test_each_progress_report_is_posted_to_the_trainer_hook(tmp_path):
    trainer = Trainer()
    m = monitor(tmp_path, trainer=trainer)
    m.line(line(beat(0, 1, 0)), T0 + 1)
    m.line(line(progress(0, 5, 10, rate=8.0, avg=8.0)), T0 + 5)
    assert trainer.posts == [{"step": 10, "total_steps": 60, "images_per_sec": 8.0,
                              "eta_seconds": 50 * 16 / 8.0}]


def test_a_failing_trainer_hook_is_dropped_not_the_job(tmp_path, capsys):
    m = monitor(tmp_path, trainer=Trainer(fail=True))
    m.line(line(progress(0, 5, 10, rate=8.0, avg=8.0)), T0 + 5)
    m.line(line(progress(0, 6, 11, rate=8.0, avg=8.0)), T0 + 6)
    assert m.trainer is None
    assert capsys.readouterr().err.count("the Trainer status post failed") == 1


def test_the_trainer_module_beside_it_is_found(tmp_path, monkeypatch):
    (tmp_path / "hvdk8s_trainer_status.py").write_text(textwrap.dedent("""
        def from_environ(environ):
            return ("hook", environ.get("TRAINER_URL")) if environ.get("TRAINER_URL") else None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hvdk8s_trainer_status", raising=False)
    assert mon.trainer_hook({"TRAINER_URL": "https://t"}) == ("hook", "https://t")
    assert mon.trainer_hook({}) is None


def parse_exposition(text: str) -> dict[str, tuple[str, float]]:
    """Prometheus' text format: `# HELP`, `# TYPE` then `name value` lines, per metric."""
    types, values = {}, {}
    for row in text.splitlines():
        if row.startswith("# TYPE "):
            _, _, name, kind = row.split(" ", 3)
            types[name] = kind
        elif row and not row.startswith("#"):
            name, value = row.split(" ")
            assert name in types, f"{name} has no TYPE line before it"
            values[name] = (types[name], float(value))
    return values


def test_the_metrics_endpoint_serves_the_text_format(tmp_path):
    m = mon.Monitor(mon.Progress(RULES, predicted=10.0), RULES["stall_message_prefix"],
                    False, str(tmp_path))
    server = mon.serve_metrics(m, 0, "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            before = parse_exposition(reply.read().decode())
        assert before == {"hvdk8s_predicted_images_per_second": ("gauge", 10.0)}
        now = time.time()
        for r in (0, 1):
            m.line(line({**progress(r, 0, 30, rate=8.0, avg=8.0), "time": now}), now)
        with urllib.request.urlopen(url, timeout=10) as reply:
            got = parse_exposition(reply.read().decode())
        assert {k: v for k, v in got.items() if k != "hvdk8s_seconds_since_last_step"} == {
            "hvdk8s_step": ("gauge", 30.0), "hvdk8s_total_steps": ("gauge", 60.0),
            "hvdk8s_images_per_second": ("gauge", 8.0),
            "hvdk8s_predicted_images_per_second": ("gauge", 10.0),
            "hvdk8s_stalled": ("gauge", 0.0), "hvdk8s_stragglers": ("gauge", 0.0)}
        assert got["hvdk8s_seconds_since_last_step"][1] >= 0
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
    finally:
        server.shutdown()
        server.server_close()


def run_monitor(tmp_path, program: str, **env) -> tuple[subprocess.CompletedProcess, Path]:
    result = tmp_path / "result"
    done = subprocess.run(
        [sys.executable, str(PROGRAM), "--result", str(result), "--",
         sys.executable, "-c", program],
        env={**rules_module.rules_env(), "HVDK8S_MONITOR_DIR": str(tmp_path / "state"),
             "HVDK8S_TERMINATION_LOG": str(tmp_path / "termination-log"), **env},
        capture_output=True, text=True, timeout=60)
    return done, result


def test_it_passes_the_lines_on_and_keeps_the_result(tmp_path):
    program = ("import sys; print('[1,0]<stdout>:step 1'); print('total images/sec: 9.5');"
               " print('oops', file=sys.stderr); sys.exit(4)")
    done, result = run_monitor(tmp_path, program)
    assert (done.returncode, done.stdout, done.stderr) == (
        4, "[1,0]<stdout>:step 1\ntotal images/sec: 9.5\n", "oops\n")
    assert result.read_text() == "total images/sec: 9.5\n"
    assert list((tmp_path / "state").iterdir()) == []  # neither watching nor stalled after


def test_a_stall_past_the_timeout_ends_the_launch_line_with_the_reason(tmp_path):
    # heartbeats every 0.2 s and 0.1 s steps: a stall after 0.6 s without a step
    rules = {**RULES, "heartbeat_seconds": 0.2}
    report = {"kind": "progress", "rank": 0, "step": 3, "total_steps": 100,
              "images_per_step": 1, "images_per_sec": 10.0, "images_per_sec_avg": 10.0,
              "warmup": False, "host": "j-worker-0"}
    program = (f"import json, time; r = {report!r}; r['time'] = time.time(); "
               "print('HVDK8S_REPORT ' + json.dumps(r), flush=True); time.sleep(50)")
    done, _ = run_monitor(tmp_path, program, HVDK8S_STALL_TIMEOUT="1",
                          HVDK8S_PROGRESS_RULES=json.dumps(rules))
    assert done.returncode == mon.STALL_EXIT
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith("hvdk8s: stalled: no step for ")
    assert "not reporting: rank 0 (host j-worker-0) (--stall-timeout 1s); the launch line " \
           "was ended" in message
    assert message.strip() in done.stderr


def test_a_state_dir_it_cannot_make_or_a_port_taken_never_ends_the_job(tmp_path):
    (tmp_path / "file").write_text("")
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        done, result = run_monitor(tmp_path, "print('total images/sec: 9.5')",
                                   HVDK8S_MONITOR_DIR=str(tmp_path / "file" / "state"),
                                   HVDK8S_METRICS_PORT=str(taken.getsockname()[1]))
    assert (done.returncode, done.stdout) == (0, "total images/sec: 9.5\n")
    assert "hvdk8s: monitor: cannot mark progress in" in done.stderr
    assert "hvdk8s: monitor: no metrics, port" in done.stderr
    assert result.read_text() == "total images/sec: 9.5\n"


def test_a_child_left_holding_the_output_does_not_keep_it_running(tmp_path):
    """An ssh session the launch line leaves behind keeps its stdout open: the monitor ends
    with the launch line, after a bounded drain, not when that child does."""
    program = ("import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', "
               "'import time; time.sleep(600)']); print(c.pid, flush=True)")
    done, result = run_monitor(tmp_path, program)
    try:
        assert done.returncode == 0, done.stderr
        assert result.read_text() == ""
    finally:
        os.kill(int(done.stdout.split()[0]), signal.SIGKILL)
