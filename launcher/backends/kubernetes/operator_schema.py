"""Does the installed MPI Operator know every field of the MPIJob hvdk8s renders?

An API server drops a custom resource's fields its CRD's schema does not declare (structural
pruning), so an MPI Operator older than the fields hvdk8s sets would run a different job
than the one shown: before v0.5.0 there is no `launcherCreationPolicy`, so the launcher is
created at once, not once the workers are Ready, which the gang sizing assumes. So before
creating anything the MPIJob is walked against the served `kubeflow.org/v2beta1` schema of
the CRD `mpijobs.kubeflow.org`, and a missing field refuses the job, naming the fields, the
operator version (its Deployment's image) and what to do. Where the CRD is not readable
(RBAC: CRDs are cluster-scoped), the create itself is the check: the MPIJob is sent with
`fieldValidation=Strict`, which makes an unknown field a 400 instead of a silent drop.
"""

from __future__ import annotations

from launcher.backends.kubernetes.client import ApiError, Kind
from launcher.backends.kubernetes.operator import DEPLOYMENT, OPERATOR_SELECTOR
from launcher.errors import UsageError
from launcher.output import note

CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions",
           namespaced=False)
MPIJOB_CRD = "mpijobs.kubeflow.org"
UPGRADE = ("upgrade the MPI Operator to v0.5.0 or later (github.com/kubeflow/mpi-operator "
           "releases), or use --mode pods, which needs no operator")


def undeclared(value, schema: dict | None, path: str) -> list[str]:
    """Fields of `value` that `schema` does not declare (what the API server would prune),
    as `spec.a.b` paths; a `[key]` for a map entry."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        if props is None and extra is None:
            return []
        for key, item in value.items():
            if props is not None and key in props:
                out += undeclared(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += undeclared(item, extra, f"{path}[{key}]")
            elif extra is not True:
                out.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            out += undeclared(item, schema["items"], f"{path}[]")
    return out


def operator_version(client) -> str | None:
    """The MPI Operator's image tag, where its Deployment is readable."""
    try:
        deps = client.items(DEPLOYMENT, all_namespaces=True, label_selector=OPERATOR_SELECTOR)
    except ApiError:
        return None
    for dep in deps:
        for c in (((dep.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "containers") or []:
            image = c.get("image") or ""
            if "mpi-operator" in image:
                return image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else image
    return None


def check(client, mpijob: dict) -> None:
    """Refuse (exit 2, one line, nothing created) an MPIJob with fields the served schema
    lacks."""
    version = mpijob["apiVersion"].rpartition("/")[2]
    try:
        crd = client.get(CRD, MPIJOB_CRD)
    except ApiError:
        note("note: the MPIJob CRD is not readable here; the MPIJob is created with "
             "fieldValidation=Strict, so a field the operator does not know is refused")
        return
    served = next((v for v in ((crd or {}).get("spec") or {}).get("versions") or []
                   if v.get("name") == version), None)
    if served is None:
        raise UsageError(f"the MPIJob CRD {MPIJOB_CRD} installed here does not serve {version} "
                        f"(an MPI Operator before v0.3.0); {UPGRADE} (nothing was created)")
    schema = ((served.get("schema") or {}).get("openAPIV3Schema") or {})
    spec_schema = (schema.get("properties") or {}).get("spec")
    missing = undeclared(mpijob.get("spec") or {}, spec_schema, "spec")
    if missing:
        found = operator_version(client)
        who = f"MPI Operator {found}" if found else "the MPI Operator installed here"
        raise UsageError(
            f"{who} does not know {', '.join(missing)} (its MPIJob CRD's {version} schema "
            f"lacks them, and the API server would drop them: launcherCreationPolicy came "
            f"with v0.5.0); {UPGRADE} (nothing was created)")
