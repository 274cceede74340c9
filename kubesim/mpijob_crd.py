"""The MPIJob CRD's v2beta1 schema as the MPI Operator installs it, per operator version.

From kubeflow/mpi-operator manifests/base/kubeflow.org_mpijobs.yaml (controller-gen output of
pkg/apis/kubeflow/v2beta1/types.go): MPIJobSpec's and RunPolicy's properties, with their
defaults and enums. One simplification: the real CRD embeds the whole core/v1 PodTemplateSpec
schema (about 8,900 lines); here the template's `spec` preserves unknown fields, and pod
fields are checked when the operator creates the pods (admission, podsecurity.py).

`OLD` is a v2beta1 schema from before `launcherCreationPolicy` (added in v0.5.0), and
before `runLauncherAsWorker` and `runPolicy.managedBy`, which came later still.
"""

from __future__ import annotations

CURRENT = "0.8.2"
OLD = "0.4.0"

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}],
                  "x-kubernetes-int-or-string": True}


def _template() -> dict:
    return {"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {
            "annotations": _STRING_MAP, "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": _STRING_MAP, "name": {"type": "string"}, "namespace": {"type": "string"}}},
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def mpijob_schema(version: str = CURRENT) -> dict:
    run_policy = {
        "activeDeadlineSeconds": {"type": "integer", "format": "int64"},
        "backoffLimit": {"type": "integer", "format": "int32"},
        "cleanPodPolicy": {"type": "string"},
        "managedBy": {"type": "string"},
        "schedulingPolicy": {"type": "object", "properties": {
            "minAvailable": {"type": "integer", "format": "int32"},
            "minResources": {"type": "object", "additionalProperties": _INT_OR_STRING},
            "priorityClass": {"type": "string"}, "queue": {"type": "string"},
            "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"}}},
        "suspend": {"type": "boolean"},
        "ttlSecondsAfterFinished": {"type": "integer", "format": "int32"},
    }
    spec = {
        "launcherCreationPolicy": {"type": "string", "default": "AtStartup",
                                   "enum": ["AtStartup", "WaitForWorkersReady"]},
        "mpiImplementation": {"type": "string", "default": "OpenMPI",
                              "enum": ["OpenMPI", "Intel", "MPICH"]},
        "mpiReplicaSpecs": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {
                "replicas": {"type": "integer", "format": "int32"},
                "restartPolicy": {"type": "string"},
                "template": _template()}}},
        "runLauncherAsWorker": {"type": "boolean", "default": False},
        "runPolicy": {"type": "object", "properties": run_policy},
        "slotsPerWorker": {"type": "integer", "format": "int32", "default": 1},
        "sshAuthMountPath": {"type": "string", "default": "/root/.ssh"},
    }
    if version == OLD:
        for key in ("launcherCreationPolicy", "runLauncherAsWorker"):
            del spec[key]
        del run_policy["managedBy"]
    elif version != CURRENT:
        raise ValueError(f"no MPIJob schema modelled for operator {version}")
    return {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["mpiReplicaSpecs"], "properties": spec},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
