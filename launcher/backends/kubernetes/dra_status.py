"""`get` for DRA jobs: the devices each worker pod's ResourceClaim was allocated (from the
claim's `status.allocation.devices.results`), beside the GPUs hvdk8s planned for it."""

from __future__ import annotations


def claim_names(pod: dict) -> list[str]:
    """The ResourceClaims a pod uses: named directly, or made from its templates (the
    controller records those in `status.resourceClaimStatuses`)."""
    out = [r["resourceClaimName"] for r in (pod.get("spec") or {}).get("resourceClaims") or []
           if r.get("resourceClaimName")]
    out += [s["resourceClaimName"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            if s.get("resourceClaimName")]
    return out


def allocated_devices(pods: list[dict], claims: list[dict]) -> dict[str, list[str]]:
    """{pod name: sorted device names its claims were allocated}, for pods with claims."""
    by_name = {(c.get("metadata") or {}).get("name"): c for c in claims}
    out: dict[str, list[str]] = {}
    for pod in pods:
        names = claim_names(pod)
        if not names:
            continue
        devices = []
        for n in names:
            results = ((((by_name.get(n) or {}).get("status") or {}).get("allocation") or {})
                       .get("devices") or {}).get("results") or []
            devices += [r.get("device") for r in results if r.get("device")]
        out[pod["metadata"]["name"]] = sorted(devices, key=_natural)
    return out


def _natural(name: str):
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1)


def add_to_placement(placement: list[dict], allocated: dict[str, list[str]]) -> None:
    for row in placement:
        if row.get("pod") in allocated:
            row["allocated_devices"] = allocated[row["pod"]]
