"""`--host-network`: what two jobs sharing a node must not share, and which interfaces MPI
and NCCL use when the user names none.

sshd port. On the host network a worker's containerPort is a port of the node itself (the
API server defaults hostPort to it), so a fixed port lets only one job per node start: the
scheduler's NodePorts filter refuses the second job's worker. Each job gets its own port,
derived from its namespace/name (stable across re-renders and dry runs) in a range clear of
the well-known ports, the NodePort range (30000-32767) and Linux's ephemeral ports
(32768-60999), and moved on to the next free one when the cluster snapshot shows it taken
on the job's nodes.

Interfaces. On the host network every interface of the node is visible, including ones
that carry the same address on every node (docker0, kube-ipvs0 with all Service IPs) or
only the pod overlay (cni0, flannel.1, cali*, cilium_*, vxlan.calico, tunl0). OpenMPI's TCP
paths try every interface not excluded, and a same-address interface makes it connect to
itself and hang; NCCL by default excludes only lo and docker*. Without --network-interface
we exclude those interfaces, which leaves the node's own NICs (the ones its InternalIP and
any RDMA fabric are on):
- OpenMPI `btl_tcp_if_exclude`/`oob_tcp_if_exclude` take exact names or CIDRs, and setting
  them replaces the default that excludes loopback, so lo is named (Horovod docs/mpi.rst:
  `-mca btl_tcp_if_exclude lo,docker0`); names a node lacks are ignored.
- NCCL_SOCKET_IFNAME with a leading `^` excludes interfaces *starting with* each prefix
  (NCCL user guide, Environment Variables, NCCL_SOCKET_IFNAME).
"""

from __future__ import annotations

import hashlib

HOST_SSH_PORTS = range(20000, 30000)
OMPI_TCP_EXCLUDE = ("lo,docker0,kube-ipvs0,cni0,flannel.1,cilium_host,cilium_net,"
                    "cilium_vxlan,vxlan.calico,tunl0,weave,virbr0")
NCCL_SOCKET_IFNAME_DEFAULT = "^lo,docker,kube-ipvs,cni,flannel,cali,cilium,vxlan,tunl,veth,lxc,weave,virbr"


def derived_ssh_port(namespace: str, name: str) -> int:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return HOST_SSH_PORTS.start + int.from_bytes(digest[:4], "big") % len(HOST_SSH_PORTS)


def free_ssh_port(namespace: str, name: str, taken) -> int:
    """The job's derived port, or the next one in the range no pod on its nodes uses."""
    start = derived_ssh_port(namespace, name) - HOST_SSH_PORTS.start
    for step in range(len(HOST_SSH_PORTS)):
        port = HOST_SSH_PORTS.start + (start + step) % len(HOST_SSH_PORTS)
        if port not in taken:
            return port
    raise ValueError(f"every port of {HOST_SSH_PORTS.start}-{HOST_SSH_PORTS.stop - 1} is in "
                     "use on the job's nodes")
