"""What hvdk8s' containers do, played by the kubelet model where no test scripts them.

`hvdk8s dev cluster` runs no container; this is what lets a user watch a job there from
submit to end. Each container's program is read from its pod as a kubelet would start it
(command, args, env, the files of its ConfigMap and downwardAPI volumes) and recognised as one of
hvdk8s' own (mpijob/k8s/podscripts, mpijob.k8s.command, mpijob.k8s.render_trainjob):

- a launcher (built-in `launcher.sh`, the operator and Trainer wait script, `elastic.sh`):
  waits until every host of its hostfile answers (a Running pod of that hostname), says
  so as the script does, then plays its launch line's program and ends with its status;
  its readiness probe (the launch line's monitor's) passes: a played program never stalls;
- the built-in benchmark (images/benchmark/hvd_cnn_bench.py) as that program: its header,
  warm-up, `<step>\\timages/sec: X +/- Y (jitter = Z)\\t<loss>` lines, `total images/sec`
  and `HVDK8S_RESULT {json}`, every rank's `HVDK8S_REPORT` progress line every 5 seconds
  and heartbeat every 2, with the benchmark's fields (hvd_cnn_bench.py Progress,
  start_heartbeat; images/benchmark/hvdk8s_report.py), at the step time hvdk8s predicted for the job (the
  prediction annotation `submit` puts on the job's root object; STEP_SECONDS without one);
- a TrainJob's launcher whose script exports Trainer's status endpoint (its TrainJobStatus
  gate on: mpijob.k8s.trainer_progress) posts rank 0's progress there as it writes it,
  through the poster the job's ConfigMap ships, run on what the pod holds (podview.py);
- any other program: HVDK8S_DEV_SECONDS (10) seconds, then its status;
- a built-in worker (`worker.sh`): serves until its launcher ends and releases it (exit 0),
  as the launcher's `release_workers` does; operator and Trainer workers (sshd) run until
  their controller deletes them (the MPI Operator's cleanPodPolicy, JobSet's end);
- the start gate (`gate.sh`): exits 0 once every worker answers.

A program fails where the user asks it to (documented in `hvdk8s dev cluster --help`):
HVDK8S_DEV_EXIT=N in the job's environment (`--env`), or a shell command whose last
statement is `exit N`. The launch line then ends as mpirun ends when a rank exits with N:
Open MPI's (4.1, orte/tools/orterun help) or Hydra's report, and status N.

Simulated seconds pass `speed` times faster than the kubelet's clock.
"""

from __future__ import annotations

import json
import math
import random
import re
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mpijob.jobspec import names

from . import podview
from .kubelet import Run, Waited
from .resources import Registry
from .store import Store
from .trainer_status import StatusServer

# Where hvdk8s writes its launch line (mpijob.k8s.render, mpijob.k8s.command).
BENCHMARK = "hvd_cnn_bench.py"
GATE_MARK = "hvdk8s start gate"
TRAINER_LAUNCHER_MARK = "hvdk8s: the launcher of this TrainJob"
OPERATOR_LAUNCHER_ARG0 = "hvdk8s-launcher"
DEFAULT_HOSTFILE = "/etc/hvdk8s/hostfile"
# The TrainJob's poster of progress to Trainer (mpijob.k8s.command TRAINER_STATUS_IN_POD),
# and the variable its from_environ needs first.
TRAINER_POSTER = "/etc/hvdk8s/hvdk8s_trainer_status.py"
TRAINER_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"

# Simulated seconds of a benchmark's life, besides its steps.
START_SECONDS = 5.0  # Python, TensorFlow and Horovod start; hvd.init
TRACE_SECONDS = 8.0  # the first warm-up step: tracing, graph optimisation, autotuning
REPORT_SECONDS = 5.0  # between two progress reports of a rank (hvdk8s_report.py)
HEARTBEAT_SECONDS = 2.0  # between two heartbeats of a rank
STEP_SECONDS = 0.5  # a step where the job carries no prediction
STEP_JITTER = 0.01  # relative spread of step times
COMMAND_SECONDS = 10.0  # a program that is not the benchmark (HVDK8S_DEV_SECONDS)
RELEASE_GRACE_SECONDS = 120.0  # worker.sh HVDK8S_LAUNCHER_GRACE_SECONDS
DEFAULT_WAIT_SECONDS = 600.0  # launcher.sh HVDK8S_WORKER_WAIT_SECONDS

# images/benchmark/hvd_cnn_bench.py: MODELS (native size, default batch), the separator.
NATIVE_SIZE = {"inception3": 299}
DEFAULT_BATCH = {"resnet101": 32, "resnet152": 32, "resnet101_v2": 32, "resnet152_v2": 32,
                 "inception3": 32, "mobilenet": 32, "trivial": 32}
SEPARATOR = "-" * 64
IMAGENET_TRAIN_EXAMPLES = 1281167
_EXIT = re.compile(r"(?:^|[;&|\n]|&&|\|\|)\s*exit\s+(\d+)\s*;?\s*$")

OPEN_MPI_FAILURE = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[{jobid},1],0]
  Exit code:    {code}
--------------------------------------------------------------------------"""
HYDRA_FAILURE = """\

===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 0 PID {pid} RUNNING AT {host}
=   EXIT STATUS: {code}
==================================================================================="""


@dataclass
class Player:
    """Plays hvdk8s' containers on the model kubelet (kubelet.Lives)."""

    store: Store
    registry: Registry
    speed: float = 1.0
    # Trainer's status server, its TrainJobStatus gate on (the API server sets it)
    trainer_status: StatusServer | None = None
    _files: tempfile.TemporaryDirectory | None = None  # the pods' projected files

    def __post_init__(self):
        if not self.speed > 0:
            raise ValueError("speed must be > 0")

    def run_for(self, pod: dict, container: dict) -> Run | None:
        c = _Program(self, pod, container)
        argv = c.argv
        if len(argv) >= 3 and argv[:2] == ["/bin/sh", "-c"] and GATE_MARK in argv[2]:
            return self._gate(c)
        if len(argv) >= 2 and argv[0] == "/bin/sh" and argv[1].endswith("/worker.sh"):
            return Run(exit_code=None, wait=_Release(self, pod))
        if len(argv) >= 2 and argv[0] == "/bin/sh" and argv[1].endswith("/launcher.sh"):
            return self._launcher(c, argv[2:], "built-in")
        if len(argv) >= 2 and argv[0] == "/bin/sh" and argv[1].endswith("/elastic.sh"):
            return self._launcher(c, argv[2:], "elastic")
        if len(argv) >= 4 and argv[:2] == ["/bin/sh", "-c"] and argv[3] == OPERATOR_LAUNCHER_ARG0:
            return self._launcher(c, argv[4:], "operator")
        if len(argv) == 2 and argv[0] == "/bin/sh":
            text = c.read(argv[1]) or ""
            if TRAINER_LAUNCHER_MARK in text:
                return self._trainer_launcher(c, text)
        return None  # sshd and what hvdk8s does not run: until deleted

    # -- the programs ---------------------------------------------------------------------------
    def _gate(self, c: _Program) -> Run:
        hosts = c.env.get("HVDK8S_GATE_HOSTS", "").split() or c.hosts(
            c.env.get("HVDK8S_HOSTFILE", DEFAULT_HOSTFILE))
        wait = _Hosts(self, c.namespace, hosts, "hvdk8s: worker {host} started", None, "")
        return Run(["hvdk8s: every worker started; the start gate opens (--start-timeout no "
                    "longer applies)"], exit_code=0, wait=wait)

    def _trainer_launcher(self, c: _Program, text: str) -> Run | None:
        """The TrainJob launcher's script (render_trainjob.launch_script): one-line exports,
        then `exec` of the wait script, to the end."""
        lines = text.splitlines()
        c.env.update(script_exports(text))
        for i, line in enumerate(lines):
            if line.startswith("exec "):
                try:
                    words = shlex.split("\n".join(lines[i:]))
                except ValueError:
                    return None
                if OPERATOR_LAUNCHER_ARG0 in words:
                    at = words.index(OPERATOR_LAUNCHER_ARG0)
                    return self._launcher(c, words[at + 1:], "operator")
        return None

    def _launcher(self, c: _Program, line: list[str], flavour: str) -> Run:
        hostfile = c.env.get("HVDK8S_HOSTFILE", DEFAULT_HOSTFILE)
        hosts = [] if flavour == "elastic" else c.hosts(hostfile)
        limit = _seconds(c.env.get("HVDK8S_WORKER_WAIT_SECONDS"), DEFAULT_WAIT_SECONDS)
        port = c.env.get("HVDK8S_SSH_PORT", "2222")
        gave_up = ("hvdk8s: worker {host} did not answer on ssh port " + port + " within "
                   f"{limit:.0f}s" if flavour == "built-in" else
                   "hvdk8s: worker {host} did not answer on ssh within " + f"{limit:.0f}s")
        wait = _Hosts(self, c.namespace, hosts, "hvdk8s: worker {host} is ready",
                      limit or None, gave_up)
        lines: list[tuple[float, object]] = []
        if flavour == "built-in":
            lines.append((0.0, "hvdk8s: starting: " + " ".join(line)))
        code, played = self._program(c, line)
        message = _result_message(played) if code == 0 and flavour != "elastic" else None
        return Run(self._delays([*lines, *played]), exit_code=code, wait=wait,
                   probe=_monitor_probe, termination_message=message)

    def _trainer_poster(self, c: _Program) -> Callable[[int, int, float, float], None] | None:
        """The job's poster (its ConfigMap's), on the endpoint, CA and token the pod holds;
        None where the launcher got no endpoint or this cluster serves none."""
        server = self.trainer_status
        source = c.read(TRAINER_POSTER) if TRAINER_URL_ENV in c.env else None
        if server is None or source is None:
            return None
        if self._files is None:
            self._files = tempfile.TemporaryDirectory(prefix="kubesim-pods-")
        environ = podview.container_view(self.store, c.pod, c.container, c.env,
                                         Path(self._files.name) / c.uid, server.issue,
                                         server.resolve)
        module: dict = {"__name__": "hvdk8s_trainer_status"}
        exec(compile(source, TRAINER_POSTER, "exec"), module)  # noqa: S102 - the pod's program
        poster = module["from_environ"](environ, log=lambda text: None)
        return None if poster is None else poster.post

    def _program(self, c: _Program, line: list[str]) -> tuple[int, list[tuple[float, object]]]:
        """The launch line's life: (its status, [(simulated second, line)])."""
        code = _exit_code(c.env.get("HVDK8S_DEV_EXIT"))
        shell_exit = next((int(m.group(1)) for w in line if (m := _EXIT.search(w))), None)
        if code is None:
            code = shell_exit if shell_exit is not None else 0
        ranks = _ranks(line)
        bench = next((i for i, w in enumerate(line) if w.endswith(BENCHMARK)), None)
        if bench is not None:
            step, share = self._step_seconds(c.pod)
            played, end = _Benchmark(_flags(line[bench + 1:]), ranks, step, c.pod,
                                     failing=code != 0, code=code, compute_share=share,
                                     on_progress=self._trainer_poster(c)).play()
        else:
            seconds = _seconds(c.env.get("HVDK8S_DEV_SECONDS"), COMMAND_SECONDS)
            what = " ".join(line)
            played = [(0.0, f"hvdk8s dev cluster: no program runs here; `{what}` plays "
                            f"{seconds:g}s and ends with status {code} (HVDK8S_DEV_SECONDS, "
                            "HVDK8S_DEV_EXIT)")]
            end = seconds
        if code != 0:
            report = (OPEN_MPI_FAILURE.format(jobid=random.Random(c.uid).randint(1000, 65000),
                                              code=code)
                      if "-n" not in line else
                      HYDRA_FAILURE.format(pid=random.Random(c.uid).randint(50, 900),
                                           host=c.hostname, code=code))
            played += [(end, text) for text in report.splitlines()]
        return code, played

    def _step_seconds(self, pod: dict) -> tuple[float, float]:
        """The predicted step time and the share of it that is the rank's own compute."""
        text = _root_annotation(self, pod, names.ANNOTATION_PREDICTION)
        try:
            prediction = json.loads(text) if text else {}
            step = float(prediction.get("step_seconds", STEP_SECONDS))
            compute = float(prediction.get("compute_seconds", step))
        except (ValueError, TypeError, AttributeError):
            step = compute = STEP_SECONDS
        if not (step > 0 and math.isfinite(step)):
            return STEP_SECONDS, 1.0
        share = compute / step if 0 < compute <= step else 1.0
        return step, share

    def _delays(self, timed: list[tuple[float, object]]) -> list[tuple[float, object]]:
        """[(simulated second, line)] -> [(kubelet seconds since the previous line, line)]."""
        out, last = [], 0.0
        for at, line in sorted(timed, key=lambda t: t[0]):
            out.append(((at - last) / self.speed, line))
            last = at
        return out

    def seconds(self, simulated: float) -> float:
        return simulated / self.speed


# -- reading a container as the kubelet starts it -----------------------------------------------
class _Program:
    def __init__(self, player: Player, pod: dict, container: dict):
        self.player, self.pod, self.container = player, pod, container
        self.argv = [*(container.get("command") or []), *(container.get("args") or [])]
        self.env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or []
                    if "valueFrom" not in e}
        m = pod["metadata"]
        self.namespace, self.uid = m["namespace"], m["uid"]
        self.hostname = pod["spec"].get("hostname") or m["name"]

    def read(self, path: str) -> str | None:
        """A file of one of the container's ConfigMap volumes (the kubelet's volume
        manager: a key per file, or `items` naming their paths) or downwardAPI volumes
        (pkg/volume/downwardapi/downwardapi.go CollectData: an item's annotation or label,
        as is, `metadata.annotations['<key>']`; empty where the pod has none)."""
        volumes = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        for mount in self.container.get("volumeMounts") or []:
            root = mount["mountPath"].rstrip("/") + "/"
            volume = volumes.get(mount["name"]) or {}
            if not path.startswith(root):
                continue
            relative = path[len(root):]
            if "downwardAPI" in volume:
                return _downward_file(self.pod, volume["downwardAPI"], relative)
            source = volume.get("configMap")
            if source is None:
                continue
            cm = self.player.store.get("/configmaps", self.namespace, source.get("name", ""))
            data = (cm or {}).get("data") or {}
            items = source.get("items")
            if items:
                key = next((i["key"] for i in items if i.get("path") == relative), None)
                return data.get(key) if key else None
            return data.get(relative)
        return None

    def hosts(self, hostfile: str) -> list[str]:
        text = self.read(hostfile) or ""
        return [re.split(r"[: ]", line, maxsplit=1)[0] for line in text.splitlines()
                if line.strip()]


_FIELD_PATH = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")


def _downward_file(pod: dict, source: dict, relative: str) -> str | None:
    """The file of a downwardAPI volume at `relative`, for the items this model reads."""
    item = next((i for i in source.get("items") or [] if i.get("path") == relative), None)
    found = _FIELD_PATH.fullmatch(((item or {}).get("fieldRef") or {}).get("fieldPath", ""))
    if found is None:
        return None
    return (pod["metadata"].get(found.group(1)) or {}).get(found.group(2), "")


def _monitor_probe(logs_for: float | None) -> tuple[bool, str]:
    """The launcher's readiness probe (mpijob.k8s.monitor): it passes from the start, and a
    played program never stalls."""
    return True, ""


def _root_annotation(player: Player, obj: dict, key: str, depth: int = 6) -> str | None:
    """An annotation of the object or of its controllers up the ownerReferences (a pod's
    Job, its MPIJob; a pod's Job, JobSet, TrainJob)."""
    ns = obj["metadata"].get("namespace", "")
    for _ in range(depth):
        value = (obj["metadata"].get("annotations") or {}).get(key)
        if value:
            return value
        ref = next((r for r in obj["metadata"].get("ownerReferences") or []
                    if r.get("controller")), None)
        if ref is None:
            return None
        group = ref.get("apiVersion", "").rpartition("/")[0]
        rt = next((t for t in player.registry.all()
                   if t.kind == ref.get("kind") and t.group == group), None)
        owner = player.store.get(rt.key, ns if rt.namespaced else "", ref["name"]) \
            if rt is not None else None
        if owner is None:
            return None
        obj = owner
    return None


def _pod_answers(pod: dict) -> bool:
    """sshd answers once its container runs (the kubelet published it Running)."""
    status = pod.get("status") or {}
    return (not pod["metadata"].get("deletionTimestamp") and status.get("phase") == "Running"
            and all("running" in (s.get("state") or {})
                    for s in status.get("containerStatuses") or [{}]))


@dataclass
class _Hosts:
    """Waits for each host in turn to answer on ssh, as the launcher and gate scripts do;
    gives up (status 1) after `limit` simulated seconds."""

    player: Player
    namespace: str
    hosts: list[str]
    said: str
    limit: float | None
    gave_up: str
    _next: int = 0
    _since: float | None = None

    def poll(self, now: float) -> Waited:
        if self._since is None:
            self._since = now
        pods = self.player.store.items("/pods", self.namespace)
        by_host: dict[str, list[dict]] = {}
        for p in pods:
            by_host.setdefault(p["spec"].get("hostname") or p["metadata"]["name"], []).append(p)
        lines = []
        while self._next < len(self.hosts):
            host = self.hosts[self._next]
            if not any(_pod_answers(p) for p in by_host.get(host.split(".")[0], [])):
                break
            lines.append(self.said.format(host=host))
            self._next += 1
        if self._next == len(self.hosts):
            return Waited(tuple(lines), done=True)
        if self.limit is not None and now - self._since >= self.player.seconds(self.limit):
            return Waited((*lines, self.gave_up.format(host=self.hosts[self._next])),
                          exit_code=1)
        return Waited(tuple(lines))


@dataclass
class _Release:
    """worker.sh: exit 0 once the launcher released this worker (it ended with status 0,
    or with any status when it is the Job's last try, HVDK8S_RELEASE_ON_FAILURE=1; never
    under cleanPodPolicy None); exit 1 when its launcher is gone unreleased for the grace."""

    player: Player
    pod: dict
    _orphaned_at: float | None = None

    def poll(self, now: float) -> Waited:
        m = self.pod["metadata"]
        job = (m.get("labels") or {}).get(names.LABEL_JOB)
        if not job:
            return Waited()
        launchers = [p for p in self.player.store.items("/pods", m["namespace"])
                     if (p["metadata"].get("labels") or {}).get(names.LABEL_JOB) == job
                     and (p["metadata"].get("labels") or {}).get(names.LABEL_ROLE) == names.ROLE_LAUNCHER]
        if not launchers:
            return Waited()
        latest = max(launchers, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        ended = _terminated(latest)
        if ended is None:
            self._orphaned_at = None
            return Waited()
        env = {e["name"]: e.get("value") for c in latest["spec"].get("containers") or []
               for e in c.get("env") or []}
        if env.get("HVDK8S_CLEAN_POD_POLICY") == "None":
            return Waited()
        if ended == 0 or env.get("HVDK8S_RELEASE_ON_FAILURE", "1") == "1":
            return Waited((f"hvdk8s: launcher finished (exit {ended}); releasing this worker",),
                          exit_code=0)
        if self._orphaned_at is None:
            self._orphaned_at = now
        if now - self._orphaned_at >= self.player.seconds(RELEASE_GRACE_SECONDS):
            return Waited((f"hvdk8s: the launcher is gone without releasing this worker "
                           f"({RELEASE_GRACE_SECONDS:.0f}s); exiting",), exit_code=1)
        return Waited()


def _result_message(played: list[tuple[float, object]]) -> str | None:
    """What the launch scripts' result filter leaves in the termination message on status 0
    (mpijob/k8s/podscripts/launcher.sh, hvdk8s_launch: the last HVDK8S_RESULT line, then the
    last `total images/sec` line); elastic.sh has no filter."""
    texts = [t for _, t in played if isinstance(t, str)]
    json_line = next((t[t.index("HVDK8S_RESULT "):] for t in reversed(texts)
                      if "HVDK8S_RESULT " in t), "")
    rate = next((t[t.index("total images/sec:"):] for t in reversed(texts)
                 if "total images/sec:" in t), "")
    if len(json_line) + len(rate) > 4000:
        json_line = ""
    kept = [t for t in (json_line, rate) if t]
    return "\n".join(kept) + "\n" if kept else None


def _terminated(pod: dict) -> int | None:
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = (s.get("state") or {}).get("terminated")
        if ended is not None:
            return int(ended.get("exitCode", 1))
    return None


# -- the benchmark ------------------------------------------------------------------------------
@dataclass
class _Benchmark:
    flags: dict
    ranks: int
    step_seconds: float
    pod: dict
    failing: bool = False
    compute_share: float = 1.0  # of a step, the rank's own compute (the rest: all-reduce)
    code: int = 0
    # called with (step, total steps, images/sec, ETA seconds) as rank 0's report is written
    on_progress: Callable[[int, int, float, float], None] | None = None
    timed: list = field(default_factory=list)

    def play(self) -> tuple[list[tuple[float, object]], float]:
        f = self.flags
        model = f.get("model", "resnet50")
        batch = int(f.get("batch_size") or 0) or DEFAULT_BATCH.get(model, 64)
        steps = max(1, int(f.get("num_batches") or 100))
        warmup = max(0, int(f.get("num_warmup_batches") or 10))
        every = max(1, int(f.get("display_every") or 10))
        rng = random.Random(self.pod["metadata"]["uid"])
        t = START_SECONDS
        for line in self._header(model, batch, steps):
            self.timed.append((t, line))
        self.timed.append((t, "Running warm up"))
        beats_from = t
        t += TRACE_SECONDS + warmup * self.step_seconds
        per_step = batch * self.ranks
        if warmup:  # what a stall is measured against until the first timed report
            for rank in range(self.ranks):
                self.timed.append((t, _report_line(
                    "progress", rank, step=0, total_steps=steps, warmup=True,
                    images_per_step=per_step, step_time=self.step_seconds)))
        self.timed.append((t, "Done warm up"))
        if self.failing:
            self.timed.append((t, f"hvdk8s dev cluster: rank 0 exits with status {self.code} "
                                  f"(HVDK8S_DEV_EXIT={self.code})"))
            return self.timed, t
        self.timed.append((t, "Step\tImg/sec\ttotal_loss"))
        timing = _Timing(batch)
        loss = 7.9 + rng.uniform(-0.05, 0.05)
        last_report = start = t
        interval = [0, 0.0]  # steps, seconds since the last report
        step_at: list[tuple[float, int]] = []
        for step in range(steps):
            dt = self.step_seconds * max(0.5, 1 + rng.gauss(0, STEP_JITTER))
            timing.add(dt)
            t += dt
            step_at.append((t, step + 1))
            interval = [interval[0] + 1, interval[1] + dt]
            loss = max(0.0, loss - rng.uniform(0.0, 0.004))
            if step == 0 or (step + 1) % every == 0:
                self.timed.append((t, timing.line(step + 1, loss)))
            if t - last_report >= REPORT_SECONDS or step == steps - 1:
                mean = interval[1] / interval[0]
                for rank in range(self.ranks):
                    report = _report_line(
                        "progress", rank, step=step + 1, total_steps=steps, warmup=False,
                        images_per_step=per_step, step_time=mean,
                        compute_time=mean * self.compute_share,
                        images_per_sec=per_step / mean,
                        images_per_sec_avg=per_step * (step + 1) / (t - start))
                    if rank == 0 and self.on_progress is not None:
                        report = _posting(report, self.on_progress, step + 1, steps,
                                          per_step / mean, (steps - step - 1) * mean)
                    self.timed.append((t, report))
                interval, last_report = [0, 0.0], t
        self._heartbeats(beats_from, t, step_at)
        times = timing.times
        loop = t - start
        rate = steps * batch / loop
        total = self.ranks * rate
        for line in [SEPARATOR, f"total images/sec: {total:.2f}", SEPARATOR,
                     "input: synthetic, input wait: 0.0% of step time"]:
            self.timed.append((t, line))
        self.timed.append((t, _result_line(self._result(model, batch, steps, warmup, times,
                                                         loop, loss))))
        return self.timed, t

    def _heartbeats(self, start: float, end: float, step_at: list[tuple[float, int]]) -> None:
        """Every rank's `heartbeat` (its step) every HEARTBEAT_SECONDS while it trains."""
        beat, i, step = start + HEARTBEAT_SECONDS, 0, 0
        while beat < end:
            while i < len(step_at) and step_at[i][0] <= beat:
                step = step_at[i][1]
                i += 1
            for rank in range(self.ranks):
                self.timed.append((beat, _report_line("heartbeat", rank, step=step,
                                                      every=HEARTBEAT_SECONDS)))
            beat += HEARTBEAT_SECONDS

    def _header(self, model: str, batch: int, steps: int) -> list[str]:
        """hvd_cnn_bench.py header_lines, for TensorFlow 2.15."""
        f = self.flags
        device = f.get("device", "gpu")
        return [
            "TensorFlow:  2.15",
            f"Model:       {model}",
            f"Dataset:     imagenet ({'synthetic' if f.get('data_name', 'synthetic') == 'synthetic' else 'real'})",
            "Mode:        training",
            "SingleSess:  False",
            f"Batch size:  {batch * self.ranks} global",
            f"             {batch} per device",
            f"Num batches: {steps}",
            f"Num epochs:  {steps * batch * self.ranks / IMAGENET_TRAIN_EXAMPLES:.2f}",
            f"Devices:     {[f'horovod/{device}:{i}' for i in range(self.ranks)]}",
            "NUMA bind:   False",
            f"Data format: {f.get('data_format') or ('NCHW' if device == 'gpu' else 'NHWC')}",
            f"Optimizer:   {f.get('optimizer', 'sgd')}",
            f"Variables:   {f.get('variable_update', 'horovod')}",
            f"Image size:  {self._image_size(model)}",
            f"Precision:   {'fp16' if f.get('use_fp16') else 'fp32'}",
            f"XLA:         {bool(f.get('xla'))}",
            "Threads:     intra=default inter=default",
            "==========",
        ]

    def _image_size(self, model: str) -> int:
        return int(self.flags.get("image_size") or 0) or NATIVE_SIZE.get(model, 224)

    def _result(self, model, batch, steps, warmup, times, loop, loss) -> dict:
        f = self.flags
        rank_rate = steps * batch / loop
        timing = _Timing(batch)
        for seconds in times:
            timing.add(seconds)
        figures = timing.figures()
        return {
            "model": model, "batch_size": batch, "global_batch_size": batch * self.ranks,
            "image_size": self._image_size(model), "num_batches": steps,
            "num_warmup_batches": warmup,
            "precision": "fp16" if f.get("use_fp16") else "fp32",
            "device": f.get("device", "gpu"), "xla": bool(f.get("xla")),
            "data_format": f.get("data_format") or "NCHW", "optimizer": f.get("optimizer", "sgd"),
            "variable_update": f.get("variable_update", "horovod"), "world_size": self.ranks,
            "per_rank_images_per_sec": [rank_rate] * self.ranks,
            "total_images_per_sec": self.ranks * rank_rate,
            "sum_images_per_sec": self.ranks * rank_rate,
            "images_per_sec": figures[0], "images_per_sec_uncertainty": figures[1],
            "images_per_sec_jitter": figures[2],
            "step_time_mean_s": sum(times) / len(times), "step_time_median_s": _median(times),
            "loop_time_s": loop, "final_loss": loss, "conv_biases_dropped": 0,
            "num_intra_threads": 0, "num_inter_threads": 0,
            "tensorflow_version": "2.15.1", "horovod_version": "0.28.1",
            "hostname": self.pod["spec"].get("hostname") or self.pod["metadata"]["name"],
            "data_name": "synthetic", "input": "synthetic", "input_wait_share": 0.0,
            "per_rank_input_wait_share": [0.0] * self.ranks,
        }


JITTER_WINDOW = 100  # the jitter (a median) over at most the last this many steps


@dataclass
class _Timing:
    """hvd_cnn_bench.py perf_timing over the steps so far, kept as running sums so that a
    long run costs linear time: rate, its standard error, its jitter (1.4826 x the median
    absolute deviation of the per-step rates; of the last JITTER_WINDOW in a longer run)."""

    batch: int
    times: list[float] = field(default_factory=list)
    _time_sum: float = 0.0
    _speed_sum: float = 0.0
    _speed_squares: float = 0.0

    def add(self, seconds: float) -> None:
        speed = self.batch / seconds
        self.times.append(seconds)
        self._time_sum += seconds
        self._speed_sum += speed
        self._speed_squares += speed * speed

    def figures(self) -> tuple[float, float, float]:
        n = len(self.times)
        mean = self._speed_sum / n
        std = math.sqrt(max(0.0, self._speed_squares / n - mean * mean))
        speeds = [self.batch / x for x in self.times[-JITTER_WINDOW:]]
        med = _median(speeds)
        return (self.batch / (self._time_sum / n), std / math.sqrt(n),
                1.4826 * _median([abs(s - med) for s in speeds]))

    def line(self, step: int, loss: float) -> str:
        rate, err, jitter = self.figures()
        return f"{step}\timages/sec: {rate:.1f} +/- {err:.1f} (jitter = {jitter:.1f})\t{loss:.3f}"


def _median(values: list[float]) -> float:
    o = sorted(values)
    mid = len(o) // 2
    return o[mid] if len(o) % 2 else (o[mid - 1] + o[mid]) / 2


def _report_line(kind: str, rank: int, **fields) -> Callable[[], str]:
    """hvdk8s_report.report(kind, ...), the fields the benchmark's Progress and heartbeat
    write: stamped when it is written."""
    def line() -> str:
        record = {"kind": kind, "rank": rank, "time": time.time(), **fields}
        return "HVDK8S_REPORT " + json.dumps(record, separators=(",", ":"), sort_keys=True)
    return line


def _posting(line: Callable[[], str], post: Callable, *progress) -> Callable[[], str]:
    """The line, posting the progress when it is written (the launcher reads the ranks'
    reports as they come)."""
    def write() -> str:
        post(*progress)
        return line()
    return write


def _result_line(result: dict) -> str:
    return "HVDK8S_RESULT " + json.dumps(result, sort_keys=True, allow_nan=False)


# -- small readers ------------------------------------------------------------------------------
def script_exports(text: str) -> dict[str, str]:
    """The variables a launch script's one-line `export NAME=value` lines set."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("export "):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) == 2 and "=" in words[1]:
            name, _, value = words[1].partition("=")
            out[name] = value
    return out


def _flags(args: list[str]) -> dict:
    """--name value, --name=value and bare --name (true) after the benchmark's path."""
    out: dict = {}
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("--"):
            break
        name, eq, value = word[2:].partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[name] = args[i + 1]
            i += 1
        else:
            out[name] = True
        i += 1
    return out


def _ranks(line: list[str]) -> int:
    for flag in ("-np", "-n"):
        if flag in line[:-1]:
            value = line[line.index(flag) + 1]
            if value.isdigit() and int(value) > 0:
                return int(value)
    return 1


def _exit_code(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    return int(text) % 256


def _seconds(text: str | None, default: float) -> float:
    try:
        value = float(text) if text not in (None, "") else default
    except ValueError:
        return default
    return value if value >= 0 and math.isfinite(value) else default
