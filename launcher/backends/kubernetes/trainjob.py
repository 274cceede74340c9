"""Trainer mode against the API: which Trainer API the cluster serves, --mode auto, the
runtime a TrainJob names, and the pods Trainer will make of it (for the admission dry run).

Kubeflow Trainer v2.3.0 (docs/trainer.md): the TrainJob controller reads the runtime
(pkg/runtime/core/clustertrainingruntime.go), and a TrainJob whose runtime is missing is
refused by its webhook ("specified clusterTrainingRuntime must be created before the
TrainJob is created", pkg/runtime/core/trainingruntime.go ValidateObjects), so hvdk8s
checks it before creating anything and says how to install hvdk8s's own.
"""

from __future__ import annotations

import copy

from launcher.backends.kubernetes.client import (
    CLUSTER_TRAINING_RUNTIMES,
    TRAINJOBS,
    ApiError,
    Kind,
)
from launcher.errors import Refused
from mpijob.wellknown import TRAINER_GROUP, TRAINER_LAUNCHER, TRAINER_NODE

TRAINER_MISSING = ("Kubeflow Trainer is not installed (no trainer.kubeflow.org TrainJob in "
                   "the API); install it, or use --mode pods")


def trainjob_kind(client) -> Kind | None:
    """The TrainJob kind of the newest Trainer API version served, or None. The group list
    (one cached discovery call) first: a cluster without Trainer costs no more requests."""
    if TRAINER_GROUP not in client.api_groups():
        return None
    return next((k for k in TRAINJOBS if client.serves(k)), None)


def runtime_kind(client) -> Kind | None:
    if TRAINER_GROUP not in client.api_groups():
        return None
    return next((k for k in CLUSTER_TRAINING_RUNTIMES if client.serves(k)), None)


def _runtime(client, spec, context: str | None = None) -> tuple[dict, str | None]:
    """hvdk8s's ClusterTrainingRuntime for the job's image ({} where not readable), and why
    it cannot run the job (missing, or not the one hvdk8s installs), with the install
    command (for `context`, where not the current one); None where it can, or cannot be
    read (Trainer's webhook then refuses a TrainJob whose runtime is missing)."""
    # lazy: list/get/wait import this module and need not build the spec's models
    from mpijob.k8s import render_trainjob as tj

    kind = runtime_kind(client)
    if trainjob_kind(client) is None or kind is None:
        return {}, TRAINER_MISSING
    name = tj.runtime_name(spec)
    install = tj.install_command(spec, context)
    try:
        runtime = client.get(kind, name)
    except ApiError as exc:
        if exc.status != 403:
            raise
        return {}, None
    if runtime is None:
        return {}, (f"no ClusterTrainingRuntime {name} runs image {spec.image} (hvdk8s's "
                    f"Horovod runtime, one per image); install it: {install} (--dry-run "
                    "shows it first)")
    if (why := tj.runtime_fits(runtime, spec)) is not None:
        return runtime, (f"ClusterTrainingRuntime {name} does not fit: {why}; reinstall it: "
                         f"{install}")
    return runtime, None


def runtime_problem(client, spec, context: str | None = None) -> str | None:
    """Why the job cannot run as a TrainJob for want of its runtime (None: it can)."""
    return _runtime(client, spec, context)[1]


def require_runtime(client, spec) -> dict:
    """hvdk8s's ClusterTrainingRuntime for the job's image, as installed; refuse (naming
    the install command) where it is missing or differs."""
    runtime, why = _runtime(client, spec)
    if why is not None:
        raise Refused(why)
    return runtime


def expected_pods(runtime: dict, trainjob: dict) -> list[tuple[dict, int]]:
    """The pods Trainer will make of the TrainJob, each with how many alike: the runtime's
    replicated jobs with the runtime patch merged by name (strategic merge on name keys)
    and the trainer's image, command, environment and resources applied as its JobSet
    plugin does (builder.go Trainer; runLauncherAsNode: the nodes get env and resources)."""
    spec = trainjob["spec"]
    trainer = spec.get("trainer") or {}
    patches = {}
    for p in spec.get("runtimePatches") or []:
        rjobs = (((p.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
                 or {}).get("replicatedJobs") or []
        for r in rjobs:
            patches[r["name"]] = ((r.get("template") or {}).get("spec") or {}).get("template") or {}
    nodes = int(trainer.get("numNodes") or 1)
    out = []
    for rjob in (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "replicatedJobs") or []:
        tmpl = copy.deepcopy(((rjob.get("template") or {}).get("spec") or {}).get("template") or {})
        patch = patches.get(rjob["name"]) or {}
        pod = tmpl.setdefault("spec", {})
        for key, value in (patch.get("spec") or {}).items():
            if key in ("volumes", "containers"):
                by_name = {x["name"]: x for x in pod.get(key) or []}
                for item in value:
                    base = by_name.get(item["name"])
                    if base is None:
                        pod.setdefault(key, []).append(copy.deepcopy(item))
                    else:
                        for k, v in item.items():
                            base[k] = ([*base.get(k, []), *v] if isinstance(v, list) else v)
            else:
                pod[key] = copy.deepcopy(value)
        meta = tmpl.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            meta[key] = {**(meta.get(key) or {}), **((patch.get("metadata") or {}).get(key) or {})}
        is_launcher = rjob["name"] == TRAINER_LAUNCHER
        for c in pod.get("containers") or []:
            if c.get("name") != TRAINER_NODE:
                continue
            if is_launcher:
                c["image"] = trainer.get("image", c.get("image"))
                c["command"] = trainer.get("command", c.get("command"))
            c["env"] = [*(c.get("env") or []), *(trainer.get("env") or [])]
            if trainer.get("resourcesPerNode"):
                c["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
        name = f"{trainjob['metadata']['name']}-{rjob['name']}-0-0"
        pod_obj = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": trainjob["metadata"]["namespace"],
                                "labels": meta.get("labels") or {},
                                "annotations": meta.get("annotations") or {}},
                   "spec": pod}
        out.append((pod_obj, 1 if is_launcher else max(nodes - 1, 1)))
    return out
