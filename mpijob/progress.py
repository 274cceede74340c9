"""How a running job's progress is judged, defined once: the CLI judges the ranks' reports
with these (launcher/formats/job_progress.py), and the launcher pod's monitor
(mpijob/k8s/podscripts/hvdk8s_monitor.py, which cannot import hvdk8s) gets them in its
environment (`rules_env`), so both call the same job stalled."""

from __future__ import annotations

import json

STRAGGLER_RATIO = 1.25
STRAGGLER_REPORTS = 3
STALL_STEPS = 3.0
STALL_HEARTBEATS = 3.0
HEARTBEAT_SECONDS = 2.0  # the emitters' default, when a heartbeat does not say its own

# The monitor's environment: the rules above as one JSON object.
RULES_ENV = "HVDK8S_PROGRESS_RULES"
# Where the monitor marks that it watches and that the job stalled; the launcher's
# readiness probe reads them.
MONITOR_DIR = "/tmp/hvdk8s-monitor"
# How a launch line the monitor ended for its stall (--stall-timeout) begins its
# termination message; the CLI gives the job the reason phases.STALLED_REASON for it.
STALL_MESSAGE_PREFIX = "hvdk8s: stalled: "


def rules() -> dict[str, float | str]:
    return {"straggler_ratio": STRAGGLER_RATIO, "straggler_reports": STRAGGLER_REPORTS,
            "stall_steps": STALL_STEPS, "stall_heartbeats": STALL_HEARTBEATS,
            "heartbeat_seconds": HEARTBEAT_SECONDS,
            "stall_message_prefix": STALL_MESSAGE_PREFIX}


def rules_env() -> dict[str, str]:
    return {RULES_ENV: json.dumps(rules(), sort_keys=True, separators=(",", ":"))}
