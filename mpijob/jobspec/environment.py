"""The environment every rank of a job gets, besides the user's -e.

NCCL's settings for the RDMA devices a worker pod gets (NCCL's docs, "Environment
Variables"): NCCL_IB_HCA the devices (a prefix list: "mlx5" is every mlx5_* device); on
RoCE the RoCE v2 GID (NCCL_IB_GID_INDEX) and the bootstrap sockets on the pod's own
interface (NCCL_SOCKET_IFNAME), which has the route to the other pods.
"""

from __future__ import annotations

from collections.abc import Sequence

# Set in every job unless the user sets them: TensorFlow's C++ INFO lines (the oneDNN notice,
# the CPU feature guard) would open every rank's log; level 1 keeps warnings and errors
# (checked with TF 2.15: 0 prints the banners, 1 hides them).
DEFAULT_JOB_ENV = {"TF_CPP_MIN_LOG_LEVEL": "1"}
# NCCL's RoCE v2 GID: index 3 on a ConnectX port with its default IPv4 GIDs (0/1: RoCE v1/v2
# of the link-local IPv6, 2/3: v1/v2 of the IPv4 address); NCCL's docs, NCCL_IB_GID_INDEX.
ROCE_V2_GID_INDEX = "3"
# The pod network's interface in the container: NCCL's bootstrap stays on it.
POD_INTERFACE = "eth0"
# NCCL_IB_HCA is a list of prefixes (NCCL's docs): every mlx5_* device the pod was given.
DEFAULT_HCA_PREFIX = "mlx5"


def nccl_env(link: str | None, hcas: Sequence[str], *, pod_network: bool) -> dict[str, str]:
    env = {"NCCL_IB_HCA": ",".join(hcas) if hcas else DEFAULT_HCA_PREFIX}
    if link == "roce":
        env["NCCL_IB_GID_INDEX"] = ROCE_V2_GID_INDEX
        if pod_network:
            env["NCCL_SOCKET_IFNAME"] = POD_INTERFACE
    return env
