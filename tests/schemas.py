"""Validation of rendered objects: official Kubernetes schemas and the MPIJob CRD."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

K8S_VERSION = "1.33.0"
# resource.k8s.io/v1 (DRA claims) is GA from 1.34: what renders claims validates against it.
K8S_VERSION_DRA = "1.34.0"
# The shared reference beside the checkout when present, else the copy vendored in tests/data.
CRD = Path(__file__).resolve().parents[2] / "shared/reference/mpi-operator/kubeflow.org_mpijobs.yaml"
VENDORED_CRD = Path(__file__).resolve().parent / "data/mpi-operator/kubeflow.org_mpijobs.yaml"
CORE_KINDS = {"Job", "Pod", "ConfigMap", "Secret", "Service", "ServiceAccount", "DaemonSet",
              "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def crd_path() -> Path:
    for candidate in (CRD, VENDORED_CRD):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("the MPIJob CRD (shared/reference/mpi-operator) is not beside the repo")


@lru_cache
def mpijob_schema() -> dict:
    crd = yaml.safe_load(crd_path().read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2beta1"]
    return version["schema"]["openAPIV3Schema"]


def validate_core(obj: dict, version: str = K8S_VERSION) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(obj, version, strict=True)


def unknown_fields(obj, schema: dict, path: str = "") -> list[str]:
    """Fields the API server would silently prune: a typo is otherwise invisible."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            if props is not None and key in props:
                out += unknown_fields(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += unknown_fields(value, extra, f"{path}.{key}")
            elif props is not None and path != ".metadata" and not path.endswith(".metadata"):
                out.append(f"{path}.{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, item in enumerate(obj):
            out += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


def validate_mpijob(obj: dict) -> None:
    import jsonschema

    schema = mpijob_schema()
    jsonschema.validate(obj, schema)
    extra = unknown_fields(obj, schema)
    assert not extra, f"fields unknown to the MPIJob CRD: {extra}"


def validate_object(obj: dict) -> None:
    if obj["kind"] == "MPIJob":
        validate_mpijob(obj)
    elif obj["kind"] in CORE_KINDS:
        validate_core(obj)


# Kubeflow Trainer's CRDs at v2.3.0 (manifests/base/crds), vendored with its LICENSE.
TRAINER_CRDS = Path(__file__).resolve().parent / "data/trainer"
TRAINER_VERSION = "v2.3.0"


@lru_cache
def trainer_schema(kind: str) -> dict:
    plural = {"TrainJob": "trainjobs", "ClusterTrainingRuntime": "clustertrainingruntimes"}[kind]
    text = (TRAINER_CRDS / f"trainer.kubeflow.org_{plural}.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def validate_trainer(obj: dict) -> None:
    """A TrainJob or ClusterTrainingRuntime against Trainer's published schema: types,
    required fields and enums, and no field the API server would prune."""
    import jsonschema

    schema = trainer_schema(obj["kind"])
    jsonschema.validate(obj, schema)
    extra = unknown_fields(obj, schema)
    assert not extra, f"fields unknown to the {obj['kind']} CRD: {extra}"
