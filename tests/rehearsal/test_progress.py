"""Progress rehearsed end to end: the built-in benchmark runs for real across 2 pods (real
sshd, mpirun, Horovod) in pods, operator and trainjob modes, and while it runs `hvdk8s get`
shows, through the Kubernetes API, the step and images/sec its ranks report. The launcher
pod's monitor runs too: its readiness probe (run in the container) passes while the ranks
progress, and its metrics endpoint (--metrics-port) serves the same step.

The rehearsal cluster has no API server of its own, so the job is also submitted, with the
same arguments, to the test API server (kubesim), whose launcher pod stays running, and
every line the real launcher prints is copied, as it comes, into that pod's log (kubesim's
LogBook: what its pods/log endpoint serves). The rehearsed objects are what `submit
--dry-run=server` printed for those arguments. Each `get` reads while copying is paused, so
the log it reads is exactly the lines copied so far."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from launcher.formats.rank_reports import iter_reports
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render_trainjob import horovod_runtime
from tests.k8s_env import hvdk8s
from tests.rehearsal.cluster import OperatorJob, PodsJob, TrainerJob

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.horovod]

STEPS = 40
SUBMIT = ("submit", "mpi", "--name", "demo", "--workers", "2", "--gpus", "0",
          "--image", "rehearsal", "--batch-size", "2", "--num-batches", str(STEPS),
          "--num-warmup-batches", "1", "--image-size", "32",
          "-e", "HVDK8S_REPORT_SECONDS=1", "--metrics-port", "9400")
METRICS_PORT = 9400


class LogCopy:
    """Copies the real launcher's complete lines into the kubesim launcher pod's log."""

    def __init__(self, srv, pod: dict, source) -> None:
        self.srv, self.source = srv, source
        self.uid = pod["metadata"]["uid"]
        self.container = pod["spec"]["containers"][0]["name"]
        self.lines: list[str] = []
        self.lock = threading.Lock()  # held by a reader: the served log stands still
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def copy_now(self) -> None:
        with self.lock:
            complete = self.source.log().split("\n")[:-1]
            for line in complete[len(self.lines):]:
                self.srv.logbook.append(self.uid, self.container, line)
                self.lines.append(line)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self.copy_now()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.copy_now()


def reported(lines: list[str]) -> tuple[int, float | None]:
    """What the ranks reported so far: the highest step a progress report or a heartbeat
    gave, and the median over ranks of each rank's latest interval rate (the job's rate: in
    an all-reduce every rank runs at it)."""
    steps = [r["step"] for r in iter_reports(lines) if r["kind"] in ("progress", "heartbeat")]
    latest = {r["rank"]: r for r in iter_reports(lines, kind="progress")}
    rates = [r["images_per_sec"] for r in latest.values()
             if not r.get("warmup") and "images_per_sec" in r]
    return max(steps, default=0), statistics.median(rates) if rates else None


def read_progress(k8s, copy: LogCopy) -> tuple[dict, tuple[int, float | None]]:
    with copy.lock:
        got = hvdk8s(k8s, "get", "demo", "-o", "json")
        expected = reported(copy.lines)
    assert got.exit_code == 0, got.output
    status = json.loads(got.stdout)
    assert status["phase"] == "Running", status
    return status["progress"], expected


def scrape(cluster, pod) -> dict[str, float]:
    """The launcher's /metrics as Prometheus would scrape it: from the node (the hub)."""
    fetch = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
             "sys.argv[1], timeout=5).read().decode())")
    done = subprocess.run(["ip", "netns", "exec", cluster.network.hub, sys.executable, "-c",
                           fetch, f"http://{pod.ip}:{METRICS_PORT}/metrics"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return {name: float(value) for name, value in
            (row.split(" ") for row in done.stdout.splitlines() if row and row[0] != "#")}


MODES = ["pods", "operator", "trainjob"]


# In the built image only: each run takes minutes, and the image is what users' pods run
# (the host's sshd, Open MPI and Horovod rehearse the same line in test_openmpi.py).
@pytest.mark.parametrize("mode", MODES)
def test_get_shows_the_ranks_progress_of_a_real_run_in_the_image(cluster, k8s, train_image,
                                                                 mode):
    """The pods run in the CPU training image (images/build.sh): its sshd, its mpirun."""
    cluster.image = train_image
    rehearse_progress(cluster, k8s, mode)


def rehearse_progress(cluster, k8s, mode: str) -> None:
    srv = k8s.server()
    runtime = horovod_runtime(build_spec(name="demo", image="rehearsal"))
    if mode == "operator":
        srv.install_mpi_operator()
    if mode == "trainjob":
        srv.install_trainer()
        srv.create(runtime)
    args = (*SUBMIT, "--mode", mode)
    shown = hvdk8s(k8s, *args, "--dry-run=server")
    assert shown.exit_code == 0, shown.output
    objects = [o for o in yaml.safe_load_all(shown.stdout) if o]

    srv.script_pod(r"demo-(worker|node)-.*", exit_code=None)
    srv.script_pod(r"demo-launcher-.*", exit_code=None)  # its log: the real one, copied
    submitted = hvdk8s(k8s, *args)
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: any(p["metadata"]["name"].startswith("demo-launcher-")
                             and (p.get("status") or {}).get("phase") == "Running"
                             for p in srv.objects("Pod", k8s.namespace)), timeout=60)
    (api_launcher,) = [p for p in srv.objects("Pod", k8s.namespace)
                       if p["metadata"]["name"].startswith("demo-launcher-")]

    if mode == "pods":
        job = PodsJob(cluster, objects)
    elif mode == "operator":
        job = OperatorJob(cluster, objects)
    else:
        job = TrainerJob(cluster, objects, runtime)
    copy = LogCopy(srv, api_launcher, job.launcher)

    reads = []  # (what get showed, what the ranks had reported in the log it read)
    scraped: dict[str, float] = {}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and job.launcher.exit_code() is None and len(reads) < 2:
        shown_progress, expected = read_progress(k8s, copy)
        step = shown_progress["step"] if shown_progress else 0
        timed = shown_progress is not None and shown_progress["images_per_sec"] is not None
        if timed and step < STEPS and (not reads or step > reads[-1][0]["step"]):
            reads.append((shown_progress, expected))
            if not scraped:
                scraped = scrape(cluster, job.launcher)
        time.sleep(0.5)
    ready_while_running = job.launcher.ready
    out = job.finish(timeout=600)
    copy.stop()
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())

    # Read while it ran: twice, the step growing, each read what the ranks had reported.
    assert len(reads) == 2, (reads, out.launcher_log)
    for shown_progress, (step, rate) in reads:
        assert (shown_progress["step"], shown_progress["total_steps"]) == (step, STEPS)
        assert shown_progress["images_per_sec"] == pytest.approx(rate), shown_progress
        assert rate > 0
    assert reads[1][0]["step"] > reads[0][0]["step"]
    # The whole log reached the server: the last step, at the rate the ranks last reported.
    final, (step, rate) = read_progress(k8s, copy)
    assert (final["step"], step) == (STEPS, STEPS), final
    assert final["images_per_sec"] == pytest.approx(rate)
    # Two ranks, each in its own pod, reported.
    assert {r["rank"] for r in iter_reports(copy.lines, kind="progress")} == {0, 1}
    # The monitor watched: the probe, run in the container, passed while the ranks
    # progressed; never a stall.
    probes = job.launcher.probes
    assert ready_while_running and (True, "") in probes, probes
    assert not any("stalled" in said for _, said in probes), probes
    # Its metrics: the step the ranks reported and the run's length, served for real.
    assert 0 < scraped["hvdk8s_step"] <= STEPS and scraped["hvdk8s_total_steps"] == STEPS
    assert scraped["hvdk8s_stalled"] == 0 and scraped["hvdk8s_images_per_second"] > 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(c) for c in children]
        todo += [int(c) for c in children]
    return out


def _rank_process(pod) -> tuple[int, int] | None:
    """(pid, rank) of the benchmark rank running in `pod`, once it runs."""
    for pid in _descendants(pod.init_pid() or 0):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hvd_cnn_bench.py" in cmdline:
            rank = next((int(e.split(b"=", 1)[1]) for e in environ
                         if e.startswith(b"OMPI_COMM_WORLD_RANK=")), None)
            if rank is not None:
                return pid, rank
    return None


def test_a_stopped_rank_fails_the_probe_and_the_stall_timeout_ends_the_job(cluster, k8s,
                                                                           train_image):
    """A rank stopped (SIGSTOP) in its pod: the launcher's monitor marks the stall, its probe
    fails naming that rank, and --stall-timeout ends the launch line with the reason."""
    cluster.image = train_image
    args = ("submit", "mpi", "--name", "demo", "--workers", "2", "--gpus", "0", "--image",
            "rehearsal", "--batch-size", "2", "--num-batches", "100000",
            "--num-warmup-batches", "1", "--image-size", "32", "-e", "HVDK8S_REPORT_SECONDS=1",
            "--stall-timeout", "20", "--mode", "pods")
    shown = hvdk8s(k8s, *args, "--dry-run=server")
    assert shown.exit_code == 0, shown.output
    job = PodsJob(cluster, [o for o in yaml.safe_load_all(shown.stdout) if o])
    job.wait_log(job.launcher, "HVDK8S_REPORT", timeout=300)
    worker = job.workers[-1]
    deadline = time.monotonic() + 120
    while (found := _rank_process(worker)) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert found is not None, worker.log()
    pid, rank = found
    deadline = time.monotonic() + 120  # past the warm-up: a step timed, then stopped
    while '"warmup":false' not in job.launcher.log() and time.monotonic() < deadline:
        time.sleep(0.5)
    os.kill(pid, signal.SIGSTOP)
    try:
        out = job.finish(timeout=300)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    stalled = [said for ok, said in job.launcher.probes if not ok and "stalled" in said]
    assert stalled and f"not reporting: rank {rank}" in stalled[-1], job.launcher.probes
    assert out.launcher_exit == 3, out.launcher_log
    assert "(--stall-timeout 20s); the launch line was ended" in out.launcher_log
