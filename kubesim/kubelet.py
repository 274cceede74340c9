"""A kubelet for every node at once: starts bound pods and plays scripted container runs.

Scripts say what a container prints and how it ends.  Each script hands out its
`runs` in order, one per container start across every pod it matches (the last
run repeats), so "first attempt crashes, retry succeeds" works both for in-place
restarts (restartPolicy OnFailure/Always) and for Job pod replacements.
Containers without a script play the life a `lives` player gives them (lives.py: what
hvdk8s' containers do, for `hvdk8s dev cluster`); without a player, or for a program it
does not know, they run forever, like an sshd worker waiting for mpirun.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from . import attachdetach, events, images
from .controller import Loop
from .podutil import get_condition, set_condition
from .selectors import LabelSelector
from .util import dig, now_rfc3339


@dataclass(frozen=True)
class Waited:
    """What a wait printed since it was last asked; done: it is over (the logs follow);
    exit_code: the program ends here with this status instead."""

    lines: tuple[str, ...] = ()
    done: bool = False
    exit_code: int | None = None


class Wait(Protocol):
    """What a program waits for before its logs (workers answering, a release): asked
    every tick with the kubelet's clock."""

    def poll(self, now: float) -> Waited: ...


Line = str | Callable[[], str]  # a callable line is written when it is due (its time)


@dataclass
class Run:
    """One container run. logs: strings or (delay_seconds, line) pairs, each delay counted
    from the previous line (the first from container start, or from the end of `wait`).
    exit_code None: keep running after the logs.  duration: extra seconds to run after the
    last line before exiting."""

    logs: list = field(default_factory=list)
    exit_code: int | None = 0
    duration: float = 0.0
    reason: str | None = None  # terminated reason; default Completed / Error
    # What the container left in its terminationMessagePath. The kubelet reads that file
    # whatever the exit code, at most its last 4096 bytes (kubernetes
    # pkg/kubelet/kuberuntime/kuberuntime_container.go getTerminationMessage:
    # tail.ReadAtMost(path, MaxContainerTerminationMessageLength)).
    termination_message: str | None = None
    wait: Wait | None = None
    # What an exec readiness probe run in this container answers: (succeeded, its output),
    # given the seconds since the program's logs began (None while it still waits).
    # None: the probe passes once the kubelet's readiness_delay has passed.
    probe: Callable[[float | None], tuple[bool, str]] | None = None

    def schedule(self) -> list[tuple[float, Line]]:
        out: list[tuple[float, Line]] = []
        t = 0.0
        for item in self.logs:
            delay, line = (0.0, item) if isinstance(item, str) or callable(item) else item
            t += float(delay)
            out.append((t, line if callable(line) else str(line)))
        return out


class Lives(Protocol):
    """Gives an unscripted container the run its program would have (None: run forever)."""

    def run_for(self, pod: dict, container: dict) -> Run | None: ...


@dataclass
class PodScript:
    pattern: str | None = None  # regex, full match against the pod name
    selector: str | None = None  # label selector
    namespace: str | None = None
    container: str | None = None  # None: every container of matching pods
    runs: list[Run] = field(default_factory=list)
    ready_after: float | None = None
    starts: int = 0  # container starts that consumed a run so far

    def matches(self, pod: dict, container: str) -> bool:
        m = pod["metadata"]
        if self.namespace and m.get("namespace") != self.namespace:
            return False
        if self.container and self.container != container:
            return False
        if self.pattern and not re.fullmatch(self.pattern, m["name"]):
            return False
        if self.selector and not LabelSelector.parse(self.selector).matches(m.get("labels")):
            return False
        return True

    def next_run(self) -> Run:
        run = self.runs[min(self.starts, len(self.runs) - 1)]
        self.starts += 1
        return run


@dataclass
class _Container:
    name: str
    image: str
    script: PodScript | None = None
    run: Run | None = None
    schedule: list = field(default_factory=list)
    started_at: float = 0.0
    started_stamp: str = ""
    logs_from: float | None = None  # when the schedule's clock starts (after any wait)
    emitted: int = 0
    exit_code: int | None = None
    finished_stamp: str = ""
    restart_at: float | None = None
    restarts: int = 0
    last_state: dict = field(default_factory=dict)
    cid: str = ""
    # The readiness prober's worker (prober.py): its cached result, last result and run.
    ready: bool = False
    probe_at: float | None = None  # the next probe
    probe_last: bool | None = None
    probe_run: int = 0


@dataclass
class _Pod:
    created: float
    ip: str
    start_stamp: str
    started: bool = False
    containers: dict[str, _Container] = field(default_factory=dict)
    # container -> its waiting state while it cannot start (image pull, config errors)
    waiting: dict[str, dict] = field(default_factory=dict)
    pull_failures: int = 0


def _cid(uid: str, name: str, attempt: int) -> str:
    return "containerd://" + hashlib.sha256(f"{uid}/{name}/{attempt}".encode()).hexdigest()


class Kubelet(Loop):
    name = "kubelet"

    def __init__(self, store, logbook, tick: float = 0.02, start_delay: float = 0.05,
                 readiness_delay: float = 0.0, restart_delay: float = 0.05, clock=time.monotonic,
                 lives: Lives | None = None, probe_scale: float = 1.0):
        super().__init__(tick)
        self.store, self.logbook = store, logbook
        self.start_delay = start_delay  # Pending(ContainerCreating) -> Running
        self.readiness_delay = readiness_delay  # readinessProbe counts as passed after this
        self.restart_delay = restart_delay  # stands in for CrashLoopBackOff's 10s+ back-off
        self.clock = clock
        self.lives = lives
        # Real seconds per probe period second: tests and the dev cluster probe faster.
        self.probe_scale = probe_scale
        self.scripts: list[PodScript] = []
        # Image references no registry serves: reference -> the runtime's error text.
        self.unpullable: dict[str, str] = {}
        self._lock = threading.Lock()
        self._pods: dict[str, _Pod] = {}
        self._ips: dict[str, int] = {}
        self._node_idx: dict[str, int] = {}
        # The attach/detach controller's state: single-attach volume -> its node
        # (attachdetach.py), and the pods already told they wait for one.
        self._attached: dict[str, str] = {}
        self._multi_attach_told: set[str] = set()
        self._mount_told: set[str] = set()  # pod uid/volume/why told of a failed mount

    def add_script(self, script: PodScript) -> PodScript:
        with self._lock:
            self.scripts.insert(0, script)  # newest first: later registrations override
        return script

    def clear_scripts(self) -> None:
        with self._lock:
            self.scripts = []

    def _script_for(self, pod: dict, container: str) -> PodScript | None:
        with self._lock:
            return next((s for s in self.scripts if s.matches(pod, container)), None)

    # -- the loop ------------------------------------------------------------------------------
    def _step(self) -> None:
        now = self.clock()
        with self.store.lock:
            nodes = {n["metadata"]["name"]: n for n in self.store.items("/nodes")}
            pods = self.store.items("/pods")
        alive = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            alive.add(uid)
            node = nodes.get(pod["spec"].get("nodeName") or "")
            if node is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            ready = get_condition(node, "Ready")
            if ready is None or ready.get("status") != "True":
                continue  # a NotReady node's kubelet is not making progress
            state = self._pods.get(uid)
            if state is None:
                state = self._pods[uid] = self._admit(pod, node, now)
            if not state.started and now - state.created >= self.start_delay:
                if self._waits_for_attach(pod) or self._waits_for_mount(pod, node):
                    self._publish(pod, node, state, now)
                    continue
                if not self._blocked(pod, node, state, now):
                    for c in state.containers.values():
                        self._start(pod, c, now)
                    state.started = True
            if state.started:
                for c in state.containers.values():
                    self._advance(pod, c, now)
            self._publish(pod, node, state, now)
        for uid in [u for u in self._pods if u not in alive]:
            del self._pods[uid]
            self.logbook.forget(uid)
        if self._attached:
            attachdetach.detach_unused(self.store, self._attached)

    def _waits_for_mount(self, pod: dict, node: dict) -> bool:
        """A ConfigMap or Secret a volume needs is missing: the pod stays in
        ContainerCreating with a FailedMount event, and the kubelet tries again (its volume
        manager's reconciler), so the pod starts once the object appears. kubernetes
        pkg/volume/configmap/configmap.go and pkg/volume/secret/secret.go SetUpAt: a missing
        object fails the mount unless the source is `optional` (then an empty volume), and
        so does an `items` key the object lacks; pkg/volume/projected/projected.go
        collectData, alike for each source; the error is the kubelet's watch-based manager's
        NotFound on `configmap`/`secret` (pkg/kubelet/util/manager), the event
        operation_generator.go's `MountVolume.SetUp failed for volume ...`."""
        for v in pod["spec"].get("volumes") or []:
            why = _missing(self.store, pod["metadata"]["namespace"], v)
            if why is None:
                continue
            key = f"{pod['metadata']['uid']}/{v['name']}/{why}"
            if key not in self._mount_told:
                self._mount_told.add(key)
                events.record(self.store, pod, "Warning", "FailedMount",
                              f'MountVolume.SetUp failed for volume "{v["name"]}" : {why}',
                              "kubelet", node["metadata"]["name"])
            return True
        return False

    def _waits_for_attach(self, pod: dict) -> bool:
        """A volume attached to another node holds the pod in ContainerCreating."""
        with self.store.lock:
            error = attachdetach.multi_attach_error(self.store, pod, self._attached)
            if error is None:
                attachdetach.attach(self.store, pod, self._attached)
                return False
        uid = pod["metadata"]["uid"]
        if uid not in self._multi_attach_told:
            self._multi_attach_told.add(uid)
            events.record(self.store, pod, "Warning", "FailedAttachVolume", error,
                          "attachdetach-controller")
        return True

    def _admit(self, pod: dict, node: dict, now: float) -> _Pod:
        if pod["spec"].get("hostNetwork"):
            ip = _node_ip(node)
        else:
            name = node["metadata"]["name"]
            idx = self._node_idx.setdefault(name, len(self._node_idx))
            n = self._ips[name] = self._ips.get(name, 0) + 1
            ip = f"10.244.{idx % 256}.{n % 253 + 2}"  # one /24 pod CIDR per node
        state = _Pod(created=now, ip=ip, start_stamp=now_rfc3339())
        for c in pod["spec"].get("containers") or []:
            state.containers[c["name"]] = _Container(c["name"], c.get("image", ""))
        return state

    # -- containers that cannot start -------------------------------------------------------------
    def _blocked(self, pod: dict, node: dict, state: _Pod, now: float) -> bool:
        """Why the pod's containers cannot be created yet; sets their waiting states.

        kubelet/images/image_manager.go EnsureImageExists: a reference that does not parse
        is InvalidImageName (event InspectFailed); a failed pull is ErrImagePull (events
        Pulling, then Failed `Failed to pull image`), then ImagePullBackOff (event BackOff
        `Back-off pulling image`) until the back-off (10s doubling to 5m: restart_delay
        doubling to 30x here) lets it retry; kuberuntime_container.go startContainer adds a
        Failed `Error: <reason>` event each time. The pod stays Pending. kubelet_pods.go
        makeEnvironmentVariables: a non-optional env from a missing Secret/ConfigMap or key
        is CreateContainerConfigError. Which references fail: images.py, and `unpullable`.
        """
        waiting = {}
        host = node["metadata"]["name"]
        for c in pod["spec"].get("containers") or []:
            image, name = c.get("image", ""), c["name"]
            before = state.waiting.get(name, {})
            # (no image at all: the API server refuses such a pod; tests' pods may lack one)
            invalid = images.invalid_name(image) if image else None
            if invalid is not None:
                if before.get("reason") != "InvalidImageName":
                    events.record(self.store, pod, "Warning", "InspectFailed", invalid,
                                  "kubelet", host)
                    events.record(self.store, pod, "Warning", "Failed",
                                  "Error: InvalidImageName", "kubelet", host)
                waiting[name] = {"reason": "InvalidImageName", "message": invalid}
                continue
            err = self.unpullable.get(image) or images.unresolvable(image)
            if err is not None:
                retry_at = before.get("_retry_at")
                if retry_at is not None and now < retry_at:
                    message = f'Back-off pulling image "{image}"'
                    if before.get("reason") != "ImagePullBackOff":
                        events.record(self.store, pod, "Normal", "BackOff", message,
                                      "kubelet", host)
                        events.record(self.store, pod, "Warning", "Failed",
                                      "Error: ImagePullBackOff", "kubelet", host)
                    waiting[name] = {"reason": "ImagePullBackOff", "message": message,
                                     "_retry_at": retry_at}
                    continue
                state.pull_failures += 1
                events.record(self.store, pod, "Normal", "Pulling", f'Pulling image "{image}"',
                              "kubelet", host)
                events.record(self.store, pod, "Warning", "Failed",
                              f'Failed to pull image "{image}": {err}', "kubelet", host)
                events.record(self.store, pod, "Warning", "Failed", "Error: ErrImagePull",
                              "kubelet", host)
                back_off = min(self.restart_delay * 2 ** (state.pull_failures - 1),
                               self.restart_delay * 30)
                waiting[name] = {"reason": "ErrImagePull", "message": err,
                                 "_retry_at": now + back_off}
                continue
            why = self._config_error(pod, c)
            if why:
                waiting[name] = {"reason": "CreateContainerConfigError", "message": why}
        state.waiting = waiting
        return bool(waiting)

    def _config_error(self, pod: dict, c: dict) -> str | None:
        ns = pod["metadata"]["namespace"]
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {})
            for key, kind, plural in (("secretKeyRef", "Secret", "/secrets"),
                                      ("configMapKeyRef", "ConfigMap", "/configmaps")):
                r = ref.get(key)
                if not r or r.get("optional"):
                    continue
                obj = self.store.get(plural, ns, r.get("name", ""))
                if obj is None:
                    return f'{kind.lower()} "{r.get("name")}" not found'
                data = {**(obj.get("data") or {}), **(obj.get("binaryData") or {})}
                if r.get("key") not in data:
                    return f"couldn't find key {r.get('key')} in {kind} {ns}/{r.get('name')}"
        return None

    def _start(self, pod: dict, c: _Container, now: float) -> None:
        uid = pod["metadata"]["uid"]
        if c.script is None:
            c.script = self._script_for(pod, c.name)
        if c.script and c.script.runs:
            c.run = c.script.next_run()
        elif self.lives is not None:
            spec: dict = next((s for s in pod["spec"].get("containers") or []
                               if s["name"] == c.name), {})
            c.run = self.lives.run_for(pod, spec)
        else:
            c.run = None
        c.schedule = c.run.schedule() if c.run else []
        c.started_at, c.started_stamp = now, now_rfc3339()
        c.logs_from = None if c.run is not None and c.run.wait is not None else now
        c.emitted, c.exit_code, c.restart_at = 0, None, None
        c.ready, c.probe_at, c.probe_last, c.probe_run = False, None, None, 0  # a new container
        c.cid = _cid(uid, c.name, c.restarts)
        self.logbook.start_attempt(uid, c.name)

    def _advance(self, pod: dict, c: _Container, now: float) -> None:
        uid = pod["metadata"]["uid"]
        if c.exit_code is not None:
            if c.restart_at is not None and now >= c.restart_at:
                c.last_state = {"terminated": self._terminated(c)}
                c.restarts += 1
                self._start(pod, c, now)
            return
        run = c.run
        if run is not None and run.wait is not None and c.logs_from is None:
            waited = run.wait.poll(now)
            for line in waited.lines:
                self.logbook.append(uid, c.name, line)
            if waited.exit_code is not None:
                self._exit(pod, c, waited.exit_code, now)
                return
            if not waited.done:
                return
            c.logs_from = now
        elapsed = now - (c.logs_from if c.logs_from is not None else c.started_at)
        while c.emitted < len(c.schedule) and c.schedule[c.emitted][0] <= elapsed:
            line = c.schedule[c.emitted][1]
            self.logbook.append(uid, c.name, line() if callable(line) else line)
            c.emitted += 1
        if run is None or run.exit_code is None or c.emitted < len(c.schedule):
            return
        last = c.schedule[-1][0] if c.schedule else 0.0
        if elapsed < last + run.duration:
            return
        self._exit(pod, c, run.exit_code, now)

    def _exit(self, pod: dict, c: _Container, code: int, now: float) -> None:
        c.exit_code, c.finished_stamp = code, now_rfc3339()
        self.logbook.finish(pod["metadata"]["uid"], c.name)
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            c.restart_at = now + self.restart_delay

    def _terminated(self, c: _Container) -> dict:
        reason = (c.run.reason if c.run else None) or ("Completed" if c.exit_code == 0
                                                       else "Error")
        out = {"exitCode": c.exit_code, "reason": reason, "startedAt": c.started_stamp,
               "finishedAt": c.finished_stamp, "containerID": c.cid}
        if c.run is not None and c.run.termination_message:
            out["message"] = c.run.termination_message.encode()[-4096:].decode(errors="ignore")
        return out

    def _ready(self, pod: dict, c: _Container, spec: dict, now: float) -> bool:
        """The container's readiness, as the kubelet's readiness prober worker keeps it
        (kubernetes pkg/kubelet/prober/worker.go doProbe, prober.go probe): Failure until a
        probe passes; no probe before initialDelaySeconds, then one every periodSeconds;
        the result changes only after failureThreshold failures or successThreshold
        successes in a row; each failure is a Warning event `Unhealthy` "Readiness probe
        failed: <the probe's output>" (prober.go recordContainerEvent, events.ContainerUnhealthy)."""
        if c.exit_code is not None:
            return False
        probe = spec.get("readinessProbe")
        if not probe:
            return True
        if not ("exec" in probe and c.run is not None and c.run.probe is not None):
            delay = c.script.ready_after if c.script and c.script.ready_after is not None \
                else self.readiness_delay
            return now - c.started_at >= delay
        scale = self.probe_scale
        if now - c.started_at < int(probe.get("initialDelaySeconds") or 0) * scale:
            return c.ready
        if c.probe_at is not None and now < c.probe_at:
            return c.ready
        c.probe_at = now + int(probe.get("periodSeconds") or 10) * scale
        logs_for = None if c.logs_from is None else (now - c.logs_from) / scale
        ok, output = c.run.probe(logs_for)
        if ok == c.probe_last:
            c.probe_run += 1
        else:
            c.probe_last, c.probe_run = ok, 1
        if not ok:
            events.record(self.store, pod, "Warning", "Unhealthy",
                          f"Readiness probe failed: {output}", "kubelet",
                          pod["spec"].get("nodeName"))
        threshold = int(probe.get("successThreshold" if ok else "failureThreshold")
                        or (1 if ok else 3))
        if c.probe_run >= threshold:
            c.ready = ok
        return c.ready

    # -- status ---------------------------------------------------------------------------------
    def _publish(self, pod: dict, node: dict, state: _Pod, now: float) -> None:
        """Compute the pod status from runtime state and write it only when it changed."""
        status = dict(pod.get("status") or {})
        status["conditions"] = [dict(c) for c in status.get("conditions") or []]
        host_ip = _node_ip(node)
        status.update(hostIP=host_ip, hostIPs=[{"ip": host_ip}], startTime=state.start_stamp)
        specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
        statuses, unready = [], []
        for name, c in state.containers.items():
            cs = {"name": name, "image": c.image, "imageID": _image_id(c.image),
                  "restartCount": c.restarts, "lastState": c.last_state}
            if not state.started:
                blocked = {k: v for k, v in state.waiting.get(name, {}).items()
                           if not k.startswith("_")}
                cs.update(ready=False, started=False,
                          state={"waiting": blocked or {"reason": "ContainerCreating"}})
            elif c.exit_code is None:
                cs.update(ready=self._ready(pod, c, specs.get(name, {}), now), started=True,
                          containerID=c.cid, state={"running": {"startedAt": c.started_stamp}})
            elif c.restart_at is not None:
                cs.update(ready=False, started=False, containerID=c.cid, lastState={
                    "terminated": self._terminated(c)}, state={"waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off 10s restarting failed container={name} "
                                   f"pod={pod['metadata']['name']}_"
                                   f"{pod['metadata']['namespace']}({pod['metadata']['uid']})"}})
            else:
                cs.update(ready=False, started=False, containerID=c.cid,
                          state={"terminated": self._terminated(c)})
            if not cs["ready"]:
                unready.append(name)
            statuses.append(cs)
        status["containerStatuses"] = statuses
        inits = pod["spec"].get("initContainers") or []
        if inits and state.started:
            status["initContainerStatuses"] = [{
                "name": ic["name"], "image": ic.get("image", ""),
                "imageID": _image_id(ic.get("image", "")), "ready": True, "started": False,
                "restartCount": 0, "lastState": {}, "state": {"terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": state.start_stamp,
                    "finishedAt": state.start_stamp}}} for ic in inits]
        stamp = now_rfc3339()
        done = state.started and all(c.exit_code is not None and c.restart_at is None
                                     for c in state.containers.values())
        if not state.started:
            status["phase"] = "Pending"
        elif done:
            ok = all(c.exit_code == 0 for c in state.containers.values())
            status["phase"] = "Succeeded" if ok else "Failed"
        else:
            status["phase"] = "Running"
        if state.started:
            ip = state.ip
            status.update(podIP=ip, podIPs=[{"ip": ip}])
        set_condition(status, "PodReadyToStartContainers", "True" if not done else "False",
                      now=stamp)
        set_condition(status, "Initialized", "True", now=stamp)
        if unready:
            why = "PodCompleted" if done else "ContainersNotReady"
            msg = None if done else f"containers with unready status: [{' '.join(unready)}]"
            set_condition(status, "Ready", "False", why, msg, now=stamp)
            set_condition(status, "ContainersReady", "False", why, msg, now=stamp)
        else:
            set_condition(status, "Ready", "True", now=stamp)
            set_condition(status, "ContainersReady", "True", now=stamp)
        set_condition(status, "PodScheduled", "True", now=stamp)
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                 "PodScheduled"]
        status["conditions"].sort(key=lambda c: order.index(c["type"])
                                  if c["type"] in order else len(order))
        if status != pod.get("status"):
            m = pod["metadata"]

            def write(p):
                if p["metadata"]["uid"] != m["uid"]:
                    return False
                p["status"] = status
            self.store.mutate("/pods", m["namespace"], m["name"], write)


# volume source -> (the object's kind as the kubelet names it, its store key, its name field,
# the error of an `items` key it lacks: configmap.go / secret.go MakePayload)
_SOURCES = {"configMap": ("configmap", "/configmaps", "name",
                          "configmap references non-existent config key: {}"),
            "secret": ("secret", "/secrets", "secretName",
                       "references non-existent secret key: {}")}


def _missing(store, ns: str, volume: dict) -> str | None:
    """Why the volume cannot be set up (configmap.go/secret.go SetUpAt, projected.go
    collectData), or None. A projected source names its Secret by `name`."""
    projected = (volume.get("projected") or {}).get("sources")
    sources = ([(k, s[k], "name") for s in projected or [] for k in _SOURCES if k in s]
               if projected is not None else
               [(k, volume[k], _SOURCES[k][2]) for k in _SOURCES if k in volume])
    for kind, ref, name_field in sources:
        what, key, _, no_key = _SOURCES[kind]
        name = ref.get(name_field, "")
        if ref.get("optional"):  # an empty volume, or its keys left out
            continue
        obj = store.get(key, ns, name)
        if obj is None:
            return f'{what} "{name}" not found'
        data = {**(obj.get("data") or {}), **(obj.get("binaryData") or {}),
                **(obj.get("stringData") or {})}
        for item in ref.get("items") or []:
            if item.get("key") not in data:
                return no_key.format(item.get("key"))
    return None


def _node_ip(node: dict) -> str:
    for a in dig(node, "status.addresses") or []:
        if a.get("type") == "InternalIP":
            return a["address"]
    return "10.0.0.1"


def _image_id(image: str) -> str:
    return f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"
