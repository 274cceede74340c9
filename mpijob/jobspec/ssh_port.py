"""The sshd port of a `--host-network` job: one per job, so two jobs can share a node.

On the host network a worker's containerPort is a port of the node itself (the API server
defaults hostPort to it), so a fixed port lets only one job per node start: the
scheduler's NodePorts filter refuses the second job's worker. Each job gets its own port,
derived from its namespace/name (stable across re-renders and dry runs) in a range clear of
the well-known ports, the NodePort range (30000-32767) and Linux's ephemeral ports
(32768-60999), and moved on to the next free one when the cluster snapshot shows it taken
on the job's nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container

HOST_SSH_PORTS = range(20000, 30000)


def derived_ssh_port(namespace: str, name: str) -> int:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return HOST_SSH_PORTS.start + int.from_bytes(digest[:4], "big") % len(HOST_SSH_PORTS)


def free_ssh_port(namespace: str, name: str, taken: Container[int]) -> int:
    """The job's derived port, or the next one in the range no pod on its nodes uses."""
    start = derived_ssh_port(namespace, name) - HOST_SSH_PORTS.start
    for step in range(len(HOST_SSH_PORTS)):
        port = HOST_SSH_PORTS.start + (start + step) % len(HOST_SSH_PORTS)
        if port not in taken:
            return port
    raise ValueError(f"every port of {HOST_SSH_PORTS.start}-{HOST_SSH_PORTS.stop - 1} is in "
                     "use on the job's nodes")
