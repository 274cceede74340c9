"""Representative jobs rendered deterministically (fixed keys, a stub benchmark)."""

import dataclasses

from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.spec import build_spec
from mpijob.jobspec.worker_share import plan_shares
from mpijob.k8s.render import SSHKeys, with_owner
from mpijob.k8s.trainer_progress import StatusEndpoint

FIXED_KEYS = SSHKeys(
    private_key="-----BEGIN OPENSSH PRIVATE KEY-----\nFIXED\n-----END OPENSSH PRIVATE KEY-----\n",
    public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFIXED hvdk8s\n",
)
STUB_BENCHMARK = "print('benchmark')\n"

# --pod-patch worker=FILE: a sidecar, a securityContext and an env var for the worker.
POD_PATCH = {"target": "worker", "source": "worker-patch.yaml", "patch": {"spec": {
    "securityContext": {"fsGroup": 1000},
    "containers": [{"name": "worker", "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
                   {"name": "log-shipper", "image": "busybox:1.36",
                    "command": ["sh", "-c", "sleep infinity"]}]}}}

# Data volumes, a host directory, working dir and service account, in both modes.
DATA_VOLUMES = dict(name="data", workers=2, gpus_per_worker=1,
                    data=({"claim": "imagenet", "mount": "/data", "read_only": True},),
                    data_dirs=({"path": "/mnt/scratch", "mount": "/scratch"},),
                    working_dir="/workspace", service_account="trainer",
                    benchmark={"data_name": "imagenet", "data_dir": "/data/imagenet"},
                    pod_patches=(POD_PATCH,))

CASES = {
    "pods-benchmark-4x1": dict(
        spec=dict(name="demo", workers=4, gpus_per_worker=1, image="horovod/horovod:0.28.1"),
        mode="pods"),
    "pods-shell-volcano-hostnet": dict(
        spec=dict(name="train", namespace="team-a", workers=2, gpus_per_worker=4, cpu="8",
                  memory="64Gi", env={"LR": "0.1"}, command=("python train.py --lr $LR",),
                  shell=True, gang="volcano", queue="research", host_network=True,
                  network_interface="ib0",
                  tolerations=({"key": "nvidia.com/gpu", "operator": "Exists",
                                "effect": "NoSchedule"},),
                  node_selector={"pool": "v100"}, labels={"team": "vision"},
                  image="registry.example.com/train:1"),
        mode="pods"),
    "operator-mpirun-kueue": dict(
        spec=dict(name="arena-style", workers=2, gpus_per_worker=2, gang="kueue",
                  queue="team-q",
                  command=("mpirun -np 4 --allow-run-as-root python /examples/train.py",),
                  shell=True, run_policy={"ttl_seconds_after_finished": 600}),
        mode="operator"),
    "operator-benchmark-intel": dict(
        spec=dict(name="bench", workers=3, gpus_per_worker=1, mpi_implementation="Intel",
                  benchmark={"model": "vgg16", "batch_size": 32, "use_fp16": True}),
        mode="operator"),
    "pods-cpu-argv-plugins": dict(
        spec=dict(name="cpu", workers=2, gpus_per_worker=0, gang="scheduler-plugins",
                  command=("python", "train.py", "--data", "/data dir"),
                  mpi_implementation="MPICH"),
        mode="pods"),
    "pods-data-volumes": dict(spec=DATA_VOLUMES, mode="pods"),
    "operator-data-volumes": dict(spec=DATA_VOLUMES, mode="operator"),
    # A TrainJob where Trainer's TrainJobStatus gate is off (or unknown), and where it is on
    # with a status server of its own port: the launcher gets the endpoint.
    "trainjob-benchmark": dict(
        spec=dict(name="tj", namespace="team-a", workers=2, gpus_per_worker=1),
        mode="trainjob"),
    "trainjob-benchmark-trainer-status": dict(
        spec=dict(name="tj", namespace="team-a", workers=2, gpus_per_worker=1),
        mode="trainjob", trainer_status=StatusEndpoint(port=9443)),
}


def render_case(case: str, placement=None, root_uid=None) -> list[dict]:
    c = CASES[case]
    spec = build_spec(**c["spec"])
    # As the plan decides them without a cluster (launcher.preparing.planning.plan_job),
    # less the preflight: the golden files show the job without it.
    decisions = dataclasses.replace(Decisions.undecided(spec), worker_shares=(
        plan_shares(None, None, spec.gpus_per_worker)
        if spec.cpu is None or spec.memory is None else ()))
    objects = render(spec, decisions=decisions, mode=c["mode"], placement=placement,
                     ssh=FIXED_KEYS if c["mode"] == "pods" else None,
                     benchmark_source=STUB_BENCHMARK, trainer_status=c.get("trainer_status"))
    return with_owner(objects, root_uid) if root_uid else objects
