"""Multus secondary networks (`--network NAD[,NAD]`): the names the worker pods carry.

Multus attaches the networks a pod's `k8s.v1.cni.cncf.io/networks` annotation names, a
comma-separated list of `[namespace/]name` (github.com/k8snetworkplumbingwg/multi-net-spec,
"Network Attachment Selection Annotation"). A NetworkAttachmentDefinition whose
`k8s.v1.cni.cncf.io/resourceName` annotation names a device resource (an SR-IOV VF pool,
an RDMA shared device) gives the pod an interface from it only if the pod requests one unit
of that resource per listed network; the SR-IOV network resources injector exists to add
that request (github.com/k8snetworkplumbingwg/network-resources-injector). hvdk8s adds it
itself (mpijob.k8s.workload), from the resource the Kubernetes backend's preflight read
from each NAD (`Network.resource`), so the pods are right on clusters without the
injector. Launcher pods join no network: they only run mpirun.
"""

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
