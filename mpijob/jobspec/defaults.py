"""Every default and every choice list of a job's options, written once.

The spec model (`mpijob.jobspec.spec`), the experiment matrix, the submit pipeline and the
CLI (`launcher/cli/job_options.py`) all take them from here. Only `typing`: the CLI builds
its options from it without loading pydantic.
"""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["pods", "operator"]
MPIImplementation = Literal["OpenMPI", "Intel", "MPICH"]
CleanPodPolicy = Literal["Running", "All", "None"]
PlacementPolicy = Literal["topology", "binpack", "spread"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
Precision = Literal["fp32", "fp16"]
# The same choices as tuples, for the CLI's checks and messages.
MODES, MPI_IMPLEMENTATIONS, CLEAN_POD_POLICIES, PLACEMENT_POLICIES, PULL_POLICIES, PRECISIONS = (
    get_args(choice) for choice in (Mode, MPIImplementation, CleanPodPolicy, PlacementPolicy,
                                    PullPolicy, Precision))

MODE: Mode = "pods"
MPI_IMPLEMENTATION: MPIImplementation = "OpenMPI"
CLEAN_POD_POLICY: CleanPodPolicy = "Running"
PLACEMENT_POLICY: PlacementPolicy = "topology"
PULL_POLICY: PullPolicy = "IfNotPresent"
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
