"""Kubeflow Trainer's controller config, read where the caller may: whether its
TrainJobStatus feature gate is on, and where its status server answers (doctor, and submit
for a TrainJob's launcher: mpijob.k8s.trainer_progress).

The config is the ConfigMap kubeflow-trainer-config in the controller's namespace
(v2.3.0 manifests/base/manager/kustomization.yaml; Helm `manager.config`), key
controller_manager_config.yaml: `featureGates` (TrainJobStatus, alpha, off by default:
pkg/features/features.go), `certManagement.webhookServiceName` and `statusServer.port`
(pkg/apis/config/v1alpha1/defaults.go). A `--feature-gates` flag on the controller's
command line overrides it (cmd/trainer-controller-manager/main.go) and is not read.
"""

from __future__ import annotations

import yaml

from launcher.backends.kubernetes.client import CONFIGMAP, ApiError
from mpijob.k8s.trainer_progress import StatusEndpoint, endpoint_from_config
from mpijob.wellknown import TRAINER_OPERATOR_NAMESPACE

TRAINER_CONFIG, CONFIG_KEY = "kubeflow-trainer-config", "controller_manager_config.yaml"
STATUS_GATE = "TrainJobStatus"
WHERE = f"configmap {TRAINER_OPERATOR_NAMESPACE}/{TRAINER_CONFIG}"


def read_config(client) -> tuple[dict | None, str | None]:
    """Trainer's config, or None and why it could not be read."""
    try:
        cm = client.get(CONFIGMAP, TRAINER_CONFIG, TRAINER_OPERATOR_NAMESPACE)
    except ApiError as exc:
        if exc.status == 403:
            return None, f"hvdk8s may not read Trainer's config ({WHERE})"
        return None, f"Trainer's config ({WHERE}) could not be read: {exc}"
    if cm is None:
        return None, f"no {WHERE} (Trainer installed under other names?)"
    try:
        config = yaml.safe_load((cm.get("data") or {}).get(CONFIG_KEY) or "")
    except yaml.YAMLError:
        config = None
    if not isinstance(config, dict):
        return None, f"Trainer's config ({WHERE}, key {CONFIG_KEY}) does not parse"
    return config, None


def gate_on(config: dict) -> bool:
    return bool((config.get("featureGates") or {}).get(STATUS_GATE))


def status_endpoint(client) -> tuple[StatusEndpoint | None, str | None]:
    """Where Trainer's status server answers, its gate on in the config; else None and why
    (a line for people)."""
    config, why = read_config(client)
    if config is None:
        return None, why
    if not gate_on(config):
        return None, f"its {STATUS_GATE} feature gate is off ({WHERE})"
    return endpoint_from_config(config, TRAINER_OPERATOR_NAMESPACE), None
