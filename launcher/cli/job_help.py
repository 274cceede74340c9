"""How `submit mpi` and `plan` present the job options the spec declares: each option's
help, the panel `--help` lists it under and the name of its value (`N`, `QUANTITY`).

The options themselves are generated from the spec's fields (mpijob.jobspec.spec.Flag: the
option's names, type, default, choices, parsing); launcher.cli.spec_options adds what is
here, by the field's path. A field that declares an option and is missing here fails the
first `submit mpi` (and tests/launcher/cli/test_job_options.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mpijob.jobspec import defaults

# Where `submit mpi --help` lists an option (launcher.cli.spec_options gives the titles).
Panel = Literal["job", "placement", "pods", "network", "data", "benchmark"]


@dataclass(frozen=True)
class Shown:
    panel: Panel
    metavar: str | None = None  # a choice shows its values instead; a flag shows none
    help: str = ""


SHOWN: dict[str, Shown] = {
    "benchmark.model": Shown("benchmark", "MODEL", help=(
        "Benchmark model, and the model of the throughput prediction: "
        f"{', '.join(defaults.BENCHMARK_MODELS)}.")),
    "benchmark.batch_size": Shown("benchmark", "N", help=(
        "Batch size per GPU.")),
    "benchmark.num_batches": Shown("benchmark", "N", help=(
        "Benchmark: timed steps.")),
    "benchmark.num_warmup_batches": Shown("benchmark", "N", help=(
        "Benchmark: untimed steps first.")),
    "benchmark.image_size": Shown("benchmark", "PIXELS", help=(
        "Benchmark image size (small sizes for CPU runs).")),
    "benchmark.use_fp16": Shown("benchmark", help=(
        "Benchmark: mixed precision.")),
    "benchmark.xla": Shown("benchmark", help=(
        "Benchmark: XLA compilation.")),
    "benchmark.data_name": Shown("benchmark", help=(
        "Benchmark input: synthetic images, or "
        "ImageNet TFRecords from --benchmark-data-dir.")),
    "benchmark.data_dir": Shown("benchmark", "DIR", help=(
        "Benchmark: the directory of ImageNet TFRecords (train-*-of-*) as the ranks "
        "see it (with --data-name imagenet).")),
    "run_policy.clean_pod_policy": Shown("job", help=(
        "Which pods to delete when the job ends.")),
    "run_policy.backoff_limit": Shown("job", "N", help=(
        "Launcher retries (default 0: a failed run ends the job).")),
    "run_policy.ttl_seconds_after_finished": Shown("job", "SECONDS", help=(
        "Delete the finished job after this many seconds (ttlSecondsAfterFinished).")),
    "run_policy.active_deadline_seconds": Shown("job", "SECONDS", help=(
        "Fail the job after this many seconds (activeDeadlineSeconds).")),
    "name": Shown("job", "NAME", help=(
        "Job name, a DNS-1035 label (default: the model or "
        "program plus a random suffix, e.g. resnet50-x7k2p).")),
    "image": Shown("job", "IMAGE", help=(
        "Training image.")),
    "workers": Shown("job", "N", help=(
        "Workers, each with --gpus GPUs. With a placement, the workers that land on "
        "one node share one pod (so they can use NVLink). Elastic jobs: the count to start "
        "with.")),
    "min_workers": Shown("job", "N", help=(
        "Elastic (Horovod elastic, Gloo): the fewest workers the job runs on; a lost worker "
        "does not end it while this many remain. Default --workers.")),
    "max_workers": Shown("job", "N", help=(
        "Elastic: the most workers; more join as GPUs free up, or with hvdk8s scale. "
        "Default --workers.")),
    "gpus_per_worker": Shown("job", "N", help=(
        "GPUs per worker; 0 runs ranks on the CPU.")),
    "cpu": Shown("pods", "QUANTITY", help=(
        "CPU per worker (e.g. 4, 500m).")),
    "memory": Shown("pods", "QUANTITY", help=(
        "Memory per worker (e.g. 16Gi).")),
    "env": Shown("job", "KEY=VALUE", help=(
        "K=V, repeatable.")),
    "mpi_implementation": Shown("job", help=(
        "MPI implementation of the image (any case).")),
    "queue": Shown("placement", "QUEUE", help=(
        "Volcano queue, Kueue LocalQueue or KAI Queue.")),
    "scheduler_name": Shown("placement", "SCHEDULER", help=(
        "Scheduler for the workers (default: the gang scheduler's, else the cluster "
        "default).")),
    "priority_class": Shown("placement", "PRIORITYCLASS", help=(
        "PriorityClass name.")),
    "node_selector": Shown("placement", "KEY=VALUE", help=(
        "Node label KEY=VALUE the workers' nodes must have; repeatable.")),
    "tolerations": Shown("placement", "TOLERATION", help=(
        "Tolerate a taint: key=value:Effect, key:Effect, key or all; repeatable.")),
    "labels": Shown("pods", "KEY=VALUE", help=(
        "k=v, repeatable.")),
    "annotations": Shown("pods", "KEY=VALUE", help=(
        "k=v, repeatable.")),
    "image_pull_secrets": Shown("pods", "SECRET", help=(
        "Secret for a private registry; repeatable.")),
    "image_pull_policy": Shown("pods", help=(
        "When the kubelet pulls the image.")),
    "shm_size": Shown("pods", "QUANTITY", help=(
        "/dev/shm size.")),
    "host_network": Shown("network", help=(
        "Run pods on the node's network (the node's NICs for TCP; RDMA still needs "
        "--rdma: host networking does not give a container /dev/infiniband).")),
    "network_interface": Shown("network", "INTERFACE", help=(
        "NIC for MPI/NCCL with --host-network.")),
    "launcher_cpu": Shown("pods", "QUANTITY", help=(
        "CPU for the launcher pod (it only runs mpirun; it never gets a GPU).")),
    "launcher_memory": Shown("pods", "QUANTITY", help=(
        "Memory for the launcher pod.")),
    "placement_policy": Shown("placement", help=(
        "How workers are placed on nodes and GPUs.")),
    "cross_zone": Shown("placement", help=(
        "Allow the job's nodes in several zones (never by default).")),
    "gpu_request": Shown("placement", help=(
        "How workers ask for GPUs (auto: DRA claims naming the planned GPUs where the "
        "cluster publishes DRA GPU devices, else the device plugin).")),
    "run_as_user": Shown("pods", "UID", help=(
        "Run every pod as this non-root uid, restricted Pod Security compliant "
        "(runAsNonRoot, no privilege escalation, no capabilities, seccomp RuntimeDefault); "
        "the image must serve it (sshd, a writable home).")),
    "run_as_group": Shown("pods", "GID", help=(
        "Primary group for --run-as-user.")),
    "start_timeout": Shown("pods", "SECONDS", help=(
        "Fail the job, naming the pod and why (image pull, config error, crash loop), "
        "when its pods are not all running this long after creation; 0: never.")),
    "stall_timeout": Shown("job", "SECONDS", help=(
        "End the job, releasing its GPUs, once its ranks have reported no step for this "
        "long (a stall: `get` names the ranks); the reason is kept. On Kubernetes the "
        "launcher pod's monitor ends it (its image needs python3). Default: never.")),
    "metrics_port": Shown("job", "PORT", help=(
        "Serve the job's progress (step, images/sec against the prediction, stall, "
        "stragglers) in Prometheus' text format on this port of the launcher pod "
        "(/metrics), with a PodMonitor where the cluster has the CRD; the image needs "
        "python3. Default: off.")),
    "rdma": Shown("network", help=(
        "Request the nodes' RDMA devices (InfiniBand/RoCE for NCCL) for the workers: on "
        "(or refuse, saying why), off, or auto: when the job spans several nodes and every "
        "planned node offers them.")),
    "preflight": Shown("job", help=(
        "Before the program, on the job's own GPUs and line: NVML health checks and "
        "all-reduces per node, across nodes and over the job, judged against the model's "
        "expectation for this placement. warn: report in `get` and go on; fail: end the "
        "job before its program starts, releasing its GPUs; off: skip. Default: warn on "
        "Kubernetes; on this machine warn for GPU jobs, off for CPU ones.")),
    "extra_resources": Shown("pods", "NAME=N", help=(
        "Another device resource per worker pod, NAME=N (e.g. example.com/fpga=1); "
        "repeatable.")),
    "networks": Shown("network", "NAD[,NAD]", help=(
        "Multus secondary networks for the workers: NetworkAttachmentDefinitions, "
        "name or namespace/name; each must exist, and the workers request the resource its "
        "k8s.v1.cni.cncf.io/resourceName names (read at submit and --dry-run=server). "
        "Repeatable.")),
    "data": Shown("data", "PVC:MOUNT[:ro]", help=(
        "Mount a PersistentVolumeClaim in every worker (and the launcher when your "
        "mpirun line runs there); its access modes must allow the job's placement. "
        "Repeatable.")),
    "data_dirs": Shown("data", "HOSTPATH:MOUNT[:ro]", help=(
        "Mount a directory of the node (hostPath) in every worker; the scheduler does "
        "not know which nodes have it. Repeatable.")),
    "working_dir": Shown("data", "DIR", help=(
        "Working directory of the launcher and the ranks.")),
    "service_account": Shown("pods", "NAME", help=(
        "ServiceAccount the job's pods run as.")),
    "pod_patches": Shown("pods", "[ROLE=]FILE", help=(
        "Strategic-merge patch (YAML) of the pod templates of ROLE (launcher, worker "
        "or all, the default), for fields without a flag; repeatable, applied in order.")),
}
