"""KubeAPIServer: the fixture-facing facade that wires storage, HTTP and the control loops."""

from __future__ import annotations

import re
import secrets
import ssl
import threading
import time
from pathlib import Path

from . import errors, mpijob_crd, trainer_status
from .admission import Admission
from .auth import Policy, Tokens
from .clock import Clock
from .faults import Fault, Faults
from .httpapp import App, HTTPServer, Request
from .jobs import JobController
from .jobset import JobSetController
from .kai import KaiPodGrouper
from .kubelet import Kubelet, PodScript, Run
from .kueue import DEFAULT_FRAMEWORKS_V0_14, Kueue, cluster_queue, local_queue, manager_config
from .lifecycle import Objects
from .lives import Player
from .logs import LogBook
from .mpi_operator import MPIOperator
from .podutil import set_condition
from .quota import QuotaController
from .rbac import PRIVILEGED_GROUP, RBACAuthorizer, service_account_groups, service_account_user
from .resources import ALIASES, GANG_SCHEDULERS, OPTIONAL, Registry, ResourceType
from .rest import Rest
from .scheduler import Scheduler
from .store import Store
from .trainer import Trainer, trainjob_schema
from .util import deepcopy, new_uid, now_rfc3339
from .volcano import VolcanoWebhook

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _taint(t) -> dict:
    """Accept {"key","value","effect"} dicts or kubectl-style 'key=value:Effect' strings."""
    if isinstance(t, dict):
        return dict(t)
    kv, _, effect = t.rpartition(":")
    key, _, value = kv.partition("=")
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


class KubeAPIServer:
    """An in-process Kubernetes API server for tests (127.0.0.1, ephemeral port).

    with KubeAPIServer() as srv:
        srv.add_node("gpu-node-0", gpus=8)
        path = srv.write_kubeconfig(tmp_path / "kubeconfig")
    """

    def __init__(self, *, token: str | None = None, user: str = "kubernetes-admin",
                 controllers: bool = True, tick: float = 0.02, start_delay: float = 0.05,
                 readiness_delay: float = 0.0, restart_delay: float = 0.05,
                 version: str = "v1.31.0", pod_security: dict | None = None,
                 tls: ssl.SSLContext | None = None, rbac: bool = False,
                 lives: float | None = None):
        self.version = version
        # Serve HTTPS with this server context (its certificate; a client CA to verify
        # client certificates against, which then authenticate as their Common Name).
        self.tls = tls
        # Answers of 128 KiB or more gzip-compressed for clients that ask (compression.py).
        self.gzip_responses = False
        self.store = Store()
        self.registry = Registry()
        self.admission = Admission(self.store, self.registry)
        if pod_security is not None:  # e.g. {"enforce": "privileged"}: a kind cluster
            self.admission.pod_security.defaults = dict(pod_security)
        self.objects_api = Objects(self.store, self.registry, self.admission)
        self.logbook = LogBook()
        self.rest = Rest(self.store, self.registry, self.objects_api, self.logbook)
        self.policy = Policy()
        if rbac:  # --authorization-mode=RBAC; otherwise AlwaysAllow (less what tests forbid)
            self.policy.rbac = RBACAuthorizer(self.store)
        self.tokens = Tokens()
        self.faults = Faults()
        self.user = user
        self.token = token or secrets.token_hex(16)
        # kubeadm's admin credential: a member of system:masters, which no authorizer denies
        self.tokens.add(self.token, user, (PRIVILEGED_GROUP, "system:authenticated"))
        # What the controllers read as now; a test advances it instead of sleeping.
        self.clock = Clock()
        self.scheduler = Scheduler(self.store, tick, clock=self.clock.monotonic)
        # lives: unscripted containers of hvdk8s play their programs (lives.py), that many
        # times faster than real time; None: they run until deleted.
        self.player = None if lives is None else Player(self.store, self.registry, lives)
        self.kubelet = Kubelet(self.store, self.logbook, tick, start_delay, readiness_delay,
                               restart_delay, clock=self.clock.monotonic, lives=self.player,
                               # probes keep the lives' pace
                               probe_scale=1.0 if lives is None else 1.0 / lives)
        self.jobs = JobController(self.store, self.registry, self.objects_api, tick, self.clock)
        self.quotas = QuotaController(self.store, tick)
        self.tick = tick
        self.mpi_operator: MPIOperator | None = None  # install_mpi_operator() deploys it
        self.dra = None  # kubesim.dra.install_dra() serves resource.k8s.io/v1
        # compute_domain.install_compute_domains() serves resource.nvidia.com ComputeDomains
        self.compute_domains = None
        self.kueue: Kueue | None = None  # install_kueue() deploys it
        self.kai: KaiPodGrouper | None = None  # install_kai() deploys its podgrouper
        # install_trainer() deploys Kubeflow Trainer (trainer.py) and JobSet (jobset.py).
        self.trainer: Trainer | None = None
        self.jobsets: JobSetController | None = None
        # Volcano's pod webhook (volcano.py); set .version to "v1.5.0" for the older check.
        self.volcano_webhook = VolcanoWebhook()
        self.controllers = controllers
        self.request_log: list[Request] = []
        self._log_lock = threading.Lock()
        self._httpd: HTTPServer | None = None
        self._app = App(self)
        self._thread: threading.Thread | None = None
        self._node_count = 0
        self._bootstrap()

    # -- lifecycle ------------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        for ns in SYSTEM_NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.create({"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "ports": [
                {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}})

    def start(self, port: int = 0) -> KubeAPIServer:
        """Serve on 127.0.0.1:port (0: an ephemeral port)."""
        if self._httpd is not None:
            return self
        self._httpd = HTTPServer(self._app, self.tls, port)
        # stop() waits for serve_forever's next wake-up: a short poll keeps each test's
        # teardown at milliseconds (the idle wake-ups cost next to nothing).
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.005},
                                        name="kubeapi-http", daemon=True)
        self._thread.start()
        if self.controllers:
            for loop in self.loops:
                loop.start()
        return self

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop()
        if self.trainer is not None and self.trainer.status_server is not None:
            self.trainer.status_server.stop()
        self._app.stopping.set()
        self.store.close()
        self.logbook.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.close_connections()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> KubeAPIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def loops(self):
        extra = tuple(c for c in (self.kueue, self.kai, self.mpi_operator, self.trainer,
                                  self.jobsets) if c is not None)
        dra = tuple(c for c in (self.compute_domains, self.dra) if c is not None)
        return (*dra, self.scheduler, *extra, self.jobs, self.kubelet, self.quotas)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def step(self, times: int = 1) -> None:
        """One deterministic pass of scheduler -> job controller -> kubelet -> job controller."""
        for _ in range(times):
            if self.compute_domains is not None:
                self.compute_domains.step()
            if self.dra is not None:
                self.dra.step()
            self.scheduler.step()
            if self.kueue is not None:
                self.kueue.step()
            if self.kai is not None:
                self.kai.step()
            if self.mpi_operator is not None:
                self.mpi_operator.step()
            for loop in (self.trainer, self.jobsets):
                if loop is not None:
                    loop.step()
            self.jobs.step()
            self.kubelet.step()
            self.jobs.step()
            self.quotas.step()

    def wait_for(self, predicate, timeout: float = 10.0, interval: float = 0.02):
        """Poll predicate() until truthy (stepping the loops when they are not threaded)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.controllers or not self.scheduler.running:
                self.step()
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            time.sleep(interval)

    # -- client configuration -----------------------------------------------------------------------
    def write_kubeconfig(self, path, context: str = "test", namespace: str = "default",
                         token: str | None = None, user: str | None = None) -> str:
        """Write a kubeconfig for kubernetes.config.load_kube_config(config_file=, context=)."""
        user_name = user or f"{context}-user"
        doc = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": f"{context}-cluster", "cluster": {"server": self.url}}],
            "users": [{"name": user_name, "user": {"token": token or self.token}}],
            "contexts": [{"name": context, "context": {
                "cluster": f"{context}-cluster", "user": user_name, "namespace": namespace}}],
            "current-context": context,
        }
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            import yaml
            p.write_text(yaml.safe_dump(doc, sort_keys=False))
        except ImportError:  # JSON is valid YAML
            import json
            p.write_text(json.dumps(doc, indent=2))
        return str(p)

    def add_token(self, token: str, user: str, groups: tuple[str, ...] = ()) -> None:
        self.tokens.add(token, user, groups)

    def service_account_token(self, namespace: str, name: str, pod: str | None = None) -> str:
        """A bearer token authenticating as the ServiceAccount (its user name and groups,
        as the service account token authenticator reports them).

        With `pod` (a pod of `namespace` running as that ServiceAccount) it is the token
        the kubelet projects into that pod, bound to it: the user's extra names the pod
        and, once it is scheduled, its node (k8s.io/apiserver/pkg/authentication/
        serviceaccount/util.go ServiceAccountInfo.UserInfo: pod-name, pod-uid, node-name,
        node-uid, credential-id; the node claim is on by default since 1.30, the
        ServiceAccountTokenPodNodeInfo feature gate, GA in 1.32)."""
        extra: dict[str, list[str]] = {}
        if pod is not None:
            bound = self.store.get("/pods", namespace, pod)
            if bound is None:
                raise ValueError(f"no pod {namespace}/{pod} to bind the token to")
            if bound["spec"].get("serviceAccountName") != name:
                raise ValueError(f"pod {namespace}/{pod} runs as ServiceAccount "
                                 f"{bound['spec'].get('serviceAccountName')!r}, not {name!r}")
            extra = {"authentication.kubernetes.io/pod-name": [pod],
                     "authentication.kubernetes.io/pod-uid": [bound["metadata"]["uid"]],
                     "authentication.kubernetes.io/credential-id": [f"JTI={new_uid()}"]}
            node_name = bound["spec"].get("nodeName")
            if node_name:
                extra["authentication.kubernetes.io/node-name"] = [node_name]
                node = self.store.get("/nodes", "", node_name)
                if node is not None:
                    extra["authentication.kubernetes.io/node-uid"] = [node["metadata"]["uid"]]
        token = secrets.token_hex(16)
        self.tokens.add(token, service_account_user(namespace, name),
                        service_account_groups(namespace), extra)
        return token

    # -- cluster setup helpers ------------------------------------------------------------------------
    def add_node(self, name: str, gpus: int = 8, labels: dict | None = None,
                 taints: list | None = None, annotations: dict | None = None, cpu: str = "64",
                 memory: str = "512Gi", ready: bool = True, unschedulable: bool = False,
                 pods: int = 110, gpu_resource: str = "nvidia.com/gpu",
                 resources: dict | None = None, address: str | None = None) -> dict:
        idx = self._node_count
        self._node_count += 1
        capacity = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods),
                    "ephemeral-storage": "1000Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        if gpus:
            capacity[gpu_resource] = str(gpus)
        capacity.update({k: str(v) for k, v in (resources or {}).items()})
        node_taints = [_taint(t) for t in taints or []]
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                       "beta.kubernetes.io/arch": "amd64", **(labels or {})},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                            **(annotations or {})}},
            "spec": {"podCIDR": f"10.244.{idx}.0/24", "podCIDRs": [f"10.244.{idx}.0/24"],
                     "taints": node_taints},
            "status": {
                "capacity": capacity, "allocatable": dict(capacity),
                "conditions": [], "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "addresses": [{"type": "InternalIP", "address": address or f"10.0.{idx // 250}."
                                                                          f"{idx % 250 + 10}"},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"architecture": "amd64", "bootID": f"boot-{name}",
                             "containerRuntimeVersion": "containerd://1.7.20",
                             "kernelVersion": "5.15.0-116-generic",
                             "kubeProxyVersion": self.version, "kubeletVersion": self.version,
                             "machineID": f"machine-{name}", "operatingSystem": "linux",
                             "osImage": "Ubuntu 22.04.4 LTS", "systemUUID": f"uuid-{name}"}}}
        if not node_taints:
            del node["spec"]["taints"]
        self._apply_node_state(node, ready, unschedulable)
        return self.create(node)

    @staticmethod
    def _apply_node_state(node: dict, ready: bool, unschedulable: bool) -> None:
        """Ready condition plus the taints the node lifecycle controller would manage."""
        now = now_rfc3339()
        status = node.setdefault("status", {})
        for t, why in (("MemoryPressure", "KubeletHasSufficientMemory"),
                       ("DiskPressure", "KubeletHasNoDiskPressure"),
                       ("PIDPressure", "KubeletHasSufficientPID")):
            set_condition(status, t, "False", why, why.replace("Kubelet", "kubelet "), now)
        if ready:
            set_condition(status, "Ready", "True", "KubeletReady", "kubelet is posting ready "
                                                                   "status", now)
        else:
            set_condition(status, "Ready", "False", "KubeletNotReady",
                          "container runtime network not ready", now)
        for c in status["conditions"]:
            c["lastHeartbeatTime"] = now
            c.pop("lastProbeTime", None)
        spec = node.setdefault("spec", {})
        managed = {"node.kubernetes.io/not-ready": not ready,
                   "node.kubernetes.io/unschedulable": unschedulable}
        taints = [t for t in spec.get("taints") or [] if t.get("key") not in managed]
        for key, on in managed.items():
            if on:
                taints.append({"key": key, "effect": "NoSchedule", "timeAdded": now})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        if unschedulable:
            spec["unschedulable"] = True
        else:
            spec.pop("unschedulable", None)

    def set_node_ready(self, name: str, ready: bool = True) -> dict:
        def edit(n):
            self._apply_node_state(n, ready, bool(n["spec"].get("unschedulable")))
        return self.store.mutate("/nodes", "", name, edit)

    def cordon(self, name: str, unschedulable: bool = True) -> dict:
        def edit(n):
            ready = any(c["type"] == "Ready" and c["status"] == "True"
                        for c in n["status"].get("conditions") or [])
            self._apply_node_state(n, ready, unschedulable)
        return self.store.mutate("/nodes", "", name, edit)

    def remove_node(self, name: str) -> None:
        self.delete("nodes", name)

    def script_pod(self, match=None, *, logs=(), exit_code: int | None = 0,
                   duration: float = 0.0, reason: str | None = None, runs=None,
                   selector: str | None = None, namespace: str | None = None,
                   container: str | None = None, ready_after: float | None = None,
                   probe=None) -> PodScript:
        """Script the containers of matching pods (newest registration wins).

        match: regex full-matched against the pod name, or a dict of labels.
        logs: strings or (delay_seconds, line); each delay counts from the previous line.
        exit_code: None keeps the container running after its logs.
        probe: what an exec readiness probe answers (kubelet.Run.probe).
        runs: a list of Run (or dicts of Run's fields) handed out one per container start,
              e.g. [Run(["boom"], exit_code=1), Run(["ok"])] for crash-then-succeed.
        """
        if isinstance(match, dict):
            selector = ",".join(f"{k}={v}" for k, v in match.items())
            match = None
        if runs is None:
            runs = [Run(list(logs), exit_code, duration, reason, probe=probe)]
        runs = [r if isinstance(r, Run) else Run(**r) for r in runs]
        return self.kubelet.add_script(PodScript(match, selector, namespace, container, runs,
                                                 ready_after))

    def set_pod_security(self, namespace: str, **levels: str) -> dict:
        """Label a namespace pod-security.kubernetes.io/<mode>=<level> (enforce, warn,
        audit; None removes the label), as `kubectl label ns` would."""
        def edit(ns):
            labels = ns["metadata"].setdefault("labels", {})
            for mode, level in levels.items():
                if level is None:
                    labels.pop(f"pod-security.kubernetes.io/{mode}", None)
                else:
                    labels[f"pod-security.kubernetes.io/{mode}"] = level
        return self.store.mutate("/namespaces", "", namespace, edit)

    def unpullable_image(self, image: str, message: str | None = None) -> None:
        """Make `image` a reference no registry serves: its pods go ErrImagePull, then
        ImagePullBackOff (kubelet.py), with containerd's not-found text by default."""
        self.kubelet.unpullable[image] = message or (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
            f'failed to resolve reference "{image}": {image}: not found')

    # -- optional API groups -----------------------------------------------------------------------
    @staticmethod
    def _bundle(name: str) -> str:
        bundle = ALIASES.get(name, name)
        if bundle not in OPTIONAL:
            raise KeyError(f"unknown API bundle {name!r}; known: {sorted(OPTIONAL)}")
        return bundle

    def install_crd(self, name: str = "mpijob") -> list[dict]:
        """Install the CRDs of a bundle ('mpijob', 'volcano', 'scheduler-plugins', 'kueue')."""
        return self.install_group(name, scheduler=False)

    def install_group(self, name: str, scheduler: bool = True) -> list[dict]:
        """Install a bundle's CRDs; for gang schedulers also start acting as that scheduler."""
        bundle = self._bundle(name)
        crd_rt = self.registry.by_key("apiextensions.k8s.io/customresourcedefinitions")
        out = []
        for rt in OPTIONAL[bundle]:
            crd_name = f"{rt.plural}.{rt.group}"
            existing = self.store.get(crd_rt.key, "", crd_name)
            out.append(existing or self.objects_api.create(crd_rt, crd_manifest(rt)))
        if scheduler and bundle in GANG_SCHEDULERS:
            self.scheduler.enable(GANG_SCHEDULERS[bundle], gang=bundle)
        if scheduler and bundle == "volcano" and self.volcano_webhook not in \
                self.admission.webhooks:
            self.admission.webhooks.append(self.volcano_webhook)
        return out

    def install_mpi_operator(self, gang_scheduling: str | None = None,
                             cluster_domain: str = "",
                             version: str = mpijob_crd.CURRENT) -> MPIOperator:
        """Install the MPIJob CRD and run the MPI Operator's controller (mpi_operator.py).

        gang_scheduling is its --gang-scheduling flag: None (the default deployment: no
        PodGroup), 'volcano', or a scheduler-plugins scheduler name. `version` picks the
        CRD's schema (mpijob_crd.py: an old operator's lacks fields) and the image tag."""
        self.install_crd("mpijob")
        schema = mpijob_crd.mpijob_schema(version)

        def with_schema(crd):
            for v in crd["spec"]["versions"]:
                v["schema"] = {"openAPIV3Schema": schema}

        self.store.mutate("apiextensions.k8s.io/customresourcedefinitions", "",
                          "mpijobs.kubeflow.org", with_schema)
        self._operator_deployment(gang_scheduling, cluster_domain, version)
        if self.mpi_operator is not None:
            self.mpi_operator.stop()
        self.mpi_operator = MPIOperator(self.store, self.registry, self.objects_api, self.tick,
                                        gang_scheduling, cluster_domain)
        if self.controllers and self._httpd is not None:
            self.mpi_operator.start()
        return self.mpi_operator

    def install_trainer(self, version: str = "v2.3.0", *,
                        trainjob_status: bool = False) -> Trainer:
        """Kubeflow Trainer's CRDs and controller manager (trainer.py: the TrainJob
        controller with its MPI and JobSet plugins, and its webhook) and the JobSet
        controller it needs (jobset.py), in kubeflow-system as its manifests install them,
        with its config (ConfigMap kubeflow-trainer-config). `trainjob_status`: the
        TrainJobStatus feature gate on (trainer_status.py: the pods' endpoint and its status
        server, on 127.0.0.1)."""
        self.install_crd("trainer")
        self.install_crd("jobset")
        schema = trainjob_schema()

        def with_schema(crd):
            for v in crd["spec"]["versions"]:
                v["schema"] = {"openAPIV3Schema": schema}

        self.store.mutate("apiextensions.k8s.io/customresourcedefinitions", "",
                          "trainjobs.trainer.kubeflow.org", with_schema)
        if self.get("namespaces", "kubeflow-system", "") is None:
            self.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "kubeflow-system"}})
        if self.get("deployments", "kubeflow-trainer-controller-manager",
                    "kubeflow-system") is None:
            labels = {"app.kubernetes.io/name": "trainer"}
            self.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "name": "kubeflow-trainer-controller-manager", "namespace": "kubeflow-system",
                "labels": labels},
                "spec": {"selector": {"matchLabels": labels}, "template": {
                    "metadata": {"labels": labels}, "spec": {"containers": [{
                        "name": "manager",
                        "image": f"ghcr.io/kubeflow/trainer/trainer-controller-manager:{version}"}]}}}})
        if self.get("configmaps", "kubeflow-trainer-config", "kubeflow-system") is None:
            self.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": "kubeflow-trainer-config", "namespace": "kubeflow-system"},
                "data": {"controller_manager_config.yaml":
                         trainer_status.controller_config(trainjob_status)}})
        if self.trainer is None:
            self.trainer = Trainer(self.store, self.registry, self.objects_api, self.tick)
        if trainjob_status and self.trainer.status_server is None:
            server = self.trainer.status_server = trainer_status.StatusServer(self.store)
            # the webhook's certificate Secret, whose CA Trainer copies to each TrainJob
            self.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": trainer_status.WEBHOOK_SECRET, "namespace": "kubeflow-system"},
                "stringData": {"ca.crt": server.ca_pem}})
            server.start()
            if self.player is not None:  # played launchers post there
                self.player.trainer_status = server
        if self.jobsets is None:
            self.jobsets = JobSetController(self.store, self.registry, self.objects_api,
                                            self.tick)
            self.admission.webhooks.append(self.trainer.webhook)
            if self.controllers and self._httpd is not None:
                self.trainer.start()
                self.jobsets.start()
        return self.trainer

    def install_kueue(self, frameworks=DEFAULT_FRAMEWORKS_V0_14, version: str = "v0.14.0",
                      controller: bool = True) -> Kueue:
        """Kueue's CRDs, its kueue-system/kueue-manager-config (integrations.frameworks) and
        Deployment, and (controller) its MPIJob integration running (kueue.py)."""
        self.install_group("kueue")
        if self.get("namespaces", "kueue-system", "") is None:
            self.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "kueue-system"}})
        if self.get("configmaps", "kueue-manager-config", "kueue-system") is not None:
            self.delete("configmaps", "kueue-manager-config", "kueue-system")
        self.create(manager_config(frameworks))
        if self.get("deployments", "kueue-controller-manager", "kueue-system") is None:
            self.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "name": "kueue-controller-manager", "namespace": "kueue-system",
                "labels": {"control-plane": "controller-manager"}},
                "spec": {"selector": {"matchLabels": {"control-plane": "controller-manager"}},
                         "template": {"metadata": {"labels": {
                             "control-plane": "controller-manager"}}, "spec": {"containers": [{
                                 "name": "manager", "args": ["--config=/controller_manager_"
                                                             "config.yaml"],
                                 "image": f"registry.k8s.io/kueue/kueue:{version}"}]}}}})
        if self.kueue is not None:
            self.kueue.stop()
            self.admission.webhooks.remove(self.kueue.webhook)
            self.kueue = None
        kueue = Kueue(self.store, self.registry, self.objects_api, self.tick, frameworks)
        if controller:
            self.kueue = kueue
            self.admission.webhooks.append(kueue.webhook)
            if self.controllers and self._httpd is not None:
                kueue.start()
        return kueue

    def install_kai(self) -> KaiPodGrouper:
        """KAI Scheduler's CRDs, its scheduler (kai-scheduler) and podgrouper (kai.py)."""
        self.install_group("kai")
        if self.kai is None:
            self.kai = KaiPodGrouper(self.store, self.registry, self.objects_api, self.tick)
            if self.controllers and self._httpd is not None:
                self.kai.start()
        return self.kai

    def serve_workload_api(self) -> None:
        """Kubernetes 1.35 with the GenericWorkload gate and scheduling.k8s.io/v1alpha1 on:
        the Workload API served and kube-scheduler's GangScheduling plugin (workloads.py)."""
        self.registry.add(ResourceType("scheduling.k8s.io", "v1alpha1", "workloads",
                                       "Workload"))
        self.scheduler.workload_api = True

    def kai_queue(self, name: str) -> None:
        """A KAI Queue (scheduling.run.ai/v2, cluster-scoped; quotas are not modelled)."""
        self.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                     "metadata": {"name": name}, "spec": {}})

    def kueue_queue(self, name: str, quota: dict, namespace: str = "default") -> None:
        """A LocalQueue `name` in `namespace` over a ClusterQueue `name` with this quota."""
        for obj in cluster_queue(name, quota):
            if self.get(obj["kind"], obj["metadata"]["name"], "") is None:
                self.create(obj)
        self.create(local_queue(name, namespace, name))

    def _operator_deployment(self, gang_scheduling: str | None, cluster_domain: str,
                             version: str = mpijob_crd.CURRENT) -> None:
        """The Deployment the operator's manifests install (mpi-operator/manifests/base/
        deployment.yaml, standalone overlay namespace mpi-operator), its flags in args."""
        if self.get("namespaces", "mpi-operator", "") is None:
            self.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "mpi-operator"}})
        args = ["-alsologtostderr", "--lock-namespace=mpi-operator"]
        if gang_scheduling:
            args.append(f"--gang-scheduling={gang_scheduling}")
        if cluster_domain:
            args.append(f"--cluster-domain={cluster_domain}")
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "mpi-operator", "namespace": "mpi-operator",
                            "labels": {"app": "mpi-operator"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "mpi-operator"}},
                        "template": {"metadata": {"labels": {"app": "mpi-operator"}},
                                     "spec": {"serviceAccountName": "mpi-operator",
                                              "containers": [{
                                                  "name": "mpi-operator", "args": args,
                                                  "image": f"mpioperator/mpi-operator:{version}"}]}}}}
        if self.get("deployments", "mpi-operator", "mpi-operator") is not None:
            self.delete("deployments", "mpi-operator", "mpi-operator")
        self.create(dep)

    def enable_scheduler(self, scheduler_name: str, gang: str | None = None) -> None:
        """Also schedule pods with this schedulerName (gang: 'volcano'/'scheduler-plugins')."""
        self.scheduler.enable(scheduler_name, gang)

    def uninstall_group(self, name: str) -> None:
        bundle = self._bundle(name)
        for rt in OPTIONAL[bundle]:
            try:
                self.delete("customresourcedefinitions", f"{rt.plural}.{rt.group}")
            except errors.ApiError:
                pass
        if bundle in GANG_SCHEDULERS:
            self.scheduler.disable(GANG_SCHEDULERS[bundle])
        if bundle == "volcano" and self.volcano_webhook in self.admission.webhooks:
            self.admission.webhooks.remove(self.volcano_webhook)

    uninstall_crd = uninstall_group

    # -- policy and faults ---------------------------------------------------------------------------
    def forbid(self, verb: str, resource: str, namespace: str | None = None,
               user: str | None = None, group: str | None = None):
        """Deny (verb, resource[/subresource][.group], namespace) with a real 403, to
        everyone, to `user`, or to the members of `group`."""
        return self.policy.forbid(verb, resource, namespace, user, group)

    def allow(self, verb: str, resource: str, namespace: str | None = None,
              user: str | None = None) -> None:
        self.policy.allow(verb, resource, namespace, user)

    def fail_next(self, n: int = 1, status: int | None = 503, method: str | None = None,
                  path_regex: str | None = None, drop: bool = False,
                  retry_after: int | None = 1, message: str | None = None,
                  lose_answer: bool = False, query: tuple[str, ...] = ()) -> Fault:
        """Fail the next n matching requests with `status` (or drop the connection; with
        `lose_answer`, drop it only after the request took effect); `query` names query
        parameters a request must carry to match ('continue': a list's second page on).

        429 carries Retry-After (like API Priority and Fairness); note urllib3, and so the
        kubernetes client, transparently retries 429/503 responses that carry it."""
        return self.faults.add(Fault(n, None if drop or lose_answer else status, method,
                                     path_regex, retry_after, message, after=lose_answer,
                                     query=tuple(query)))

    # -- inspection and direct manipulation ----------------------------------------------------------
    def resource(self, kind: str) -> ResourceType:
        return self.registry.find(kind)

    def objects(self, kind: str, namespace: str | None = None) -> list[dict]:
        rt = self.resource(kind)
        items = self.store.items(rt.key, namespace if rt.namespaced else None)
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return deepcopy(items)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict | None:
        rt = self.resource(kind)
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        return deepcopy(obj) if obj is not None else None

    def add_pvc(self, name: str, access_modes: list[str], namespace: str = "default",
                storage: str = "100Gi", bound: bool = True) -> dict:
        """A claim as the PV controller leaves it once bound: Bound, its volume's access
        modes in status, the volume `pvc-<uid>` (the name external provisioners give)."""
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": name, "namespace": namespace},
                 "spec": {"accessModes": list(access_modes),
                          "resources": {"requests": {"storage": storage}}},
                 "status": {"phase": "Pending"}}
        made = self.create(claim)
        if not bound:
            return made

        def bind(c):
            c["spec"]["volumeName"] = f"pvc-{c['metadata']['uid']}"
            c["status"] = {"phase": "Bound", "accessModes": list(access_modes),
                           "capacity": {"storage": storage}}
        return deepcopy(self.store.mutate("/persistentvolumeclaims", namespace, name, bind))

    def create(self, obj: dict, namespace: str | None = None) -> dict:
        """Create through admission but without HTTP/auth/faults (test setup)."""
        rt = self._rt_for(obj)
        return deepcopy(self.objects_api.create(rt, obj, namespace))

    def delete(self, kind: str, name: str, namespace: str = "default",
               propagation: str | None = None) -> None:
        rt = self.resource(kind)
        self.objects_api.delete(rt, namespace if rt.namespaced else "", name, propagation)

    def events_for(self, name: str, namespace: str = "default",
                   reason: str | None = None) -> list[dict]:
        return [e for e in self.objects("events", namespace)
                if e["involvedObject"].get("name") == name
                and (reason is None or e.get("reason") == reason)]

    def _rt_for(self, obj: dict) -> ResourceType:
        av, kind = obj.get("apiVersion", "v1"), obj.get("kind")
        for rt in self.registry.all():
            if rt.kind == kind and rt.api_version == av:
                return rt
        raise KeyError(f"no resource serves {av} {kind}")

    def compact(self) -> None:
        """etcd compaction now: continue tokens and watches from before it get 410."""
        self.store.compact()

    @property
    def bytes_out(self) -> int:
        return self._app.bytes_out

    def clear_requests(self) -> None:
        with self._log_lock:
            self.request_log.clear()

    def count_requests(self, method: str | None = None, path_regex: str | None = None) -> int:
        with self._log_lock:
            log = list(self.request_log)
        return sum(1 for r in log if (method is None or r.method == method.upper())
                   and (path_regex is None or re.search(path_regex, r.path)))


def crd_manifest(rt: ResourceType) -> dict:
    names = {"plural": rt.plural, "singular": rt.singular_name, "kind": rt.kind,
             "listKind": rt.list_kind}
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{rt.plural}.{rt.group}"},
            "spec": {"group": rt.group, "names": names,
                     "scope": "Namespaced" if rt.namespaced else "Cluster",
                     "versions": [{"name": rt.version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}},
                                   "subresources": {"status": {}}}]}}
