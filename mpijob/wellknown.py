"""Names other components define, which hvdk8s reads and writes: one name each.

- `GPU_RESOURCE`: the extended resource NVIDIA's device plugin advertises and pods request
  (k8s-device-plugin, `nvidia.com/gpu`).
- `GPU_PRODUCT_LABEL`: GPU Feature Discovery's node label for the GPU model
  (gpu-feature-discovery, `nvidia.com/gpu.product`, e.g. `Tesla-V100-SXM2-16GB`).
- `GPU_COUNT_LABEL`: GPU Feature Discovery's node label for the number of GPUs.
"""

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# The MPI Operator labels the pods it makes with their MPIJob (pkg/controller/mpi_job_controller.go).
OPERATOR_JOB_LABEL = "training.kubeflow.org/job-name"
# Kubeflow Trainer's API group, and the replicated jobs of its MPI runtimes (pkg/constants/
# constants.go: the `node` job, the `launcher` job; the MPI plugin's container names).
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_NODE, TRAINER_LAUNCHER = "node", "launcher"
# Where the MPI Operator (MPIJob) and Trainer's MPI plugin (MPIHostfileDir/MPIHostfileName)
# both mount the hostfile they write.
MPI_HOSTFILE = "/etc/mpi/hostfile"
# The Job controller's index of an Indexed Job's pod (an elastic job's workers, a JobSet's).
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
