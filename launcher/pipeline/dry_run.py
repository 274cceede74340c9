"""A client dry run on a configured cluster: the same reads as submit, no writes.

kubectl's `--dry-run=client` sends nothing; hvdk8s's plans on the cluster, so its client
dry run reads what submit reads (snapshot, claims, quotas, CRDs, admission by server-side
dry run where RBAC allows it) and only leaves out the creates. When the configured cluster
cannot be reached, the dry run is offline and says so: it then shows what the job would
be with no snapshot, which is not what submit would create.
"""

from __future__ import annotations

from launcher.backends import select
from launcher.errors import UserError


def live_or_offline(backend, said: list[str]) -> tuple[object, list[str]]:
    """The live backend when its API server answers (one discovery read), else the offline
    one with a note that says why."""
    try:
        backend.reachable()
    except UserError as exc:
        return select.offline_backend(), [
            f"note: offline dry run: {exc}; nothing was read from the cluster, so the plan, "
            "claims, quotas and CRDs are unchecked and the objects below are not what submit "
            "would create"]
    return backend, said
