"""Every default and every choice list of a job's options, written once.

The spec model (`mpijob.jobspec.spec`), the experiment matrix, the submit pipeline and the
CLI (`launcher/cli/options.py`) all take them from here. Only `typing`: the CLI declares
its options from it without building the pydantic models (importing mpijob.jobspec.spec
costs ~65 ms, which `hvdk8s --help` and `list` would pay).
"""

from __future__ import annotations

from typing import Literal, get_args

BackendName = Literal["local", "kubernetes"]
# How the job reaches the cluster: built-in pods, an MPIJob (MPI Operator), a TrainJob
# (Kubeflow Trainer); auto takes what the cluster has (launcher.backends.kubernetes.modes).
Mode = Literal["auto", "pods", "operator", "trainjob"]
ResolvedMode = Literal["pods", "operator", "trainjob"]
MPIImplementation = Literal["OpenMPI", "Intel", "MPICH"]
CleanPodPolicy = Literal["Running", "All", "None"]
PlacementPolicy = Literal["topology", "binpack", "spread"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
Precision = Literal["fp32", "fp16"]
# The built-in benchmark's models (the spec accepts them in any case).
BenchmarkModel = Literal["vgg16", "vgg19", "resnet50", "resnet101", "resnet152", "inception3"]
BENCHMARK_MODELS = get_args(BenchmarkModel)
# The gang schedulers (mpijob.gang's registry; tests/mpijob/gang/test_gang_registry.py keeps
# them equal), and those that place by network level (a cluster file's `network.scheduler`).
GangScheduler = Literal["none", "volcano", "scheduler-plugins", "kueue", "kai", "workload-api"]
NetworkScheduler = Literal["kueue", "volcano", "kai"]
# How workers ask for GPUs: the device plugin's count, or DRA claims (mpijob.k8s.dra);
# --gpu-request auto picks DRA where the cluster's nodes publish DRA GPU devices.
GpuRequest = Literal["device-plugin", "dra"]
GpuRequestChoice = Literal["auto", GpuRequest]
# --rdma: request the nodes' RDMA devices (mpijob.scheduling.rdma); auto where the job spans
# several nodes and every planned node offers them.
RdmaChoice = Literal["auto", "on", "off"]
# --preflight: check the job's GPUs and links before its program (mpijob.perf.preflight):
# off, warn (report and go on) or fail (end the job before its program starts).
PreflightMode = Literal["off", "warn", "fail"]
# --dry-run[=client|server]; "none" is kubectl's spelling of no dry run.
DryRun = Literal["client", "server", "none"]
# The same choices as tuples, for messages and loops.
(BACKENDS, MODES, MPI_IMPLEMENTATIONS, CLEAN_POD_POLICIES, PLACEMENT_POLICIES, PULL_POLICIES,
 PRECISIONS, GANG_SCHEDULERS) = (
    get_args(choice) for choice in (BackendName, Mode, MPIImplementation, CleanPodPolicy,
                                    PlacementPolicy, PullPolicy, Precision, GangScheduler))

MODE: Mode = "auto"
MPI_IMPLEMENTATION: MPIImplementation = "OpenMPI"
CLEAN_POD_POLICY: CleanPodPolicy = "Running"
PLACEMENT_POLICY: PlacementPolicy = "topology"
PULL_POLICY: PullPolicy = "IfNotPresent"
PRECISION: Precision = "fp32"
GANG_SCHEDULER: GangScheduler = "none"
GPU_REQUEST: GpuRequest = "device-plugin"
GPU_REQUEST_CHOICE: GpuRequestChoice = "auto"
RDMA: RdmaChoice = "auto"
# Not given, each backend's plan decides (mpijob.perf.preflight's docstring says why):
# warn on Kubernetes, where the GPUs and links are a scheduler's pick: a few seconds per job
# buy a named slow node or bad GPU in `get`; fail only where asked, since the model's
# expectation may be off on a cluster never calibrated. On this machine (local backend)
# warn for GPU jobs (the NVML checks), off for CPU ones: nothing there to judge the figures
# against, and seconds added to every short run.
PREFLIGHT_KUBERNETES: PreflightMode = "warn"
PREFLIGHT_LOCAL_GPU: PreflightMode = "warn"
PREFLIGHT_LOCAL_CPU: PreflightMode = "off"

NAMESPACE = "default"
WORKERS = 1
GPUS_PER_WORKER = 0
LAUNCHER_CPU = "1"
LAUNCHER_MEMORY = "1Gi"

# NCCL moves data between ranks of one pod through /dev/shm; Docker's 64Mi default makes
# multi-GPU pods fail with "unhandled system error". 4Gi covers 8 ranks (NCCL docs).
SHM_SIZE = "4Gi"
IMAGE = "horovod/horovod:0.28.1"

# The built-in benchmark (tf_cnn_benchmarks' own defaults, but 100 timed batches).
MODEL = "resnet50"
BATCH_SIZE = 64
NUM_BATCHES = 100
NUM_WARMUP_BATCHES = 10
# The quick benchmark: what a bare `submit mpi` runs on this machine's CPU when no size was
# given (ResNet50 at 224 px and batch 64 would hold every core for a quarter of an hour).
QUICK_IMAGE_SIZE = 64
QUICK_BATCH_SIZE = 8
QUICK_NUM_BATCHES = 10
QUICK_NUM_WARMUP_BATCHES = 2
# The benchmark's input: synthetic images, or ImageNet TFRecords (tf_cnn_benchmarks'
# --data_name), so a run can also measure the input pipeline.
DataName = Literal["synthetic", "imagenet"]
DATA_NAMES = get_args(DataName)
DATA_NAME: DataName = "synthetic"

# Seconds for every worker to be scheduled before a job without a gang scheduler is
# rolled back.
SCHEDULE_TIMEOUT_SECONDS = 120.0

# --start-timeout: a job whose pods are not all running this long after creation fails,
# naming the pod and why (image pull, config error, crash loop, unschedulable).
START_TIMEOUT_SECONDS = 600
