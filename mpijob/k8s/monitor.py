"""The launcher pod's progress monitor (podscripts/hvdk8s_monitor.py), as every mode renders
it: its file in the job's ConfigMap, its environment, the readiness probe that reads what it
marks, and the metrics port.

The probe is how a stall reaches `hvdk8s wait` without a log read: the kubelet runs it every
PROBE_PERIOD_SECONDS and turns it into the pod's Ready condition, which `wait`'s pod watch
delivers, and a failure into an `Unhealthy` event carrying its output (the stall, the silent
ranks). It fails only while the monitor marks a stall, or where launcher.sh found no python3
to run the monitor (then `wait` reads the log as it would without a probe). It passes from
the container's start: a launcher not Ready drops out of a Service that does not publish
not-ready addresses (the MPI Operator's), and Hydra's proxies call the launcher back by
its name as the launch line starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpijob.jobspec import names
from mpijob.k8s.render import CONFIG_DIR, metadata, pod_script
from mpijob.progress import MONITOR_DIR, rules_env
from mpijob.wellknown import POD_MONITOR_API_VERSION, POD_MONITOR_KIND

if TYPE_CHECKING:
    from mpijob.jobspec.spec import JobSpec

MONITOR_FILE = "hvdk8s_monitor.py"
MONITOR_IN_POD = f"{CONFIG_DIR}/{MONITOR_FILE}"
METRICS_PORT_NAME = "metrics"
PROBE_PERIOD_SECONDS = 10

# What the probe reads in MONITOR_DIR: the monitor's stall, launcher.sh's word that no
# monitor runs.
PROBE_FILES = ("stalled", "unwatched")


def config() -> dict[str, str]:
    """The ConfigMap entry: the monitor's source."""
    return {MONITOR_FILE: pod_script(MONITOR_FILE)}


def env(spec: JobSpec, prediction: dict | None) -> dict[str, str]:
    """The launcher's environment for the monitor."""
    out = {"HVDK8S_MONITOR": MONITOR_IN_POD, "HVDK8S_MONITOR_DIR": MONITOR_DIR, **rules_env()}
    rate = (prediction or {}).get("images_per_sec")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
        out["HVDK8S_PREDICTED_IMAGES_PER_SEC"] = f"{float(rate):.6g}"
    if spec.stall_timeout is not None:
        out["HVDK8S_STALL_TIMEOUT"] = str(spec.stall_timeout)
    if spec.metrics_port is not None:
        out["HVDK8S_METRICS_PORT"] = str(spec.metrics_port)
    return out


def probe_script() -> str:
    """Fails, saying why, while the job is stalled or no monitor watches it."""
    return (f'for f in {" ".join(PROBE_FILES)}; do if [ -e "{MONITOR_DIR}/$f" ]; then '
            f'cat "{MONITOR_DIR}/$f"; exit 1; fi; done')


def readiness_probe() -> dict:
    return {"exec": {"command": ["/bin/sh", "-c", probe_script()]},
            "periodSeconds": PROBE_PERIOD_SECONDS, "timeoutSeconds": 5,
            "successThreshold": 1, "failureThreshold": 1}


def with_monitor(spec: JobSpec, container: dict) -> dict:
    """The launcher container with the probe and, when asked, the metrics port."""
    out = {**container, "readinessProbe": readiness_probe()}
    if spec.metrics_port is not None:
        out["ports"] = [*(out.get("ports") or []),
                        {"name": METRICS_PORT_NAME, "containerPort": spec.metrics_port}]
    return out


def pod_monitor(spec: JobSpec, mode: str) -> dict:
    """The PodMonitor that has Prometheus scrape the launcher pod's /metrics (submit creates
    it where the cluster serves its CRD). A TrainJob's launcher container comes from the
    runtime, which declares no job's port: its endpoint is the port's number
    (podMetricsEndpoints[].portNumber), the others' the named port."""
    assert spec.metrics_port is not None
    endpoint: dict = {"path": "/metrics", "interval": "30s"}
    if mode == "trainjob":
        endpoint["portNumber"] = spec.metrics_port
    else:
        endpoint["port"] = METRICS_PORT_NAME
    return {"apiVersion": POD_MONITOR_API_VERSION, "kind": POD_MONITOR_KIND,
            "metadata": metadata(spec, names.metrics(spec.name)),
            "spec": {"selector": {"matchLabels": {names.LABEL_JOB: spec.name,
                                                  names.LABEL_ROLE: names.ROLE_LAUNCHER}},
                     "podMetricsEndpoints": [endpoint]}}
