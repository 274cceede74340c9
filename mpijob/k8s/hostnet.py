"""`--host-network`: which interfaces MPI and NCCL use when the user names none (the sshd
port two jobs on one node must not share is the plan's decision: mpijob.jobspec.ssh_port).

On the host network every interface of the node is visible, including ones
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

OMPI_TCP_EXCLUDE = ("lo,docker0,kube-ipvs0,cni0,flannel.1,cilium_host,cilium_net,"
                    "cilium_vxlan,vxlan.calico,tunl0,weave,virbr0")
NCCL_SOCKET_IFNAME_DEFAULT = "^lo,docker,kube-ipvs,cni,flannel,cali,cilium,vxlan,tunl,veth,lxc,weave,virbr"

