"""The files hvdk8s's pods read under CONFIG_DIR (the launch script, the built-in
benchmark, the preflight), and the volume that puts them there.

A job run in this cluster ships them in a ConfigMap it creates beside the root. A job sent
to a MultiKueue queue cannot: Kueue copies only the job object to the worker cluster
(kueue pkg/controller/jobs/mpijob/mpijob_multikueue_adapter.go SyncJob, and the TrainJob
adapter alike: the remote copy is built from the job's spec and nothing else), so a
ConfigMap made on the manager never reaches the pods, which would wait in
ContainerCreating for ever (kubelet pkg/volume/configmap/configmap.go SetUpAt: configmap
not found). Such a job carries its files in its pod templates instead: each file is an
annotation of the pod, and a downwardAPI volume of the same name writes each annotation
to its file (pkg/volume/downwardapi/downwardapi.go CollectData with
`metadata.annotations['<key>']`: the value, as is). The mount path and the programs stay
the same, nothing more is created or has to be deleted, and it works whichever worker
cluster Kueue picks, where hvdk8s may have no kubeconfig context.

Rejected: creating the ConfigMap on the worker cluster (hvdk8s knows which one only when
the MultiKueueConfig names one cluster that the kubeconfig also names, and the ConfigMap
could not be owned by a remote job that does not exist yet, so deleting the job through
Kueue would leave it behind), and refusing these jobs (the built-in benchmark, the
preflight and every TrainJob need the files).

The limit: a pod's annotations hold 256 KiB in all (apimachinery pkg/api/validation
objectmeta.go TotalAnnotationSizeLimitB), less what the controllers add on the way
(HEADROOM); a job whose files do not fit is refused before anything is created. Pure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from mpijob.errors import SpecError
from mpijob.jobspec import names
from mpijob.jobspec.spec import JobSpec, option_of
from mpijob.k8s.command import PREFLIGHT_IN_POD

# A pod annotation per file: `files.hvdk8s.io/<file name>`.
FILE_ANNOTATION_PREFIX = f"files.{names.GROUP}/"
ANNOTATIONS_LIMIT = 256 * 1024
# What Kueue, the MPI Operator, JobSet and Trainer may add to the pods' annotations.
HEADROOM = 16 * 1024


@dataclass(frozen=True)
class PodFiles:
    """The volume that holds the files, and the annotations the pod template must carry
    for it (none for a ConfigMap's)."""

    source: dict  # the volume, as each pod gets its own copy of it: `volume()`
    annotations: dict[str, str] = field(default_factory=dict)

    def volume(self) -> dict:
        return copy.deepcopy(self.source)


def from_config_map(volume: str, config_map: str) -> PodFiles:
    return PodFiles({"name": volume, "configMap": {"name": config_map}})


def carried(spec: JobSpec, volume: str, files: dict[str, str]) -> PodFiles:
    """The files in the pod's own annotations, read back by a downwardAPI volume; refused
    (SpecError) where they leave less than HEADROOM of what a pod's annotations may hold
    (hvdk8s's own other annotations are a few hundred bytes)."""
    annotations = {FILE_ANNOTATION_PREFIX + name: text for name, text in sorted(files.items())}
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT - HEADROOM:
        runs_preflight = PREFLIGHT_IN_POD.rsplit("/", 1)[1] in files
        preflight = (f", or {option_of('preflight')} off" if runs_preflight else "")
        raise SpecError("queue", (
            f"{spec.queue} dispatches through Kueue's MultiKueue, which copies only the job to "
            f"the worker cluster, so its pods carry their files ({', '.join(sorted(files))}) "
            f"in their annotations: {size // 1024} KiB, over the "
            f"{(ANNOTATIONS_LIMIT - HEADROOM) // 1024} KiB a pod's annotations may hold here; "
            f"use a queue that runs its jobs in this cluster{preflight}"),
            option_of("queue"))
    items = [{"path": name, "fieldRef": {
        "fieldPath": f"metadata.annotations['{FILE_ANNOTATION_PREFIX + name}']"}}
        for name in sorted(files)]
    return PodFiles({"name": volume, "downwardAPI": {"items": items}}, annotations)
