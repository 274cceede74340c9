"""The resource types this server serves, and the optional API groups tests can install."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .util import dig

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _path(p):
    return lambda o: dig(o, p)


# Field selectors are whitelisted per kind by the real apiserver; unknown ones are a 400.
_META_FIELDS = {"metadata.name": _path("metadata.name"),
                "metadata.namespace": _path("metadata.namespace")}
_FIELDS = {
    "/pods": {
        "spec.nodeName": _path("spec.nodeName"),
        "spec.restartPolicy": _path("spec.restartPolicy"),
        "spec.schedulerName": _path("spec.schedulerName"),
        "spec.serviceAccountName": _path("spec.serviceAccountName"),
        "spec.hostNetwork": lambda o: bool(dig(o, "spec.hostNetwork")),
        "status.phase": _path("status.phase"),
        "status.podIP": _path("status.podIP"),
        "status.nominatedNodeName": _path("status.nominatedNodeName"),
    },
    "/events": {
        **{f"involvedObject.{k}": _path(f"involvedObject.{k}")
           for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath")},
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source.component"),
        "type": _path("type"),
    },
    "/nodes": {"spec.unschedulable": lambda o: bool(dig(o, "spec.unschedulable"))},
    "/namespaces": {"status.phase": _path("status.phase")},
    "/secrets": {"type": _path("type")},
    "batch/jobs": {"status.successful": lambda o: dig(o, "status.succeeded") or 0},
}


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    custom: bool = False  # served from a CRD: list items keep kind, PUT needs resourceVersion
    categories: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.group}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def fields(self) -> dict:
        return {**_META_FIELDS, **_FIELDS.get(self.key, {})}

    def names(self) -> set[str]:
        q = f"{self.plural}.{self.group}" if self.group else self.plural
        return {self.plural, self.singular_name, self.kind, self.kind.lower(), q,
                *self.short_names}


def _core(plural, kind, namespaced=True, short=(), subs=()):
    return ResourceType("", "v1", plural, kind, namespaced, short_names=short, subresources=subs)


BUILTIN: list[ResourceType] = [
    _core("namespaces", "Namespace", False, ("ns",), ("status", "finalize")),
    _core("nodes", "Node", False, ("no",), ("status",)),
    _core("pods", "Pod", True, ("po",), ("status", "log", "binding")),
    _core("services", "Service", True, ("svc",), ("status",)),
    _core("endpoints", "Endpoints", True, ("ep",)),
    _core("bindings", "Binding"),  # create-only: what custom schedulers POST
    _core("configmaps", "ConfigMap", True, ("cm",)),
    _core("secrets", "Secret"),
    _core("events", "Event", True, ("ev",)),
    # Stored only, bound as the test sets them up (server.add_pvc): what --data reads and
    # the attach/detach model (attachdetach.py) goes by.
    _core("persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), ("status",)),
    _core("serviceaccounts", "ServiceAccount", True, ("sa",)),
    _core("resourcequotas", "ResourceQuota", True, ("quota",), ("status",)),
    _core("limitranges", "LimitRange", True, ("limits",)),
    ResourceType("batch", "v1", "jobs", "Job", subresources=("status",)),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", subresources=("status",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                 False),
    # Stored only: their CEL is not evaluated here (the agent's own-node policy is checked
    # by its text, tests/launcher/cli/test_agent_install.py).
    ResourceType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                 "ValidatingAdmissionPolicy", False, subresources=("status",)),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                 "ValidatingAdmissionPolicyBinding", False),
    # Stored only (no controller): where cluster components run, read by `hvdk8s doctor`.
    ResourceType("apps", "v1", "deployments", "Deployment", short_names=("deploy",),
                 subresources=("status",)),
    # Create-only and never stored: the server answers for the caller (httpapp.py).
    ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
                 "SelfSubjectAccessReview", False),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                 "CustomResourceDefinition", False, short_names=("crd", "crds"),
                 subresources=("status",)),
]


def _cr(group, version, plural, kind, namespaced=True, short=()):
    return ResourceType(group, version, plural, kind, namespaced, short_names=short,
                        subresources=("status",), custom=True)


# Bundles a test can "install" (CRDs + the controller/scheduler that ships with them).
OPTIONAL: dict[str, list[ResourceType]] = {
    "mpijob": [_cr("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")],
    "volcano": [_cr("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup",
                    short=("pg", "podgroup-v1beta1")),
                _cr("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False,
                    short=("q", "queue-v1beta1"))],
    "scheduler-plugins": [_cr("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup",
                              short=("pg", "pgs")),
                          _cr("scheduling.x-k8s.io", "v1alpha1", "elasticquotas",
                              "ElasticQuota", short=("eq", "eqs"))],
    # KAI Scheduler (kubesim/kai.py): its CRDs as its Helm chart installs them.
    "kai": [_cr("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", short=("pg",)),
            _cr("scheduling.run.ai", "v2", "queues", "Queue", False, short=("q",)),
            _cr("kai.scheduler", "v1alpha1", "topologies", "Topology", False)],
    "kueue": [_cr("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue",
                  short=("queue", "queues", "lq")),
              _cr("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False,
                  short=("cq",)),
              _cr("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", False,
                  short=("flavor", "flavors", "rf")),
              _cr("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", short=("wl",))],
}
# Kubeflow Trainer v2.3.0 (trainer.py) and the JobSet v0.12.0 it runs on (jobset.py).
OPTIONAL["trainer"] = [
    _cr("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", short=("tj",)),
    _cr("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime"),
    _cr("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime",
        False)]
# Kueue's MultiKueue objects (multikueue.py), apart from the queues so that a plain Kueue
# install serves what it served before.
OPTIONAL["multikueue"] = [
    _cr("kueue.x-k8s.io", "v1beta1", "admissionchecks", "AdmissionCheck", False),
    _cr("kueue.x-k8s.io", "v1beta1", "multikueueconfigs", "MultiKueueConfig", False),
    _cr("kueue.x-k8s.io", "v1beta1", "multikueueclusters", "MultiKueueCluster", False)]
OPTIONAL["jobset"] = [_cr("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", short=("js",))]
# The Prometheus Operator's scrape configuration (prometheus-operator/prometheus-operator
# pkg/apis/monitoring/v1/podmonitor_types.go); nothing here scrapes.
OPTIONAL["prometheus-operator"] = [_cr("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor",
                                       short=("pmon",))]
# Friendly aliases accepted by install_group()/install_crd().
ALIASES = {"mpijobs": "mpijob", "mpijobs.kubeflow.org": "mpijob", "kubeflow.org": "mpijob",
           "mpi-operator": "mpijob", "scheduling.volcano.sh": "volcano",
           "scheduling.x-k8s.io": "scheduler-plugins", "kueue.x-k8s.io": "kueue",
           "coscheduling": "scheduler-plugins", "scheduling.run.ai": "kai"}
# Scheduler names the gang schedulers register under.
GANG_SCHEDULERS = {"volcano": "volcano", "scheduler-plugins": "scheduler-plugins-scheduler",
                   "kai": "kai-scheduler"}


@dataclass
class Registry:
    """Thread-safe lookup of served resources; CRDs add and remove entries at runtime."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[(rt.group, rt.version, rt.plural)] = rt

    def remove(self, group: str, plural: str) -> list[ResourceType]:
        with self._lock:
            gone = [k for k, rt in self._types.items() if rt.group == group and rt.plural == plural]
            return [self._types.pop(k) for k in gone]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType | None:
        group, _, plural = key.partition("/")
        for rt in list(self._types.values()):
            if rt.group == group and rt.plural == plural:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def find(self, name: str) -> ResourceType:
        """Resolve 'pods', 'Pod', 'po', 'jobs.batch', 'podgroups.scheduling.volcano.sh'."""
        hits = [rt for rt in self.all() if name in rt.names()]
        if not hits:
            raise KeyError(f"unknown resource {name!r}")
        builtin = [rt for rt in hits if not rt.custom]
        return (builtin or hits)[0]

    def group_versions(self) -> dict[str, list[str]]:
        """Ordered {group: [versions]} with built-ins first, as discovery lists them."""
        out: dict[str, list[str]] = {}
        for rt in sorted(self.all(), key=lambda r: (r.custom, r.group == "", r.group)):
            vs = out.setdefault(rt.group, [])
            if rt.version not in vs:
                vs.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.all() if rt.group == group and rt.version == version]
