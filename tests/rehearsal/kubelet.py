"""One pod run as a kubelet would run it: its sandbox (network namespace, pod IP, the hosts
and resolv.conf files, its volumes), then its single container as PID 1 of new UTS, IPC, mount
and PID namespaces (tests/rehearsal/podinit.py), with the image's environment under the pod's.

With an image (tests/rehearsal/image.py), the container's root is that image's root
filesystem: podinit lays a private overlay over it, mounts /proc, /sys, /dev, the kubelet's
files and the volumes in it, pivots into it, and runs the command as the image's user or
the pod's runAsUser, with the image's environment under the pod's.

When PID 1 of a PID namespace ends, the kernel kills everything else in it, as a container
runtime does when a container's main process exits; `kill` follows the kubelet: SIGTERM to
PID 1, SIGKILL after the grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mpijob.jobspec.quantity import parse_quantity
from tests.rehearsal import kubefiles
from tests.rehearsal.image import Image, process_identity

PODINIT = str(Path(__file__).with_name("podinit.py"))
VENV_BIN = str(Path(sys.prefix) / "bin")
# The "image" is this machine: its venv first on PATH, as the training image's ENV would be.
IMAGE_ENV = {
    "PATH": f"{VENV_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}


# What of the "image" lives where a pod gets a fresh tmpfs (a checkout under /tmp, as CI may
# use): podinit mounts it back at the same path, as it would be in the image.
_REPO = Path(__file__).resolve().parents[2]
IMAGE_PATHS_UNDER_TMPFS = sorted({str(p) for p in (Path(sys.prefix).resolve(), _REPO)
                                  if str(p).startswith(("/tmp/", "/run/"))})


def _env_value(item: dict, pod: dict, pod_ip: str) -> str | None:
    if "value" in item:
        return item["value"]
    ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    # The downward API's metadata.labels['k'] / metadata.annotations['k'] (an Indexed Job
    # pod's JOB_COMPLETION_INDEX): kubernetes pkg/fieldpath/fieldpath.go ExtractFieldPathAsString.
    for field in ("labels", "annotations"):
        prefix = f"metadata.{field}['"
        if ref and ref.startswith(prefix) and ref.endswith("']"):
            return (pod["metadata"].get(field) or {}).get(ref[len(prefix):-2])
    return {"metadata.name": pod["metadata"]["name"],
            "metadata.namespace": pod["metadata"].get("namespace", "default"),
            "status.podIP": pod_ip}.get(ref)


class Pod:
    def __init__(self, pod: dict, *, network, nameserver: str, workdir: Path,
                 configmaps: dict, secrets: dict, extra_env: dict | None = None,
                 image: Image | None = None) -> None:
        self.obj = pod
        self.image = image
        self.name = pod["metadata"]["name"]
        self.dir = workdir / self.name
        self.netns, self.ip = network.add_pod(self.name)
        self.nameserver = nameserver
        self.configmaps, self.secrets = configmaps, secrets
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.started = threading.Event()
        self.ready = False
        # its exec readiness probe (cluster.py): when next, what it said last, and each run
        self.probe_at = 0.0
        self.probe_output = ""
        self.probes: list[tuple[bool, str]] = []
        self.killed_by: str | None = None
        self.log_path = self.dir / "log"
        self._sandbox()

    # --- the sandbox --------------------------------------------------------------------
    def _sandbox(self) -> None:
        spec = self.obj["spec"]
        etc = self.dir / "etc-upper"
        etc.mkdir(parents=True)
        (self.dir / "etc-work").mkdir()
        (self.dir / "root").mkdir(mode=0o700)
        (self.dir / "root-work").mkdir()
        (self.dir / "bin-upper").mkdir()
        (self.dir / "bin-work").mkdir()
        for name in ("python", "python3"):
            (self.dir / "bin-upper" / name).symlink_to(sys.executable)
        (etc / "hosts").write_text(kubefiles.hosts_file(self.obj, self.ip))
        (etc / "resolv.conf").write_text(kubefiles.resolv_conf(self.obj, self.nameserver))
        (etc / "hostname").write_text(self.hostname + "\n")
        self.mounts = []
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        container = spec["containers"][0]
        for m in container.get("volumeMounts") or []:
            vol = volumes[m["name"]]
            src = self.dir / "volumes" / m["name"]
            if not src.exists():
                if "configMap" in vol:
                    payload = kubefiles.configmap_payload(self.configmaps[vol["configMap"]["name"]])
                    kubefiles.write_atomic_volume(src, payload, vol["configMap"])
                elif "secret" in vol:
                    secret = self.secrets[vol["secret"]["secretName"]]
                    kubefiles.write_atomic_volume(src, kubefiles.secret_payload(secret),
                                                  vol["secret"], root_mode=0o1777)
                elif "emptyDir" in vol:
                    src.mkdir(parents=True)
                    src.chmod(0o777)
                else:
                    raise ValueError(f"volume {m['name']}: the rehearsal has no such volume kind")
            empty_dir = vol.get("emptyDir") or {}
            kind = "tmpfs" if empty_dir.get("medium") == "Memory" else "bind"
            mount = {"path": m["mountPath"], "source": str(src), "kind": kind,
                     "readOnly": bool(m.get("readOnly"))}
            if kind == "tmpfs" and empty_dir.get("sizeLimit"):
                # A memory-backed emptyDir is a tmpfs of the volume's sizeLimit (kubernetes
                # pkg/volume/emptydir/empty_dir.go setupTmpfs, SizeMemoryBackedVolumes).
                mount["size"] = int(parse_quantity(empty_dir["sizeLimit"]))
            self.mounts.append(mount)

    @property
    def hostname(self) -> str:
        return self.obj["spec"].get("hostname") or self.name[:63]

    def status(self) -> dict:
        """The pod's status as the kubelet reports it (only what hvdk8s reads)."""
        st: dict = {"podIP": self.ip, "ready": self.ready}
        code = self.exit_code()
        if self.proc is None or code is None:
            st["phase"] = "Running" if self.proc is not None else "Pending"
            st["containerStatuses"] = [{"name": "c", "ready": self.ready, "state": {
                "running": {}} if self.proc else {"waiting": {"reason": "ContainerCreating"}}}]
        else:
            st["phase"] = "Succeeded" if code == 0 else "Failed"
            st["containerStatuses"] = [{"name": "c", "ready": False, "state": {"terminated": {
                "exitCode": code, "reason": "Completed" if code == 0 else "Error"}}}]
        return st

    def as_object(self) -> dict:
        return {**self.obj, "status": self.status()}

    # --- the container ------------------------------------------------------------------
    def start(self) -> None:
        container = self.obj["spec"]["containers"][0]
        image_env = self.image.env if self.image else IMAGE_ENV
        env = {**image_env, "HOSTNAME": self.hostname}
        for item in container.get("env") or []:
            value = _env_value(item, self.obj, self.ip)
            if value is not None:
                env[item["name"]] = value
        env.update(self.extra_env)
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        if self.image:
            # The image's Entrypoint/Cmd stand in for what the container leaves unset.
            argv = (list(container.get("command") or self.image.entrypoint)
                    + list(container.get("args") or (self.image.cmd
                                                     if not container.get("command") else [])))
            who = process_identity(self.image, self.obj, container, env)
            env.setdefault("HOME", who["home"])
        plan = {"hostname": self.hostname, "etc_upper": str(self.dir / "etc-upper"),
                "keep": IMAGE_PATHS_UNDER_TMPFS, "stage_dir": str(self.dir / "stage"),
                "etc_work": str(self.dir / "etc-work"), "root_home": str(self.dir / "root"),
                "root_work": str(self.dir / "root-work"),
                "bin_upper": str(self.dir / "bin-upper"), "bin_work": str(self.dir / "bin-work"),
                "mounts": self.mounts, "env": env, "argv": argv,
                "workingDir": container.get("workingDir")}
        if self.image:
            plan.update({"image_root": str(self.image.root), "identity": who,
                         "workingDir": container.get("workingDir") or self.image.working_dir,
                         "rootfs": str(self.dir / "rootfs"),
                         "rootfs_upper": str(self.dir / "rootfs-upper"),
                         "rootfs_work": str(self.dir / "rootfs-work"),
                         "etc_files": {f: str(self.dir / "etc-upper" / f)
                                       for f in ("hosts", "resolv.conf", "hostname")}})
            for d in ("rootfs", "rootfs-upper", "rootfs-work"):
                (self.dir / d).mkdir(exist_ok=True)
        plan_path = self.dir / "plan.json"
        plan_path.write_text(json.dumps(plan))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                # Nothing forks before podinit, which forks PID 1 and reports its end. Its
                # own IPC namespace as in a container: sharing this machine's, MPICH's UCX
                # took SysV shared memory between two pods and timed out (Endpoint timeout).
                ["nsenter", f"--net=/run/netns/{self.netns}", "--", "unshare", "--uts",
                 "--ipc", "--mount", "--propagation", "private", sys.executable, PODINIT,
                 str(plan_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.started.set()

    def start_after(self, delay: float) -> None:
        threading.Timer(delay, self.start).start() if delay else self.start()

    def exit_code(self) -> int | None:
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code  # podinit itself killed: 128+N too

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def init_pid(self) -> int | None:
        """PID 1 of the pod's PID namespace (the child of podinit)."""
        if not self.running():
            return None
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        return int(children.split()[0]) if children.split() else None

    def signal(self, sig: int) -> None:
        pid = self.init_pid()
        if pid:
            os.kill(pid, sig)

    def kill(self, grace: float = 30.0, *, reason: str = "Killed") -> None:
        """The kubelet's stop: SIGTERM to PID 1, SIGKILL after the grace period."""
        self.killed_by = reason
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.signal(signal.SIGKILL)
        self.wait(10)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                return True
            time.sleep(0.1)
        return False

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def destroy(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            pid = self.init_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait()
