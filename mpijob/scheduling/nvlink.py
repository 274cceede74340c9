"""NVLink partitions that span nodes: the tier between a node's GPUs and the network.

On NVIDIA's rack-scale systems (GB200 NVL72, GB300 NVL72: 18 compute trays of 4 GPUs each,
one Kubernetes node per tray) NVLink switches join the trays' GPUs into one NVLink domain,
which the fabric manager may cut into partitions. GPUs of one partition reach each other
over NVLink across nodes; two partitions only meet on the network. Elsewhere (HGX/DGX
8-GPU boards, PCIe servers) NVLink ends at the node.

Where a node's partition comes from (the first that is set wins):
- a cluster file's `nvlinkDomain:` per node (launcher.formats.clusterfile);
- GPU Feature Discovery's node label `nvidia.com/gpu.clique`, `<cluster UUID>.<clique id>`:
  the NVLink fabric's cluster UUID and the partition's clique id, as NVML reports them
  (NVIDIA k8s-dra-driver-gpu docs/install.md, "Validate clique node labels": every
  MNNVL-capable node carries it, e.g. `a1b2c3d4-e5f6-7890-abcd-ef1234567890.0`);
- a `cliqueID` device attribute in the node's DRA ResourceSlices, where a driver publishes
  one (mpijob.scheduling.dra_slices). NVIDIA's DRA driver (k8s-dra-driver-gpu at 2240711,
  cmd/compute-domain-kubelet-plugin/deviceinfo.go) publishes its channel and daemon
  devices with `type` and `id` only and keeps the clique id to itself (CLIQUE_ID of its
  IMEX daemon), so on today's clusters the label is what gives it.
Pure.
"""

from __future__ import annotations

import re

CLIQUE_LABEL = "nvidia.com/gpu.clique"
# A DRA device attribute naming the clique, read where a driver publishes it.
CLIQUE_ATTRIBUTE = "cliqueID"
# A label value (at most 63 characters of [A-Za-z0-9._-]); the clique id after the last dot.
_CLIQUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def parse_clique(value: str) -> str:
    """The partition key of a `<cluster UUID>.<clique id>` value; ValueError saying why not."""
    text = str(value).strip()
    uuid, dot, clique = text.rpartition(".")
    if not _CLIQUE.match(text) or not dot or not uuid or not clique:
        raise ValueError(f"{value!r} is not an NVLink clique: expected <cluster UUID>.<clique id> "
                         "as GPU Feature Discovery's nvidia.com/gpu.clique label has it "
                         "(e.g. a1b2c3d4-e5f6-7890-abcd-ef1234567890.0)")
    return text


def clique_from_labels(labels: dict[str, str]) -> str | None:
    """The node's partition from its GFD label; None without one. A value that is not a
    clique raises ValueError (a broken label is not silently read as 'no NVLink')."""
    value = labels.get(CLIQUE_LABEL)
    return parse_clique(value) if value else None


def short(domain: str | None) -> str:
    """`<first 8 of the UUID>….<clique>` for tables; '-' without one."""
    if not domain:
        return "-"
    uuid, _, clique = domain.rpartition(".")
    return f"{uuid[:8]}.{clique}" if len(uuid) > 8 else domain
