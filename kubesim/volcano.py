"""Volcano's PodGroup enqueue and its pod admission webhook, as hvdk8s meets them.

From github.com/volcano-sh/volcano:
- pkg/webhooks/admission/pods/validate/admit_pod.go validatePod: a pod for the `volcano`
  scheduler that names a PodGroup (annotation scheduling.k8s.io/group-name) is refused
  when that PodGroup does not exist ("failed to get PodGroup for pod <ns/name>: ...");
  before v1.6 (commit 4d184b0c removed checkPGPhase) it was also refused while the PodGroup
  is Pending ("failed to create pod <ns/name> as the podgroup phase is Pending").
- The enqueue action moves a new PodGroup from Pending to Inqueue when the job is
  enqueueable; the overcommit plugin (pkg/scheduler/plugins/overcommit) admits a job whose
  spec.minResources fit the cluster's idle resources times overCommitFactor (1.2 by
  default), and always admits a PodGroup without minResources. A PodGroup whose
  minResources do not fit stays Pending.
"""

from __future__ import annotations

from decimal import Decimal

from . import errors
from .podutil import is_terminal, pod_requests
from .quantity import parse_quantity
from .util import dig

PODGROUP_KEY = "scheduling.volcano.sh/podgroups"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
OVERCOMMIT_FACTOR = Decimal("1.2")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.lstrip("v").split(".")[:2])


class VolcanoWebhook:
    def __init__(self, version: str = "v1.10.0"):
        self.version = version

    def __call__(self, rt, obj: dict, store) -> None:
        if rt.key != "/pods" or (obj.get("spec") or {}).get("schedulerName") != "volcano":
            return
        group = (obj["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
        if not group:
            return
        ns, name = obj["metadata"]["namespace"], obj["metadata"].get("name")
        pg = store.get(PODGROUP_KEY, ns, group)
        if pg is None:
            raise errors.ApiError(400, "BadRequest", "admission webhook "
                                  "\"validatepod.volcano.sh\" denied the request: failed to get "
                                  f"PodGroup for pod <{ns}/{name}>: podgroups.scheduling."
                                  f"volcano.sh \"{group}\" not found")
        if _version_tuple(self.version) < (1, 6) and dig(pg, "status.phase") == "Pending":
            raise errors.ApiError(400, "BadRequest", "admission webhook "
                                  "\"validatepod.volcano.sh\" denied the request: failed to "
                                  f"create pod <{ns}/{name}> as the podgroup phase is Pending")


def idle(nodes: list[dict], pods: list[dict]) -> dict[str, Decimal]:
    """Allocatable minus the requests of bound, non-terminal pods, summed over Ready nodes."""
    out: dict[str, Decimal] = {}
    for n in nodes:
        for k, v in ((n.get("status") or {}).get("allocatable") or {}).items():
            try:
                out[k] = out.get(k, Decimal(0)) + parse_quantity(v)
            except ValueError:
                continue
    for p in pods:
        if p["spec"].get("nodeName") and not is_terminal(p):
            for k, v in pod_requests(p).items():
                out[k] = out.get(k, Decimal(0)) - v
    return out


def enqueue_phase(pg: dict, nodes: list[dict], pods: list[dict]) -> str:
    """Inqueue when the overcommit plugin would admit the PodGroup, else Pending."""
    wanted = (pg.get("spec") or {}).get("minResources")
    if not wanted:
        return "Inqueue"
    free = idle(nodes, pods)
    for k, v in wanted.items():
        if parse_quantity(v) > free.get(k, Decimal(0)) * OVERCOMMIT_FACTOR:
            return "Pending"
    return "Inqueue"
