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
# The taint the node lifecycle controller puts on a cordoned node (spec.unschedulable).
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# The MPI Operator labels the pods it makes with their MPIJob (pkg/controller/mpi_job_controller.go).
OPERATOR_JOB_LABEL = "training.kubeflow.org/job-name"
# Kubeflow Trainer's API group, and the replicated jobs of its MPI runtimes (pkg/constants/
# constants.go: the `node` job, the `launcher` job; the MPI plugin's container names).
TRAINER_GROUP = "trainer.kubeflow.org"
# Where Trainer's manifests install its controller and its config (manifests/base:
# kubeflow-system, the ConfigMap kubeflow-trainer-config).
TRAINER_OPERATOR_NAMESPACE = "kubeflow-system"
TRAINER_NODE, TRAINER_LAUNCHER = "node", "launcher"
# The Prometheus Operator's scrape configuration of pods (prometheus-operator
# pkg/apis/monitoring/v1/podmonitor_types.go).
POD_MONITOR_API_VERSION = "monitoring.coreos.com/v1"
POD_MONITOR_KIND = "PodMonitor"
# Where the MPI Operator (MPIJob) and Trainer's MPI plugin (MPIHostfileDir/MPIHostfileName)
# both mount the hostfile they write.
MPI_HOSTFILE = "/etc/mpi/hostfile"
# The Job controller's index of an Indexed Job's pod (an elastic job's workers, a JobSet's).
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
# Multus secondary networks (`--network NAD[,NAD]`). Multus attaches the networks a pod's
# `networks` annotation names, a comma-separated list of `[namespace/]name`
# (github.com/k8snetworkplumbingwg/multi-net-spec, "Network Attachment Selection
# Annotation"). A NetworkAttachmentDefinition whose `resourceName` annotation names a device
# resource (an SR-IOV VF pool, an RDMA shared device) gives the pod an interface from it only
# if the pod requests one unit of that resource per listed network; the SR-IOV network
# resources injector exists to add that request (github.com/k8snetworkplumbingwg/
# network-resources-injector). hvdk8s adds it itself (mpijob.k8s.workload), from the resource
# the Kubernetes backend's preflight read from each NAD, so the pods are right on clusters
# without the injector. Launcher pods join no network: they only run mpirun.
MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
MULTUS_RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
