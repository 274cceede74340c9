"""`hvdk8s doctor`'s I/O: read what the cluster offers (mpijob/scheduling/doctor.py judges it).

Everything is read-only: discovery, /version, SelfSubjectAccessReviews (the caller's own
permissions), Nodes and Pods, and where readable the MPI Operator's Deployment and Kueue's
configuration. A read that is refused leaves its fact unknown; the finding says so.
"""

from __future__ import annotations

import yaml

from launcher.backends.kubernetes import trainer_config
from launcher.backends.kubernetes.client import (
    CONFIGMAP,
    NAMESPACE,
    NODE,
    POD,
    RESOURCE_QUOTA,
    RESOURCE_SLICE,
    ApiError,
    Kind,
    KubeClient,
    api_kind,
)
from launcher.backends.kubernetes.networks import NAD
from launcher.backends.kubernetes.operator import OPERATOR_SELECTOR
from mpijob import gang as gangs
from mpijob.scheduling.doctor import DRA_DRIVER, OPERATOR_PERMISSIONS, PERMISSIONS, Facts
from mpijob.scheduling.dra_devices import NIC_DRIVERS

DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
START_GUARD_SELECTOR = "app.kubernetes.io/name=hvdk8s-start-guard"  # agent_manifests
DEVICE_CLASS = Kind("resource.k8s.io/v1", "DeviceClass", "deviceclasses", namespaced=False)
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
# Kueue's configuration: config/default/kustomization.yaml (namespace kueue-system, prefix
# kueue-) and config/components/manager/kustomization.yaml (manager-config, key below).
KUEUE_NAMESPACE, KUEUE_CONFIG, KUEUE_CONFIG_KEY = ("kueue-system", "kueue-manager-config",
                                                   "controller_manager_config.yaml")
# The MPI Operator's Deployment: manifests/base/deployment.yaml (label app=mpi-operator).


def can_i(client: KubeClient, verb: str, resource: str, group: str = "", subresource: str = "",
          namespace: str | None = None) -> bool | None:
    """SelfSubjectAccessReview: may the caller do this? None when the review fails."""
    attrs = {"verb": verb, "resource": resource, "group": group}
    if subresource:
        attrs["subresource"] = subresource
    if namespace:
        attrs["namespace"] = namespace
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}
    try:
        review = client.request("POST", SSAR_PATH, body=body,
                                resource="selfsubjectaccessreviews") or {}
    except ApiError:
        return None
    return bool((review.get("status") or {}).get("allowed"))


def _optional(fn, default=None):
    try:
        return fn()
    except ApiError:
        return default


def gather(client: KubeClient, namespace: str) -> Facts:
    facts = Facts(server=client.host, namespace=namespace)
    try:
        info = client.request("GET", "/version", resource="version") or {}
        facts.version = info.get("gitVersion") or "unknown"
    except ApiError as exc:
        facts.version_error = str(exc.user_error())
        facts.version_status = exc.status
        return facts
    facts.groups = _optional(client.api_groups, set())
    for verb, res, group, sub, *_ in PERMISSIONS:
        facts.permissions[(verb, res, group, sub)] = can_i(
            client, verb, res, group, sub, None if res == "nodes" else namespace)
    facts.nodes = _optional(lambda: client.items(NODE))
    ns_obj = _optional(lambda: client.get(NAMESPACE, namespace))
    facts.namespace_labels = ((ns_obj or {}).get("metadata") or {}).get("labels") or {} \
        if ns_obj is not None else None
    facts.quotas = _optional(lambda: client.items(RESOURCE_QUOTA, namespace))
    facts.pods = _optional(lambda: client.items(POD, all_namespaces=True))
    if "kubeflow.org" in facts.groups:
        facts.mpijob_versions = tuple(v for v in ("v2beta1", "v1")
                                      if "mpijobs" in _optional(
                                          lambda v=v: client.served_resources(
                                              f"kubeflow.org/{v}"), set()))
    if "v2beta1" in facts.mpijob_versions:
        for verb, res, group, sub, _ in OPERATOR_PERMISSIONS:
            facts.permissions[(verb, res, group, sub)] = can_i(client, verb, res, group, sub,
                                                               namespace)
        deployments = _optional(lambda: client.items(DEPLOYMENT, all_namespaces=True,
                                                     label_selector=OPERATOR_SELECTOR), [])
        facts.operator_deployment = deployments[0] if deployments else None
    guards = _optional(lambda: client.items(DEPLOYMENT, all_namespaces=True,
                                            label_selector=START_GUARD_SELECTOR))
    facts.start_guard = None if guards is None else (guards[0] if guards else {})
    if "trainer.kubeflow.org" in facts.groups:
        from launcher.backends.kubernetes.trainjob import runtime_kind, trainjob_kind

        kind = _optional(lambda: trainjob_kind(client))
        if kind is not None:
            facts.trainer_versions = (kind.api_version.rsplit("/", 1)[1],)
            rkind = _optional(lambda: runtime_kind(client))
            facts.trainer_runtimes = _optional(lambda: client.items(rkind)) if rkind else None
            facts.trainer_status_gate = trainer_status_gate(client)
    # Gang schedulers whose group alone does not tell (the Workload API): is the kind served?
    facts.served = {f"{k.api_version}/{k.plural}" for s in gangs.SCHEDULERS.values()
                    if (k := s.detect_kind) is not None and k.group in facts.groups
                    and _optional(lambda k=k: client.serves(api_kind(k)), False)}
    if "kueue.x-k8s.io" in facts.groups:
        facts.kueue_config, facts.kueue_config_error = kueue_config(client)
    if "resource.k8s.io" in facts.groups:
        facts.dra_versions = tuple(v for v in ("v1", "v1beta2", "v1beta1", "v1alpha3")
                                   if _optional(lambda v=v: client.served_resources(
                                       f"resource.k8s.io/{v}"), set()))
        if "v1" in facts.dra_versions:
            slices = _optional(lambda: client.items(RESOURCE_SLICE))
            facts.dra_gpu_slices = None if slices is None else sum(
                1 for s in slices if (s.get("spec") or {}).get("driver") == DRA_DRIVER)
            facts.nic_slices, facts.nic_classes = _nic_drivers(
                slices or [], _optional(lambda: client.items(DEVICE_CLASS), []))
    if "k8s.cni.cncf.io" in facts.groups:
        facts.nads = _optional(lambda: client.items(NAD, namespace))
    return facts


def _nic_drivers(slices: list[dict], classes: list[dict]):
    """NIC DRA drivers' (devices, nodes) from their slices, and DeviceClasses selecting one
    (a `device.driver == "<driver>"` selector, as each driver's chart writes it)."""
    devices: dict[str, int] = {}
    nodes: dict[str, set] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver = spec.get("driver")
        if driver in NIC_DRIVERS:
            devices[driver] = devices.get(driver, 0) + len(spec.get("devices") or [])
            nodes.setdefault(driver, set()).add(spec.get("nodeName"))
    by_class = {}
    for c in classes:
        for sel in (c.get("spec") or {}).get("selectors") or []:
            expr = ((sel.get("cel") or {}).get("expression") or "").replace(" ", "")
            for driver in NIC_DRIVERS:
                if f'device.driver=="{driver}"' in expr:
                    by_class[c["metadata"]["name"]] = driver
    return {d: (n, len(nodes[d])) for d, n in devices.items()}, by_class


def trainer_status_gate(client: KubeClient) -> bool | None:
    """Whether Trainer's config turns TrainJobStatus on; None where it cannot be read (a
    tenant's rights, or another install's names)."""
    config, _ = trainer_config.read_config(client)
    return None if config is None else trainer_config.gate_on(config)


def kueue_config(client: KubeClient) -> tuple[dict | None, str | None]:
    try:
        cm = client.get(CONFIGMAP, KUEUE_CONFIG, KUEUE_NAMESPACE)
    except ApiError as exc:
        return None, f"{KUEUE_NAMESPACE}/{KUEUE_CONFIG} cannot be read ({exc.reason})"
    if cm is None:
        return None, f"no {KUEUE_NAMESPACE}/{KUEUE_CONFIG} ConfigMap"
    text = (cm.get("data") or {}).get(KUEUE_CONFIG_KEY)
    try:
        config = yaml.safe_load(text or "")
    except yaml.YAMLError:
        config = None
    if not isinstance(config, dict):
        return None, f"{KUEUE_NAMESPACE}/{KUEUE_CONFIG} has no readable {KUEUE_CONFIG_KEY}"
    return config, None
