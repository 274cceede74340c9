"""Names and labels of every object of a job, in one place.

Object names follow the Kubeflow MPI Operator's (`<job>-launcher`, `<job>-worker-<i>`,
`<job>-worker` service) so that users moving between modes find the same names.
"""

from __future__ import annotations

GROUP = "hvdk8s.io"
LABEL_JOB = f"{GROUP}/job-name"
LABEL_ROLE = f"{GROUP}/role"
LABEL_INDEX = f"{GROUP}/replica-index"
LABEL_MODE = f"{GROUP}/mode"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "hvdk8s"
ANNOTATION_PLACEMENT = f"{GROUP}/placement"
ANNOTATION_PREDICTION = f"{GROUP}/prediction"
ANNOTATION_SPEC = f"{GROUP}/spec"
ANNOTATION_GPUS = f"{GROUP}/gpus"
ROLE_LAUNCHER = "launcher"
ROLE_WORKER = "worker"
# The start gate (mpijob.k8s.start_gate) and its pod: not the job's own label, so that
# status, list and the agent never count them as a launcher or a worker.
LABEL_START_GATE = f"{GROUP}/start-gate-of"

# The Job controller names the launcher pod `<job>-launcher-<5 chars>`.
_LAUNCHER_POD_SUFFIX = len("-launcher-") + 5


def launcher(job: str) -> str:
    return f"{job}-launcher"


def worker(job: str, index: int) -> str:
    return f"{job}-worker-{index}"


def service(job: str) -> str:
    return f"{job}-worker"


def config(job: str) -> str:
    return f"{job}-config"


def metrics(job: str) -> str:
    """The PodMonitor of --metrics-port."""
    return f"{job}-metrics"


def operator_benchmark(job: str) -> str:
    """Operator mode's benchmark ConfigMap: `<job>-config` is the operator's own (its
    hostfile), and it refuses to run a job whose `<job>-config` it does not control."""
    return f"{job}-benchmark"


def start_gate(job: str) -> str:
    return f"{job}-start-gate"


def ssh_secret(job: str) -> str:
    return f"{job}-ssh"


def pod_group(job: str) -> str:
    return job


def longest_suffix(workers: int) -> int:
    """Characters every derived name may add to the job name."""
    return max(_LAUNCHER_POD_SUFFIX, len(worker("", max(workers - 1, 0))))


def longest_suffix_example(workers: int) -> str:
    worker_suffix = worker("", max(workers - 1, 0))
    return "-launcher-xxxxx" if _LAUNCHER_POD_SUFFIX >= len(worker_suffix) else worker_suffix


def job_labels(job: str) -> dict[str, str]:
    return {LABEL_JOB: job, LABEL_MANAGED_BY: MANAGED_BY}


def job_selector(job: str | None = None) -> str:
    """Label selector for the objects of one job, or of every hvdk8s job."""
    if job is None:
        return f"{LABEL_JOB},{LABEL_MANAGED_BY}={MANAGED_BY}"
    return f"{LABEL_JOB}={job}"
