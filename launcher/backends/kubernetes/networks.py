"""`--network`: each NetworkAttachmentDefinition exists, and the device resource it names.

Read when the job is planned (KubernetesBackend.networks_for): a network Multus cannot find
leaves the pod in ContainerCreating, and one whose `k8s.v1.cni.cncf.io/resourceName`
resource the pod does not request gets no interface (mpijob.wellknown). A name
`namespace/name` is looked up in that namespace, as Multus does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.backends.kubernetes.client import ApiError, Kind, KubeClient
from launcher.errors import UsageError, UserError
from mpijob.wellknown import MULTUS_RESOURCE_ANNOTATION

if TYPE_CHECKING:  # a type only: the spec's models load when a job is planned
    from mpijob.jobspec.spec import Network

NAD = Kind("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "network-attachment-definitions")


def resolve_networks(client: KubeClient, spec) -> tuple[Network, ...]:
    """The spec's networks, each with its resource; UsageError naming a missing one."""
    if not spec.networks:
        return ()
    from mpijob.jobspec.spec import Network  # lazy: the spec's models load to plan a job

    if not client.serves(NAD):
        raise UsageError("--network: the cluster serves no NetworkAttachmentDefinitions "
                         "(k8s.cni.cncf.io/v1: Multus is not installed); drop --network")
    resolved = []
    for net in spec.networks:
        ns, _, name = net.name.rpartition("/")
        ns = ns or spec.namespace
        try:
            found = client.get(NAD, name, ns)
        except ApiError as exc:
            if exc.status == 403:
                raise UserError(f"--network {net.name}: cannot read NetworkAttachmentDefinitions "
                                f"in namespace {ns} (RBAC: get network-attachment-definitions); "
                                "ask your cluster admin for read access") from None
            raise
        if found is None:
            raise UsageError(f"--network {net.name}: no NetworkAttachmentDefinition {name} in "
                             f"namespace {ns}; list them with `kubectl get "
                             f"network-attachment-definitions -n {ns}`")
        resource = ((found.get("metadata") or {}).get("annotations") or {}).get(MULTUS_RESOURCE_ANNOTATION)
        resolved.append(Network(name=net.name, resource=resource or None))
    return tuple(resolved)
