"""Which network a planned job's NCCL traffic takes, RDMA or the pod network's TCP, and the
prediction on that network: the model prices RDMA only when the workers request it.

Shared by `plan`, `submit` (launcher.preparing.planning) and the experiment runner. Where
the nodes offer RDMA but the job will not use it, the plan says so with the predicted
difference and the option that changes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpijob.perf import perfmodel
from mpijob.scheduling import nic_pairing, rdma
from mpijob.scheduling.dra_devices import NIC_DRIVERS
from mpijob.scheduling.rdma import RdmaDecision, RdmaResource

if TYPE_CHECKING:
    from mpijob.perf.perfmodel import Prediction

# Pod Security levels under which a container may not add IPC_LOCK: baseline allows only
# the container runtime's default capabilities (AUDIT_WRITE, CHOWN, ... SYS_CHROOT), restricted
# only NET_BIND_SERVICE (kubernetes.io/docs/concepts/security/pod-security-standards,
# "Capabilities"; k8s.io/pod-security-admission policy/check_capabilities_baseline.go).
FORBID_IPC_LOCK = ("baseline", "restricted")


@dataclass
class NetworkPlan:
    decision: RdmaDecision
    prediction: Prediction | None = None  # on the network the job gets
    alternative: Prediction | None = None  # on RDMA, where the nodes offer it and the job does not use it
    lines: tuple[str, ...] = ()  # what applies, for plan and submit
    warning: str | None = None


def decide(choice: str, placement, cluster, *, pod_security: str | None = None,
           gpu_request: str = "device-plugin") -> RdmaDecision:
    """--rdma on the planned pods; ValueError (the reason) when `on` cannot be honoured.
    With GPUs through DRA (`gpu_request` dra) on nodes that publish NICs through DRA too,
    RDMA is each GPU paired with the NIC under its PCIe root."""
    by_name = {n.name: n for n in cluster.nodes}
    pods = [(by_name[a.node], len(a.gpus)) for a in placement.assignments if a.node in by_name]
    decision = None
    if gpu_request == "dra" and any(n.dra_nics for n, _ in pods):
        decision = _decide_pairing(choice, placement, by_name, pods)
    if decision is None:
        decision = rdma.decide(choice, pods)
    if decision.use and pod_security in FORBID_IPC_LOCK:
        why = (f"the namespace enforces Pod Security '{pod_security}', which forbids adding the "
               "IPC_LOCK capability NCCL needs to pin RDMA buffers")
        if choice == "on":
            raise ValueError(f"--rdma on: {why}; use a namespace at 'privileged' (or without "
                             "an enforce label), or --rdma off")
        return RdmaDecision(False, decision.resource, why, True)
    return decision


def _decide_pairing(choice: str, placement, by_name: dict, pods) -> RdmaDecision:
    pairing = nic_pairing.pair(placement.assignments, by_name)
    nics = [nic for n in {n.name: n for n, _ in pods}.values() for nic in n.dra_nics
            if nic.driver == pairing.driver]
    res = RdmaResource(NIC_DRIVERS.get(pairing.driver or "", pairing.driver or ""),
                       len(nics), len(nics))
    if not pairing.complete:
        why = pairing.missing[0] + (f" (and {len(pairing.missing) - 1} more)"
                                    if len(pairing.missing) > 1 else "")
        if choice == "on":
            raise ValueError(f"--rdma on: {why}; GPU-NIC pairing through DRA needs a free NIC "
                             "under every planned GPU's PCIe root: use --rdma auto (no "
                             "pairing) or off, or plan on other nodes")
        fallback = rdma.decide(choice, pods)
        note = f"GPU-NIC pairing: none, {why}" + (
            "" if choice == "off" else
            "; the workers' GPU claims ask for no NIC (--rdma on refuses this plan)")
        return dataclasses.replace(fallback, pairing=pairing, pairing_note=note)
    if choice == "off":
        return RdmaDecision(False, res, "--rdma off", True, pairing=pairing)
    if choice == "auto" and len({a.node for a in placement.assignments}) < 2:
        return RdmaDecision(False, res, "the job runs on one node (no traffic between nodes)",
                            True, pairing=pairing)
    return RdmaDecision(True, res, f"every planned GPU has a free {pairing.driver} NIC under "
                        "its PCIe root", True, pairing=pairing)


def plan_network(choice: str, *, model: str, batch_size: int, precision: str, placement,
                 cluster, assumptions=None, pod_security: str | None = None,
                 decision: RdmaDecision | None = None,
                 rdma_fix: str | None = None) -> NetworkPlan:
    """The decision (unless given), the prediction on the network the job gets, and what
    to say. ValueError: `on` refused, or no prediction (unknown model, ...)."""
    if decision is None:
        decision = decide(choice, placement, cluster, pod_security=pod_security)
    base = assumptions or perfmodel.DEFAULT_ASSUMPTIONS
    spans = len({a.node for a in placement.assignments}) > 1

    def on(transport: str) -> Prediction:
        return perfmodel.predict(model=model, batch_size=batch_size, precision=precision,
                                 placement=placement, cluster=cluster,
                                 assumptions=dataclasses.replace(base, transport=transport))

    now = on(decision.transport)
    plan = NetworkPlan(decision, prediction=now)
    res = decision.resource
    if decision.paired and decision.pairing is not None:
        plan.lines = (f"network: RDMA for NCCL between nodes: each GPU's claim also takes the "
                      f"{decision.pairing.driver} NIC under its PCIe root ({res.name if res else ''} "
                      f"DeviceClass; {decision.reason}); IPC_LOCK added",
                      *(f"nic pairs: {w.describe()}" for w in decision.pairing.workers))
    elif decision.use and res is not None:
        each = "one VF per GPU" if res.kind == "vf" else "one shared HCA per worker pod"
        link = {"roce": "RoCE", "infiniband": "InfiniBand"}.get(res.link or "", "RDMA")
        plan.lines = (f"network: {link} for NCCL between nodes: {res.name}, {each} "
                      f"({decision.reason}); IPC_LOCK added",)
    elif not spans:
        plan.lines = ("network: one node: NCCL stays inside it (no traffic between nodes)",)
    else:
        why = rdma_fix.split(";")[0] if rdma_fix else decision.reason
        plan.lines = (f"network: TCP over the pod network between nodes (NCCL sockets, "
                      f"{base.tcp_efficiency:g} of line rate): {why}",)
    if decision.pairing_note:
        plan.lines = (*plan.lines, decision.pairing_note)
    if decision.offered and not decision.use and spans and res is not None:
        plan.alternative = alt = on("rdma")
        now_ips, then = now.images_per_sec, alt.images_per_sec
        fix = (rdma_fix if rdma_fix else  # the mode cannot carry RDMA: --rdma cannot help
               "use --rdma auto or on" if choice == "off" else
               "run it in a namespace whose Pod Security level allows IPC_LOCK (privileged)"
               if "Pod Security" in decision.reason else "use --rdma on")
        if then > now_ips * 1.005:
            plan.warning = (f"the nodes offer RDMA ({res.name}) but this job will use TCP: "
                            f"predicted {now_ips:,.0f} images/sec, with RDMA {then:,.0f} "
                            f"({then / now_ips - 1:+.0%}); {fix}")
        else:  # nothing to fix: said, not warned
            plan.lines = (*plan.lines, f"network: the nodes offer RDMA ({res.name}); this job "
                          f"would be no faster with it (predicted {now_ips:,.0f} images/sec "
                          "either way)")
    return plan
