"""A kubelet for every node at once: starts bound pods and plays scripted container runs.

Scripts say what a container prints and how it ends.  Each script hands out its
`runs` in order, one per container start across every pod it matches (the last
run repeats), so "first attempt crashes, retry succeeds" works both for in-place
restarts (restartPolicy OnFailure/Always) and for Job pod replacements.
Containers without a script run forever, like an sshd worker waiting for mpirun.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field

from . import attachdetach, events
from .controller import Loop
from .podutil import get_condition, set_condition
from .selectors import LabelSelector
from .util import dig, now_rfc3339


@dataclass
class Run:
    """One container run. logs: strings or (delay_seconds, line) pairs, each delay counted
    from the previous line (the first from container start).  exit_code None: keep running
    after the logs.  duration: extra seconds to run after the last line before exiting."""

    logs: list = field(default_factory=list)
    exit_code: int | None = 0
    duration: float = 0.0
    reason: str | None = None  # terminated reason; default Completed / Error
    # What the container left in its terminationMessagePath. The kubelet reads that file
    # whatever the exit code, at most its last 4096 bytes (kubernetes
    # pkg/kubelet/kuberuntime/kuberuntime_container.go getTerminationMessage:
    # tail.ReadAtMost(path, MaxContainerTerminationMessageLength)).
    termination_message: str | None = None

    def schedule(self) -> list[tuple[float, str]]:
        out, t = [], 0.0
        for item in self.logs:
            delay, line = (0.0, item) if isinstance(item, str) else item
            t += float(delay)
            out.append((t, str(line)))
        return out


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
    emitted: int = 0
    exit_code: int | None = None
    finished_stamp: str = ""
    restart_at: float | None = None
    restarts: int = 0
    last_state: dict = field(default_factory=dict)
    cid: str = ""


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
                 readiness_delay: float = 0.0, restart_delay: float = 0.05, clock=time.monotonic):
        super().__init__(tick)
        self.store, self.logbook = store, logbook
        self.start_delay = start_delay  # Pending(ContainerCreating) -> Running
        self.readiness_delay = readiness_delay  # readinessProbe counts as passed after this
        self.restart_delay = restart_delay  # stands in for CrashLoopBackOff's 10s+ back-off
        self.clock = clock
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
                if self._waits_for_attach(pod):
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

        kubelet/images/image_manager.go EnsureImageExists: a failed pull is ErrImagePull,
        then ImagePullBackOff until the back-off (10s doubling to 5m; restart_delay here)
        lets it retry, which fails again as ErrImagePull; the pod stays Pending, a
        `Failed` Warning event per attempt. kubelet_pods.go makeEnvironmentVariables: a
        non-optional env from a missing Secret/ConfigMap or key is CreateContainerConfigError.
        """
        waiting = {}
        for c in pod["spec"].get("containers") or []:
            image = c.get("image", "")
            if image in self.unpullable:
                retry_at = state.waiting.get(c["name"], {}).get("_retry_at")
                if retry_at is not None and now < retry_at:
                    waiting[c["name"]] = {"reason": "ImagePullBackOff",
                                          "message": f'Back-off pulling image "{image}"',
                                          "_retry_at": retry_at}
                    continue
                err = self.unpullable[image]
                state.pull_failures += 1
                events.record(self.store, pod, "Warning", "Failed",
                              f'Failed to pull image "{image}": {err}', "kubelet",
                              node["metadata"]["name"])
                waiting[c["name"]] = {"reason": "ErrImagePull", "message": err,
                                      "_retry_at": now + self.restart_delay}
                continue
            why = self._config_error(pod, c)
            if why:
                waiting[c["name"]] = {"reason": "CreateContainerConfigError", "message": why}
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
        c.run = c.script.next_run() if c.script and c.script.runs else None
        c.schedule = c.run.schedule() if c.run else []
        c.started_at, c.started_stamp = now, now_rfc3339()
        c.emitted, c.exit_code, c.restart_at = 0, None, None
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
        elapsed = now - c.started_at
        while c.emitted < len(c.schedule) and c.schedule[c.emitted][0] <= elapsed:
            self.logbook.append(uid, c.name, c.schedule[c.emitted][1])
            c.emitted += 1
        run = c.run
        if run is None or run.exit_code is None or c.emitted < len(c.schedule):
            return
        last = c.schedule[-1][0] if c.schedule else 0.0
        if elapsed < last + run.duration:
            return
        c.exit_code, c.finished_stamp = run.exit_code, now_rfc3339()
        self.logbook.finish(uid, c.name)
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and run.exit_code != 0):
            c.restart_at = now + self.restart_delay

    def _terminated(self, c: _Container) -> dict:
        reason = (c.run.reason if c.run else None) or ("Completed" if c.exit_code == 0
                                                       else "Error")
        out = {"exitCode": c.exit_code, "reason": reason, "startedAt": c.started_stamp,
               "finishedAt": c.finished_stamp, "containerID": c.cid}
        if c.run is not None and c.run.termination_message:
            out["message"] = c.run.termination_message.encode()[-4096:].decode(errors="ignore")
        return out

    def _ready(self, c: _Container, spec: dict, now: float) -> bool:
        if c.exit_code is not None:
            return False
        if not spec.get("readinessProbe"):
            return True
        delay = c.script.ready_after if c.script and c.script.ready_after is not None \
            else self.readiness_delay
        return now - c.started_at >= delay

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
                cs.update(ready=self._ready(c, specs.get(name, {}), now), started=True,
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


def _node_ip(node: dict) -> str:
    for a in dig(node, "status.addresses") or []:
        if a.get("type") == "InternalIP":
            return a["address"]
    return "10.0.0.1"


def _image_id(image: str) -> str:
    return f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"
