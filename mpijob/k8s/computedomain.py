"""A ComputeDomain: the IMEX channel a job needs for NVLink between its nodes.

NVIDIA's DRA driver for GPUs (github.com/NVIDIA/k8s-dra-driver-gpu) serves
`resource.nvidia.com/v1beta1` ComputeDomain (api/nvidia.com/resource/v1beta1/
computedomain.go): `spec.numNodes` (the nodes expected to join: the driver marks the
domain Ready when that many IMEX daemons are; deprecated, but still a required field of
v1beta1) and `spec.channel.resourceClaimTemplate.name`, the ResourceClaimTemplate its
controller then creates in the domain's namespace (cmd/compute-domain-controller/
computedomain.go, resourceclaimtemplate.go; templates/compute-domain-workload-claim-
template.tmpl.yaml): one request `channel` of DeviceClass
`compute-domain-default-channel.nvidia.com`, configured with the domain's uid. A pod that
claims it through that template gets the IMEX channel device, and its node joins the
domain's IMEX daemons. Pure.
"""

from __future__ import annotations

from mpijob.jobspec import names
from mpijob.scheduling.nvlink import CLIQUE_LABEL

GROUP = "resource.nvidia.com"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ComputeDomain"
PLURAL = "computedomains"
# What the driver's controller puts into the template it creates (names from its source).
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
CHANNEL_DRIVER = "compute-domain.nvidia.com"
CHANNEL_REQUEST = "channel"
# The pod's name for the claim (spec.resourceClaims[].name, containers' resources.claims).
CLAIM = "imex-channel"


def domain_name(job: str) -> str:
    return f"{job}-compute-domain"


def channel_template_name(job: str) -> str:
    return f"{job}-imex-channel"


def compute_domain(job: str, namespace: str, nodes: int) -> dict:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": domain_name(job), "namespace": namespace,
                         "labels": names.job_labels(job)},
            "spec": {"numNodes": nodes,
                     "channel": {"resourceClaimTemplate": {"name": channel_template_name(job)}}}}


def clique_affinity(job: str) -> dict:
    """Required pod affinity of the job's workers to each other over the NVLink clique
    label: every worker in the partition of the first one (kube-scheduler lets the first
    pod of a group whose affinity only it matches schedule: InterPodAffinity's filter,
    pkg/scheduler/framework/plugins/interpodaffinity/filtering.go)."""
    selector = {"matchLabels": {**names.job_labels(job), names.LABEL_ROLE: names.ROLE_WORKER}}
    return {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": CLIQUE_LABEL}]}
