"""Which CLI option sets which JobSpec field, so errors name what the user typed.

Shared by the submit pipeline, `plan` and the local backend's ignored-option notes.
"""

from __future__ import annotations

from launcher.errors import UsageError
from mpijob.errors import SpecError

# Spec field -> the option that sets it, so errors name what the user typed.
OPTION_OF_FIELD = {
    "name": "--name", "namespace": "-n/--namespace", "image": "--image",
    "workers": "--workers", "gpus_per_worker": "--gpus", "cpu": "--cpu", "memory": "--memory",
    "env": "-e/--env", "command": "COMMAND", "mpi_implementation": "--mpi",
    "run_policy.clean_pod_policy": "--clean-pod-policy",
    "run_policy.backoff_limit": "--backoff-limit",
    "run_policy.ttl_seconds_after_finished": "--ttl",
    "run_policy.active_deadline_seconds": "--active-deadline",
    "gang": "--gang-scheduler", "queue": "--queue", "priority_class": "--priority",
    "node_selector": "--selector", "tolerations": "--toleration", "labels": "--label",
    "annotations": "--annotation", "image_pull_secrets": "--image-pull-secret",
    "image_pull_policy": "--image-pull-policy", "shm_size": "--shm-size",
    "network_interface": "--network-interface", "launcher_cpu": "--launcher-cpu",
    "launcher_memory": "--launcher-memory", "placement_policy": "--placement",
    "benchmark.model": "--model", "benchmark.batch_size": "--batch-size",
    "benchmark.num_batches": "--num-batches",
    "benchmark.num_warmup_batches": "--num-warmup-batches",
    "benchmark.image_size": "--image-size", "scheduler_name": "--scheduler-name",
}


def spec_error_to_usage(err: SpecError) -> UsageError:
    option = OPTION_OF_FIELD.get(err.field) or OPTION_OF_FIELD.get(err.field.split(".")[0])
    return UsageError(f"{option or err.field}: {err.message}")
