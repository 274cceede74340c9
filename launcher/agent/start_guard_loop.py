"""The start guard's loop (the hvdk8s-start-guard Deployment): each step sweeps every node's
hvdk8s pods (start_guard.sweep_node) for jobs past their start timeout, and takes what
`hvdk8s tidy` would for the others, logging each job failed, each step taken and each job
the API would not let it read or write, so one refused job (a kind the role lacks) does
not stop the others'."""

from __future__ import annotations

import logging

from launcher.backends.kubernetes.start_guard import sweep_node

log = logging.getLogger("hvdk8s.start-guard")


class StartGuard:
    node = "(every node)"  # what node_agent.run names in its log lines

    def __init__(self, client):
        self._client = client

    def step(self) -> bool:
        """One sweep; False: it never patches a Node annotation (node_agent.run's question)."""
        refused: list[str] = []
        tidied: list[str] = []
        for job in sweep_node(self._client, None, errors=refused, tidied=tidied):
            log.info("job %s missed its start timeout: failed, pods released", job)
        for done in tidied:
            log.info("job %s", done)
        for why in refused:
            log.warning("start-timeout sweep: %s", why)
        return False
