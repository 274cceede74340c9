"""Every default and every choice list of a job's options, written once.

The spec model (`mpijob.jobspec.spec`), the experiment matrix, the submit pipeline and the
CLI (`launcher/cli/job_options.py`) all take them from here. Only `typing`: the CLI builds
its options from it without loading pydantic.
"""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["pods", "operator"]
MODES = get_args(Mode)
MODE: Mode = "pods"

MPIImplementation = Literal["OpenMPI", "Intel", "MPICH"]
MPI_IMPLEMENTATIONS = get_args(MPIImplementation)
MPI_IMPLEMENTATION: MPIImplementation = "OpenMPI"

CleanPodPolicy = Literal["Running", "All", "None"]
CLEAN_POD_POLICIES = get_args(CleanPodPolicy)
CLEAN_POD_POLICY: CleanPodPolicy = "Running"

PlacementPolicy = Literal["topology", "binpack", "spread"]
PLACEMENT_POLICIES = get_args(PlacementPolicy)
PLACEMENT_POLICY: PlacementPolicy = "topology"

PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PULL_POLICIES = get_args(PullPolicy)
PULL_POLICY: PullPolicy = "IfNotPresent"

Precision = Literal["fp32", "fp16"]
PRECISIONS = get_args(Precision)
PRECISION: Precision = "fp32"

# --gpu-request: auto picks DRA where the cluster's nodes publish DRA GPU devices.
GPU_REQUESTS = ("auto", "device-plugin", "dra")
GPU_REQUEST = "auto"

# --dry-run[=client|server]; "none" is kubectl's spelling of no dry run.
DRY_RUNS = ("client", "server", "none")

NAMESPACE = "default"
WORKERS = 1
GPUS_PER_WORKER = 0
LAUNCHER_CPU = "1"
LAUNCHER_MEMORY = "1Gi"

# The built-in benchmark (tf_cnn_benchmarks' own defaults, but 100 timed batches).
MODEL = "resnet50"
BATCH_SIZE = 64
NUM_BATCHES = 100
NUM_WARMUP_BATCHES = 10

# Seconds for every worker to be scheduled before a job without a gang scheduler is
# rolled back.
SCHEDULE_TIMEOUT_SECONDS = 120.0
