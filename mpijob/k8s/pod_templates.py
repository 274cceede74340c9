"""The pod templates of a rendered job, for the passes that change every pod hvdk8s makes.

In built-in mode a worker is a Pod (its metadata and spec are the template) and the
launcher a Job; in operator mode both are templates of the MPIJob's replica specs. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from mpijob.jobspec import names

# change(template, role) -> the template to use; it may change the one it is given.
TemplateChange = Callable[[dict, str], dict]
_REPLICAS = (("Launcher", names.ROLE_LAUNCHER), ("Worker", names.ROLE_WORKER))


def with_pod_templates(objects: list[dict], change: TemplateChange) -> list[dict]:
    """The objects with `change` applied to each pod template they hold, with its role;
    an object holding one is a copy, the others are returned as they came."""
    out = []
    for obj in objects:
        kind = obj.get("kind")
        role = ((obj.get("metadata") or {}).get("labels") or {}).get(names.LABEL_ROLE)
        if kind == "Pod" and role == names.ROLE_WORKER:
            obj = copy.deepcopy(obj)
            template = change({"metadata": obj["metadata"], "spec": obj["spec"]}, role)
            obj["metadata"], obj["spec"] = template["metadata"], template["spec"]
        elif kind == "Job" and role == names.ROLE_LAUNCHER:
            obj = copy.deepcopy(obj)
            obj["spec"]["template"] = change(obj["spec"]["template"], role)
        elif kind == "MPIJob":
            obj = copy.deepcopy(obj)
            replicas = obj["spec"]["mpiReplicaSpecs"]
            for replica, replica_role in _REPLICAS:
                replicas[replica]["template"] = change(replicas[replica]["template"], replica_role)
        out.append(obj)
    return out
