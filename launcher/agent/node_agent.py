"""The topology agent: keeps its node's `hvdk8s.io/gpu-topology` annotation current.

Every interval it reads the GPU topology through NVML and the pods' GPUs through the
kubelet's PodResources API, and merge-patches the annotation onto its own Node, but only
when something other than the `updated` time changed: each patch is a Node update that
every node watcher in the cluster (scheduler, controllers) receives. What was last
written is remembered, and read back from the Node at start, after a failure, and every
`resync_every` steps (so a hand-edited or deleted annotation comes back). Errors are
retried with exponential backoff and jitter; NVML missing altogether is fatal.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from launcher.agent.podresources import PodResources, gpu_allocations
from launcher.backends.kubernetes.client import NODE, RetryPolicy, connect
from launcher.errors import UserError
from launcher.hardware.nvml_topology import GpuInventory, NvmlUnavailable
from launcher.timestamps import format_utc
from mpijob.k8s.agent_manifests import AGENT_NAME, DEFAULT_INTERVAL_SECONDS
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, annotation_payload

log = logging.getLogger("hvdk8s.agent")

FIELD_MANAGER = AGENT_NAME  # the agent owns the annotation fields under its own name
DEFAULT_INTERVAL = DEFAULT_INTERVAL_SECONDS
DEFAULT_RESYNC_EVERY = 10
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 300.0
ONCE_ATTEMPTS = 5


def rfc3339(moment: datetime) -> str:
    return format_utc(moment)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def annotation_content(text: str | None) -> dict | None:
    """An annotation value without its `updated` time; None when absent or unreadable."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    data.pop("updated", None)
    return data


class TopologyAgent:
    def __init__(
        self,
        node: str,
        *,
        read_inventory: Callable[[], GpuInventory],
        list_pods: Callable[[], Iterable[PodResources]],
        get_annotation: Callable[[str], str | None],
        patch_annotation: Callable[[str, str], None],
        now: Callable[[], datetime] = utc_now,
        resync_every: int = DEFAULT_RESYNC_EVERY,
    ):
        self.node = node
        self._read_inventory = read_inventory
        self._list_pods = list_pods
        self._get_annotation = get_annotation
        self._patch_annotation = patch_annotation
        self._now = now
        self._resync_every = max(1, resync_every)
        self._written: dict | None = None
        self._steps_since_read = 0

    def payload(self) -> str:
        """The annotation value describing the node now."""
        inventory = self._read_inventory()
        allocated = gpu_allocations(
            self._list_pods(), uuids=inventory.uuids, mig_parents=inventory.mig_parents
        )
        return annotation_payload(
            node=self.node,
            topology=inventory.topology(),
            gpu_model=inventory.gpu_model,
            uuids=inventory.uuids,
            pcie_gen=inventory.pcie_gen,
            allocated=allocated,
            updated=rfc3339(self._now()),
        )

    def step(self) -> bool:
        """One observation; True when it patched the Node. (The start-timeout sweep is the
        hvdk8s-start-guard Deployment's: start_guard_loop.py.)"""
        payload = self.payload()
        content = annotation_content(payload)
        if self._written is None or self._steps_since_read >= self._resync_every:
            self._written = annotation_content(self._get_annotation(self.node))
            self._steps_since_read = 0
        self._steps_since_read += 1
        if content == self._written:
            return False
        self._written = None  # unknown until the patch is known to have landed
        self._patch_annotation(self.node, payload)
        self._written = content
        return True


def backoff_seconds(failures: int, *, fraction: float) -> float:
    """Exponential from 1 s, capped at 5 min, with ±20% jitter (`fraction` in [0, 1)) so
    that a fleet of agents does not retry in lockstep after an API server outage."""
    base = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** (failures - 1))
    return base * (0.8 + 0.4 * fraction)


def describe(exc: BaseException) -> str:
    """One line for a log or an error message."""
    status = getattr(exc, "status", None)
    if status is not None and hasattr(exc, "reason"):  # kubernetes ApiException
        return f"Kubernetes API answered {status} {exc.reason}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run(
    agent: TopologyAgent,
    *,
    interval: float = DEFAULT_INTERVAL,
    once: bool = False,
    attempts: int = ONCE_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    fraction: Callable[[], float] = random.random,
) -> None:
    """Step forever (or until one success with `once`), retrying failures with backoff.
    With `once`, gives up with a UserError after `attempts` failures."""
    failures = 0
    while True:
        try:
            changed = agent.step()
        except NvmlUnavailable:
            raise
        except Exception as exc:  # every error is worth another try: log, back off
            failures += 1
            if once and failures >= attempts:
                raise UserError(
                    f"agent: giving up on node {agent.node} after {failures} attempts: {describe(exc)}"
                ) from exc
            delay = backoff_seconds(failures, fraction=fraction())
            log.warning("node %s: %s; retrying in %.1fs", agent.node, describe(exc), delay)
            sleep(delay)
            continue
        failures = 0
        if changed:
            log.info("node %s: annotation %s updated", agent.node, ANNOTATION_TOPOLOGY)
        else:
            log.debug("node %s: unchanged", agent.node)
        if once:
            return
        sleep(interval)


# --- the Kubernetes side (imported lazily: the core of the agent is testable without it) ---
def node_client():
    """The hvdk8s Kubernetes client: in the cluster the pod's service account, outside the
    current kubeconfig context. One try per request: the agent's loop does the backoff."""
    try:
        return connect(retry=RetryPolicy(tries=1))
    except UserError as exc:
        raise UserError(f"agent: no Kubernetes credentials (in-cluster or kubeconfig): {exc}") from None


class NodeAnnotation:
    """Reads and merge-patches one annotation of a Node."""

    def __init__(self, client, key: str = ANNOTATION_TOPOLOGY):
        self._client = client
        self.key = key

    def get(self, node: str) -> str | None:
        obj = self._client.get(NODE, node)
        if obj is None:
            raise UserError(f"agent: node {node!r} does not exist (is NODE_NAME right?)")
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(self.key)

    def patch(self, node: str, value: str) -> None:
        # A JSON merge patch touches only this key: the node's other annotations stay.
        self._client.patch(NODE, node, {"metadata": {"annotations": {self.key: value}}},
                           field_manager=FIELD_MANAGER)
