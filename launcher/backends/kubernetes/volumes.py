"""Before creating a job with `--data`: each claim exists and its access modes allow the
job's placement (mpijob.jobspec.volumes.claim_refusal), so a job is never left Pending on
a claim that is missing or in ContainerCreating on a volume that never attaches."""

from __future__ import annotations

from launcher.backends.kubernetes.client import PVC, ApiError, KubeClient
from launcher.errors import UserError
from mpijob.jobspec.volumes import claim_refusal
from mpijob.k8s.workload import data_pod_nodes


def access_modes(claim: dict) -> list[str]:
    """A bound claim's modes are its volume's (status.accessModes); before binding, what
    it asks for (spec.accessModes)."""
    return list((claim.get("status") or {}).get("accessModes")
                or (claim.get("spec") or {}).get("accessModes") or [])


def check_claims(client: KubeClient, spec, placement, mode: str) -> None:
    if not spec.data:
        return
    nodes, pinned = data_pod_nodes(spec, placement, mode)
    for volume in spec.data:
        try:
            claim = client.get(PVC, volume.claim, spec.namespace)
        except ApiError as exc:
            if exc.status == 403:
                raise UserError(f"--data {volume.claim}: cannot read PersistentVolumeClaim "
                                f"{volume.claim} in namespace {spec.namespace} (RBAC: get "
                                "persistentvolumeclaims), so its access modes cannot be "
                                "checked; ask your cluster admin for read access") from None
            raise
        if claim is None:
            raise UserError(f"--data {volume.claim}: no PersistentVolumeClaim {volume.claim} in "
                            f"namespace {spec.namespace} (kubectl get pvc -n {spec.namespace})")
        if (claim.get("status") or {}).get("phase") == "Lost":
            raise UserError(f"--data {volume.claim}: claim {volume.claim} is Lost (its "
                            "PersistentVolume is gone)")
        why = claim_refusal(volume, access_modes(claim), nodes, pinned=pinned)
        if why:
            raise UserError(why)
