"""Built-in mode, elastic (mpijob.jobspec.elastic): the parts that make a built-in job one
that looks after itself, each built whole here for mpijob.k8s.render_pods.

- The worker pods become one Indexed batch/v1 Job, `<job>-worker`, with completions =
  parallelism = the workers to start with. The Job controller names each pod's hostname
  `<job>-worker-<index>` in the Service's subdomain (the names the hostfile already uses),
  replaces a worker pod that dies (same index, a new pod and address), and runs more or
  fewer when `hvdk8s scale` changes completions and parallelism together (elastic Indexed
  Jobs, KEP-3715, beta since Kubernetes 1.27): pods past the new completions are deleted.
  A worker released by the launcher exits 0, its index succeeds, and it is not replaced.
- A second headless Service, `<job>-ready`, publishes only Ready workers (readiness: their
  sshd answers), so cluster DNS lists the live workers; Horovod's host discovery script
  reads it (no API access).
- The launcher runs `horovodrun` elastic over Gloo (--min-np/--max-np in slots) through
  `elastic.sh`, which waits for the minimum, then hands over to launcher.sh.

Pure.
"""

from __future__ import annotations

from mpijob.jobspec import names
from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s.command import preflight_program, preflight_then, program_argv, shell_join
from mpijob.k8s.render import metadata, pod_script

ELASTIC_DIR = "/etc/hvdk8s-elastic"
BENCHMARK = f"{ELASTIC_DIR}/hvd_cnn_bench.py"
# How long horovodrun waits for at least --min-np slots after a worker is lost before it
# fails the job (its --elastic-timeout): the grace period below the minimum.
GRACE_SECONDS = 600
# A worker pod may be replaced this many times over the job (each counts as a failure).
REPLACEMENTS = 1000


def ready_service_name(job: str) -> str:
    return f"{job}-ready"


def worker_job_name(job: str) -> str:
    # The Job controller gives each pod the hostname <Job name>-<index>: the worker names.
    return names.service(job)


def slots(spec: JobSpec) -> int:
    return spec.gpus_per_worker or 1


def elastic_program(spec: JobSpec, **benchmark_kw) -> list[str]:
    """What each rank runs: the user's program, or the benchmark in its elastic loop."""
    program = program_argv(spec, **benchmark_kw)
    return [*program, "--elastic"] if spec.runs_benchmark else program


def horovodrun_argv(spec: JobSpec, *, horovodrun: str = "horovodrun",
                    discovery: str = f"{ELASTIC_DIR}/discover_hosts.sh",
                    program: list[str] | None = None, nic: str | None = None) -> list[str]:
    """The launch line; by default a launcher pod's (its scripts, the benchmark beside its
    elastic loop in the ConfigMap); the local backend names its own paths and `lo`."""
    s = slots(spec)
    if program is None:
        program = elastic_program(spec, script=BENCHMARK)
    # Horovod finds the interfaces the hosts share by probing two of them, which a job
    # down to one worker does not have: the pod network's is eth0.
    nic = nic or (spec.network_interface if spec.host_network else "eth0")
    return [horovodrun, "--gloo",
            "-np", str(spec.workers * s), "--min-np", str(spec.min_size * s),
            "--max-np", str(spec.max_size * s),
            "--host-discovery-script", discovery,
            "--elastic-timeout", str(GRACE_SECONDS),
            *(["--network-interface", nic] if nic else []),
            # No --ssh-port/--ssh-identity-file: horovodrun runs `ssh` from PATH, which a
            # launcher pod's launcher.sh makes its wrapper with the job's key, port and no
            # host key check (locally every host is this machine: no ssh).
            *program]


def config_map(spec: JobSpec, benchmark_source: str | None,
               elastic_source: str | None) -> dict:
    """`<job>-elastic`: the discovery and launcher scripts, and the elastic benchmark."""
    data = {"discover_hosts.sh": pod_script("discover_hosts.sh"),
            "elastic.sh": pod_script("elastic.sh")}
    if spec.runs_benchmark:
        if benchmark_source is None or elastic_source is None:
            raise ValueError("the elastic benchmark runs from its ConfigMap: pass both sources")
        data["hvd_cnn_bench.py"] = benchmark_source
        data["elastic.py"] = elastic_source
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(spec, f"{spec.name}-elastic"), "data": data}


def volume(spec: JobSpec) -> dict:
    return {"name": "hvdk8s-elastic", "configMap": {"name": f"{spec.name}-elastic",
                                                     "defaultMode": 0o755}}


MOUNT = {"name": "hvdk8s-elastic", "mountPath": ELASTIC_DIR, "readOnly": True}


def ready_service(spec: JobSpec, ssh_port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(spec, ready_service_name(spec.name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": False,
                     "selector": {names.LABEL_JOB: spec.name,
                                  names.LABEL_ROLE: names.ROLE_WORKER},
                     "ports": [{"name": "ssh", "port": ssh_port, "targetPort": ssh_port}]}}


def launcher_command(spec: JobSpec, decided: Decisions) -> list[str]:
    """The launcher waits for the minimum (elastic.sh), then runs horovodrun; after the
    preflight over the workers there at the start, unless --preflight off."""
    argv = horovodrun_argv(spec)
    if decided.runs_preflight:
        argv = preflight_then(str(decided.preflight), start_preflight(spec, decided), argv)
    return ["/bin/sh", f"{ELASTIC_DIR}/elastic.sh", *argv]


def start_preflight(spec: JobSpec, decided: Decisions) -> str:
    """The preflight over the workers elastic.sh found Ready at the start (its hostfile, one
    name a line: launcher.sh's HVDK8S_HOSTFILE), each with the job's slots: a horovodrun of
    those hosts (Gloo, no mpirun in an elastic image), computed when the launcher starts."""
    nic = spec.network_interface if spec.host_network else "eth0"
    program = preflight_program(spec, decided=decided) + ["--uniform-slots", str(slots(spec))]
    return ('hosts=""; np=0\n'
            """for h in $(sed -e 's/[: ].*//' -e '/^$/d' "$HVDK8S_HOSTFILE"); do\n"""
            '  hosts="${hosts:+$hosts,}$h:$HVDK8S_SLOTS"; np=$((np + HVDK8S_SLOTS))\n'
            "done\n"
            'horovodrun --gloo -np "$np" -H "$hosts" '
            + shell_join(["--network-interface", nic or "eth0", *program]))


def launcher_env(spec: JobSpec) -> list[dict]:
    return [{"name": "HVDK8S_MIN_WORKERS", "value": str(spec.min_size)},
            {"name": "HVDK8S_SLOTS", "value": str(slots(spec))},
            {"name": "HVDK8S_READY_SERVICE",
             "value": f"{ready_service_name(spec.name)}.{spec.namespace}.svc"}]


def worker_job(spec: JobSpec, template: dict) -> dict:
    """The Indexed worker Job around one worker's pod template (one pod per worker, so a
    lost pod is a lost worker and the discovery's slots are its GPUs)."""
    meta = metadata(spec, worker_job_name(spec.name), role=names.ROLE_WORKER)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "completionMode": "Indexed", "completions": spec.workers, "parallelism": spec.workers,
        "backoffLimit": REPLACEMENTS, "template": template}}
