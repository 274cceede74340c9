"""`hvdk8s dev cluster`: the test API server as a user tries hvdk8s without a cluster.

It serves HTTPS with a certificate of its own CA (kubectl sends a bearer token only over
TLS: client-go's transport refuses no token, but kubectl's `--token` over plain HTTP is
a warning and many plugins refuse it), and writes a kubeconfig that both kubectl and
hvdk8s read: the CA as `certificate-authority-data`, a token user, a context with its
namespace. The cluster is one of a few shipped shapes, each a function below.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import multikueue
from .pki import Pki, make_pki
from .server import KubeAPIServer

# Two DGX-1-like V100 nodes, as the tests' kube_server fixture has (tests/kubeapi_fixtures.py).
GPU_LABELS = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.count": "8"}


def _two_nodes(srv: KubeAPIServer) -> None:
    for i in range(2):
        srv.add_node(f"gpu-node-{i}", gpus=8, labels=dict(GPU_LABELS))
    srv.add_pvc("data-rwx", ["ReadWriteMany"])
    srv.add_pvc("data-rwo", ["ReadWriteOnce"])


def _operator(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_mpi_operator()


def _trainer(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_trainer()


def _trainer_status(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_trainer(trainjob_status=True)


def _volcano(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_group("volcano")
    srv.install_mpi_operator(gang_scheduling="volcano")


def _kueue(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_mpi_operator()
    srv.install_kueue()
    srv.kueue_queue("team", {"nvidia.com/gpu": "16", "cpu": "128", "memory": "1Ti"})


def _kai(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_kai()
    srv.kai_queue("default-queue")


def _trainer_kueue(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_trainer()
    srv.install_kueue()  # its default frameworks take TrainJobs (kueue.py)
    srv.kueue_queue("team", {"nvidia.com/gpu": "16", "cpu": "128", "memory": "1Ti"})


MULTIKUEUE_WORKER = "worker1"


def _multikueue_manager(srv: KubeAPIServer) -> None:
    """A manager cluster without GPUs: Kueue dispatches the queue team's jobs to worker1
    (multikueue.py), where they run; the manager's operator and Trainer leave them alone."""
    srv.add_node("manager-0", gpus=0)
    srv.install_mpi_operator()
    srv.install_trainer()
    srv.install_kueue()
    multikueue.setup(srv, "multikueue", [MULTIKUEUE_WORKER], "team",
                     {"nvidia.com/gpu": "16", "cpu": "128", "memory": "1Ti"})


def _multikueue_worker(srv: KubeAPIServer) -> None:
    _two_nodes(srv)
    srv.install_mpi_operator()
    srv.install_trainer()


def _racks(srv: KubeAPIServer) -> None:
    """Eight 8-GPU nodes in two racks (topology.kubernetes.io labels placement reads)."""
    for i in range(8):
        rack = f"rack-{i // 4}"
        srv.add_node(f"gpu-node-{i}", gpus=8, labels={
            **GPU_LABELS, "topology.kubernetes.io/zone": "zone-a",
            "topology.kubernetes.io/rack": rack})
    srv.add_pvc("data-rwx", ["ReadWriteMany"])


@dataclass(frozen=True)
class Shape:
    name: str
    description: str
    build: Callable[[KubeAPIServer], None]
    # MultiKueue's worker clusters: (name, which is also its kubeconfig context; build)
    workers: tuple[tuple[str, Callable[[KubeAPIServer], None]], ...] = ()


SHAPES = {s.name: s for s in (
    Shape("two-nodes", "two 8-GPU V100 nodes; claims data-rwx (ReadWriteMany) and data-rwo "
          "(ReadWriteOnce)", _two_nodes),
    Shape("operator", "two-nodes plus the Kubeflow MPI Operator", _operator),
    Shape("trainer", "two-nodes plus Kubeflow Trainer and JobSet (no MPI Operator)", _trainer),
    Shape("trainer-status", "trainer with its TrainJobStatus feature gate on (its status "
          "endpoint, served on 127.0.0.1, writes status.trainerStatus; hvdk8s's launcher "
          "posts its progress there)", _trainer_status),
    Shape("volcano", "two-nodes plus Volcano and the MPI Operator (--gang-scheduling=volcano)",
          _volcano),
    Shape("kueue", "two-nodes plus Kueue (LocalQueue team) and the MPI Operator", _kueue),
    Shape("trainer-kueue", "trainer plus Kueue (LocalQueue team: --gang --queue team)",
          _trainer_kueue),
    Shape("multikueue", "a manager cluster without GPUs whose Kueue queue team (--gang "
          f"--queue team) dispatches to the worker cluster {MULTIKUEUE_WORKER} (context "
          f"{MULTIKUEUE_WORKER}: two-nodes, the MPI Operator, Trainer)", _multikueue_manager,
          workers=((MULTIKUEUE_WORKER, _multikueue_worker),)),
    Shape("kai", "two-nodes plus the KAI Scheduler (Queue default-queue)", _kai),
    Shape("racks", "eight 8-GPU nodes in two racks; claim data-rwx", _racks),
)}
DEFAULT_SHAPE = "two-nodes"


def write_kubeconfig(srv: KubeAPIServer, pki: Pki, path: Path, context: str,
                     workers: dict[str, KubeAPIServer] | None = None, *,
                     token: str | None = None, user: str = "admin") -> Path:
    """A kubeconfig kubectl and hvdk8s both read: the CA inline, a token user per cluster
    (the admin's, unless `token` is another's for the first); MultiKueue's worker clusters as
    contexts of their own names. Private from its creation: it holds tokens."""
    import yaml

    clusters, users, contexts = [], [], []
    for name, server in [(context, srv), *(workers or {}).items()]:
        who = user if server is srv else "admin"
        clusters.append({"name": name, "cluster": {
            "server": server.url,
            "certificate-authority-data": base64.b64encode(pki.ca_pem).decode()}})
        users.append({"name": f"{name}-{who}", "user": {
            "token": (token or server.token) if server is srv else server.token}})
        contexts.append({"name": name, "context": {
            "cluster": name, "user": f"{name}-{who}", "namespace": "default"}})
    doc = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": clusters,
           "users": users, "contexts": contexts, "current-context": context}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a new file gets the mode below; an old one keeps its own
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(yaml.safe_dump(doc, sort_keys=False))
    return path


# What the restricted user may do: run jobs in namespace default, nothing cluster-wide (the
# server enforces it: KubeAPIServer(rbac=True)). hvdk8s then plans as far as it may read.
RESTRICTED_USER = "dev-user"
RESTRICTED_RULES = [
    {"apiGroups": [""], "verbs": ["*"], "resources": [
        "pods", "pods/log", "services", "configmaps", "secrets", "events",
        "persistentvolumeclaims"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["*"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["*"]},
]


def write_restricted_kubeconfig(srv: KubeAPIServer, pki: Pki, path: Path,
                                context: str) -> Path:
    """A second kubeconfig, for a user bound (a RoleBinding in default) to run jobs there
    and nothing else: what a tenant of a shared cluster has."""
    import secrets

    rbac = "rbac.authorization.k8s.io"
    srv.create({"apiVersion": f"{rbac}/v1", "kind": "Role",
                "metadata": {"name": RESTRICTED_USER, "namespace": "default"},
                "rules": RESTRICTED_RULES})
    srv.create({"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
                "metadata": {"name": RESTRICTED_USER, "namespace": "default"},
                "subjects": [{"kind": "User", "name": RESTRICTED_USER, "apiGroup": rbac}],
                "roleRef": {"apiGroup": rbac, "kind": "Role", "name": RESTRICTED_USER}})
    token = secrets.token_hex(16)
    srv.add_token(token, RESTRICTED_USER)
    return write_kubeconfig(srv, pki, path, context, token=token, user=RESTRICTED_USER)


# What a container's life takes on a node (simulated seconds; lives.py plays the rest):
# pulling a cached image and creating the container, and CrashLoopBackOff's and the image
# pull's first back-off (kubelet: 10s doubling to 5 minutes).
START_SECONDS = 1.0
BACK_OFF_SECONDS = 10.0


@dataclass
class DevCluster:
    shape: str
    server: KubeAPIServer
    kubeconfig: Path
    workers: dict[str, KubeAPIServer] = field(default_factory=dict)
    loops: list = field(default_factory=list)
    restricted_kubeconfig: Path | None = None  # write_restricted_kubeconfig's

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop()
        for worker in self.workers.values():
            worker.stop()
        self.server.stop()


def _server(tls: ssl.SSLContext, speed: float) -> KubeAPIServer:
    return KubeAPIServer(tls=tls, rbac=True, lives=speed, start_delay=START_SECONDS / speed,
                         restart_delay=BACK_OFF_SECONDS / speed)


def start(shape: str, kubeconfig: Path, *, context: str = "hvdk8s-dev",
          port: int = 0, speed: float = 1.0) -> DevCluster:
    """Start a TLS test API server of this shape (and its worker clusters) and write its
    kubeconfig. Containers play their lives `speed` times faster than real time."""
    pki = make_pki()
    with tempfile.TemporaryDirectory() as tmp:  # loaded into the context, then gone
        tls = pki.server_context(Path(tmp))
    built = SHAPES[shape]
    srv = _server(tls, speed)
    built.build(srv)
    srv.start(port=port)
    dev = DevCluster(shape, srv, kubeconfig)
    try:
        for name, build in built.workers:
            worker = dev.workers[name] = _server(tls, speed)
            build(worker)
            worker.start()
        if dev.workers:
            dispatcher = multikueue.MultiKueue(srv, dev.workers)
            dispatcher.start()
            dev.loops.append(dispatcher)
        write_kubeconfig(srv, pki, kubeconfig, context, dev.workers)
        restricted = write_restricted_kubeconfig(
            srv, pki, kubeconfig.with_name(f"{kubeconfig.stem}-restricted{kubeconfig.suffix}"),
            context)
    except BaseException:
        dev.stop()
        raise
    return dataclasses.replace(dev, restricted_kubeconfig=restricted)
