"""A one-machine cluster for the rehearsal: the pod network, cluster DNS, and the small part
of the control plane a rendered hvdk8s job needs (endpoints, the launcher Job's pod and its
Complete/Failed condition), with pods run by tests/rehearsal/kubelet.py.

The job's phase and reason come from hvdk8s's own `decide_phase`, fed with the Job and pod
objects this cluster reports, exactly as `hvdk8s get` would read them from an API server.
An Indexed Job's pods (an elastic job's workers) are made and replaced by the model of the
Job controller in tests/rehearsal/jobcontroller.py, which this cluster's loop drives.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from launcher.backends.kubernetes.status import decide_phase
from mpijob.jobspec import names
from tests.rehearsal.coredns import DNSServer, service_records
from tests.rehearsal.jobcontroller import IndexedJobController
from tests.rehearsal.kubelet import Pod
from tests.rehearsal.netns import PodNetwork

WORKDIR_BASE = Path("/var/tmp/hvdk8s-rehearsal")  # not /tmp: pods get their own /tmp


@dataclass
class Outcome:
    phase: str
    reason: str | None
    message: str | None
    launcher_exit: int | None
    launcher_log: str
    worker_logs: dict[str, str] = field(default_factory=dict)
    worker_exits: dict[str, int | None] = field(default_factory=dict)
    still_running: list[str] = field(default_factory=list)


class Cluster:
    def __init__(self) -> None:
        self.network = PodNetwork()
        self.workdir = WORKDIR_BASE / self.network.tag
        self.pods: list[Pod] = []
        self.services: list[dict] = []
        self.dns_delay: dict[str, float] = {}
        self.controllers: list[IndexedJobController] = []
        self._pods_lock = threading.Lock()  # the loop's Job controllers add pods too
        # Pods whose container waits, by hostname (a node still pulling the image): the
        # test decides when a pod the Job controller made starts.
        self._held_hostnames: set[str] = set()
        self._held: list[Pod] = []
        # The image every pod runs in (tests/rehearsal/image.py); None: this machine's.
        self.image = None
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.workdir.mkdir(parents=True)
        self.network.start()
        self.dns = DNSServer(self.network.hub, self.network.gateway, self.workdir)
        self.dns.start()
        self._loop = threading.Thread(target=self._control_loop, daemon=True)
        self._loop.start()

    def close(self) -> None:
        self._stop.set()
        if self._loop:
            self._loop.join(5)
        for pod in self.pods:
            pod.destroy()
        if getattr(self, "dns", None):
            self.dns.stop()
        self.network.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # --- what the control plane does -------------------------------------------------------
    def _probe(self, pod: Pod) -> bool:
        probe = (pod.obj["spec"]["containers"][0].get("readinessProbe") or {})
        port = (probe.get("tcpSocket") or {}).get("port")
        if not pod.running():
            return False
        if "exec" in probe:
            return self._exec_probe(pod, probe)
        if port is None:
            return True
        # The kubelet probes from the node: here the hub namespace.
        r = subprocess.run(["ip", "netns", "exec", self.network.hub, "timeout", "1", "bash",
                            "-c", f"</dev/tcp/{pod.ip}/{port}"], capture_output=True)
        return r.returncode == 0

    def _exec_probe(self, pod: Pod, probe: dict) -> bool:
        """An exec probe run in the container, as the runtime's exec does: its namespaces,
        root and directory, every periodSeconds; pod.probe_output keeps what it said (the
        kubelet's `Unhealthy` event message)."""
        now = time.monotonic()
        if now < pod.probe_at:
            return pod.ready
        pod.probe_at = now + int(probe.get("periodSeconds") or 10)
        pid = pod.init_pid()
        if pid is None:
            return False
        try:
            r = subprocess.run(["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-r", "-w",
                                "--", *probe["exec"]["command"]], capture_output=True,
                               text=True, timeout=int(probe.get("timeoutSeconds") or 1))
        except subprocess.TimeoutExpired:
            pod.probe_output = "probe timed out"
            return False
        pod.probe_output = r.stdout + r.stderr
        pod.probes.append((r.returncode == 0, pod.probe_output))
        return r.returncode == 0

    def _control_loop(self) -> None:
        while not self._stop.is_set():
            for controller in list(self.controllers):
                controller.sync()
            for pod in list(self.pods):
                pod.ready = self._probe(pod)
            self.publish_dns()
            self._stop.wait(0.5)

    def publish_dns(self) -> None:
        now = time.monotonic() - self._t0
        visible = [p.as_object() for p in self.pods
                   if self.dns_delay.get(p.name, 0) <= now]
        for svc in self.services:
            self.dns.publish(service_records(svc, visible))

    # --- running a rendered job ---------------------------------------------------------------
    def add_pod(self, obj: dict, *, configmaps: dict, secrets_: dict, extra_env: dict | None,
                start_delay: float = 0.0) -> Pod:
        with self._pods_lock:
            pod = Pod(obj, network=self.network, nameserver=self.network.gateway,
                      workdir=self.workdir, configmaps=configmaps, secrets=secrets_,
                      extra_env=extra_env, image=self.image)
            self.pods.append(pod)
            if pod.hostname in self._held_hostnames:
                self._held.append(pod)
                return pod
        pod.start_after(start_delay)
        return pod

    def hold(self, hostname: str) -> None:
        """Pods with this hostname made from now on stay Pending until `release`."""
        with self._pods_lock:
            self._held_hostnames.add(hostname)

    def release(self, hostname: str) -> None:
        with self._pods_lock:
            self._held_hostnames.discard(hostname)
            starting = [p for p in self._held if p.hostname == hostname]
            self._held = [p for p in self._held if p.hostname != hostname]
        for pod in starting:
            pod.start()


def launcher_pod_from_job(job: dict) -> dict:
    """The Job controller's pod: `<job>-<5 random>`, the template plus the job-name labels."""
    template = job["spec"]["template"]
    name = f"{job['metadata']['name']}-{secrets.token_hex(3)[:5]}"
    meta = {**(template.get("metadata") or {}), "name": name,
            "namespace": job["metadata"].get("namespace", "default")}
    meta["labels"] = {**meta.get("labels", {}), "job-name": job["metadata"]["name"],
                      "batch.kubernetes.io/job-name": job["metadata"]["name"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


class PodsJob:
    """A built-in mode job (hvdk8s submit --mode pods) on the rehearsal cluster: its worker
    pods as rendered, or, for an elastic job, its Indexed worker Job run by the Job
    controller's model; `read_job(name)` gives that Job as it is now (an API server's copy,
    which `hvdk8s scale` changes), else the Job as rendered."""

    def __init__(self, cluster: Cluster, objects: list[dict], *, extra_env: dict | None = None,
                 worker_env: dict | None = None, launcher_env: dict | None = None,
                 worker_start_delay: dict[str, float] | None = None,
                 dns_delay: dict[str, float] | None = None,
                 read_job: Callable[[str], dict | None] | None = None) -> None:
        self.cluster = cluster
        by_kind: dict[str, list[dict]] = {}
        for o in objects:
            by_kind.setdefault(o["kind"], []).append(o)
        self.job = next((j for j in by_kind["Job"] if j["metadata"].get("labels", {}).get(
            names.LABEL_ROLE) == names.ROLE_LAUNCHER), by_kind["Job"][0])
        self.configmaps = {o["metadata"]["name"]: o for o in by_kind.get("ConfigMap", [])}
        self.secrets = {o["metadata"]["name"]: o for o in by_kind.get("Secret", [])}
        cluster.services.extend(by_kind.get("Service", []))
        cluster.dns_delay.update(dns_delay or {})
        worker_extra = {**(extra_env or {}), **(worker_env or {})}
        self.controllers = [IndexedJobController(
            read_job=(lambda j=j: read_job(j["metadata"]["name"])) if read_job else
            (lambda j=j: j),
            start_pod=lambda pod: cluster.add_pod(pod, configmaps=self.configmaps,
                                                  secrets_=self.secrets, extra_env=worker_extra))
            for j in by_kind["Job"] if j["spec"].get("completionMode") == "Indexed"]
        for controller in self.controllers:
            controller.sync()  # the workers' pods first, then the launcher's, as submitted
        cluster.controllers.extend(self.controllers)
        self.pod_workers = [
            cluster.add_pod(p, configmaps=self.configmaps, secrets_=self.secrets,
                            extra_env={**(extra_env or {}), **(worker_env or {})},
                            start_delay=(worker_start_delay or {}).get(p["metadata"]["name"], 0))
            for p in by_kind.get("Pod", [])]
        # hvdk8s resumes the launcher Job once every worker is scheduled: here at once.
        self.launcher = cluster.add_pod(
            launcher_pod_from_job(self.job), configmaps=self.configmaps,
            secrets_=self.secrets, extra_env={**(extra_env or {}), **(launcher_env or {})})

    @property
    def workers(self) -> list[Pod]:
        """Every worker pod so far: those rendered, and those the Job controller made."""
        return self.pod_workers + [p for c in self.controllers for p in c.pods]

    def wait_log(self, pod: Pod, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in pod.log():
                return
            if pod.exit_code() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{pod.name} never logged {text!r}:\n{pod.log()}")

    def root(self) -> dict:
        """The launcher Job as the Job controller reports it (backoffLimit 0: one pod)."""
        job = {**self.job, "spec": {**self.job["spec"], "suspend": False}}
        code = self.launcher.exit_code()
        if code == 0:
            job["status"] = {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}
        elif code is not None:
            job["status"] = {"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}]}
        else:
            job["status"] = {"active": 1}
        return job

    def finish(self, timeout: float = 180, worker_grace: float = 30) -> Outcome:
        """Wait for the launcher, then give workers `worker_grace` seconds to end by themselves."""
        self.launcher.wait(timeout)
        for controller in self.controllers:
            controller.stop()  # hvdk8s deletes the worker Job once the launcher is done
        deadline = time.monotonic() + worker_grace
        while time.monotonic() < deadline and any(w.running() for w in self.workers):
            time.sleep(0.2)
        pods = [self.launcher.as_object()] + [w.as_object() for w in self.workers]
        phase, reason, message = decide_phase(self.root(), "pods", pods)
        return Outcome(
            phase=phase, reason=reason, message=message,
            launcher_exit=self.launcher.exit_code(), launcher_log=self.launcher.log(),
            worker_logs={w.name: w.log() for w in self.workers},
            worker_exits={w.name: w.exit_code() for w in self.workers},
            still_running=[p.name for p in [self.launcher, *self.workers] if p.running()])


class OperatorJob:
    """An operator-mode job (hvdk8s submit --mode operator): the MPIJob hvdk8s renders, turned
    into the Service, ConfigMap, Secret and pods the MPI Operator v2 would create for it
    (kubesim/mpi_operator.py models the controller), run on the rehearsal cluster.

    As the operator does with launcherCreationPolicy WaitForWorkersReady, the launcher starts
    once every worker is Ready; with cleanPodPolicy Running it deletes the workers (sshd never
    exits by itself) once the launcher has finished."""

    def __init__(self, cluster: Cluster, objects: list[dict], *,
                 launcher_env: dict | None = None, worker_env: dict | None = None,
                 ready_timeout: float = 60) -> None:
        from kubesim.mpi_operator import completed_pods, operator_objects

        self.cluster = cluster
        mpijob = next(o for o in objects if o["kind"] == "MPIJob")
        made = operator_objects(mpijob)
        assert not made.errors, made.errors
        self.configmaps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
        self.configmaps[made.config_map["metadata"]["name"]] = made.config_map
        self.secrets = {made.secret["metadata"]["name"]: made.secret}
        cluster.services.append(made.service)
        launcher, *workers = completed_pods(mpijob)
        launcher["metadata"]["name"] = launcher["metadata"].pop("generateName") + \
            secrets.token_hex(3)[:5]
        self.workers = [cluster.add_pod(w, configmaps=self.configmaps, secrets_=self.secrets,
                                        extra_env=worker_env) for w in workers]
        await_ready(self.workers, "workers", ready_timeout)
        self.launcher = cluster.add_pod(launcher, configmaps=self.configmaps,
                                        secrets_=self.secrets, extra_env=launcher_env)

    def finish(self, timeout: float = 180) -> Outcome:
        self.launcher.wait(timeout)
        code = self.launcher.exit_code()
        worker_logs = {w.name: w.log() for w in self.workers}
        for w in self.workers:  # cleanPodPolicy Running: the operator deletes them
            w.destroy()
        phase = "Running" if code is None else "Succeeded" if code == 0 else "Failed"
        return Outcome(phase=phase, reason=None, message=None, launcher_exit=code,
                       launcher_log=self.launcher.log(), worker_logs=worker_logs,
                       worker_exits={}, still_running=[p.name for p in [self.launcher,
                                                                         *self.workers]
                                                       if p.running()])


class TrainerJob:
    """A Trainer-mode job (hvdk8s submit --mode trainjob): the TrainJob hvdk8s renders on
    hvdk8s's runtime, turned into the Secret, ConfigMaps, Service and pods Kubeflow Trainer,
    JobSet and the Job controller make of it (kubesim/trainer.py models
    them), run on the rehearsal cluster. As JobSet's dependsOn does, the launcher starts
    once every node is Ready; once it has finished the JobSet completes and its node Jobs
    (sshd never exits by itself) are deleted."""

    def __init__(self, cluster: Cluster, objects: list[dict], runtime: dict, *,
                 ready_timeout: float = 60) -> None:
        from kubesim.trainer import completed_objects

        self.cluster = cluster
        trainjob = next(o for o in objects if o["kind"] == "TrainJob")
        made = completed_objects(trainjob, runtime)
        self.configmaps = {o["metadata"]["name"]: o for o in [
            *made["ConfigMap"], *(o for o in objects if o["kind"] == "ConfigMap")]}
        self.secrets = {o["metadata"]["name"]: o for o in made["Secret"]}
        cluster.services.extend(made["Service"])
        self.nodes = [cluster.add_pod(p, configmaps=self.configmaps, secrets_=self.secrets,
                                      extra_env=None) for p in made["node"]]
        await_ready(self.nodes, "nodes", ready_timeout)
        (launcher,) = made["launcher"]
        self.launcher = cluster.add_pod(launcher, configmaps=self.configmaps,
                                        secrets_=self.secrets, extra_env=None)

    def finish(self, timeout: float = 180) -> Outcome:
        self.launcher.wait(timeout)
        code = self.launcher.exit_code()
        node_logs = {n.name: n.log() for n in self.nodes}
        for n in self.nodes:
            n.destroy()
        phase = "Running" if code is None else "Succeeded" if code == 0 else "Failed"
        return Outcome(phase=phase, reason=None, message=None, launcher_exit=code,
                       launcher_log=self.launcher.log(), worker_logs=node_logs,
                       worker_exits={}, still_running=[p.name for p in [self.launcher,
                                                                         *self.nodes]
                                                       if p.running()])


def await_ready(pods, what: str, timeout: float) -> None:
    """Until every pod is Ready; AssertionError with their logs once one exits or time is up."""
    deadline = time.monotonic() + timeout
    while not all(p.ready for p in pods):
        if time.monotonic() > deadline or any(p.exit_code() is not None for p in pods):
            raise AssertionError(f"{what} never became Ready:\n" + "\n".join(
                f"{p.name} (exit {p.exit_code()}):\n{p.log()}" for p in pods))
        time.sleep(0.2)
