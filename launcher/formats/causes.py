"""Why a job is not running or failed: one cause, with what to do (pure).

Both backends' statuses carry the evidence (each pod's or rank's reason and message, the
job's reason, the failing replica's last log lines, the ranks' progress); `why` picks the
one cause a person acts on, in this order: a pod that cannot start (not schedulable,
image not pulled, OOM-killed, evicted or preempted), the gang scheduler or operator
holding the job, a recognised pattern in the failing log (ssh, Open MPI/PRTE start,
NCCL, a Horovod stall warning, a Python traceback's last line), a stall the ranks'
reports show, then the job's own reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mpijob.phases import STALLED_REASON

if TYPE_CHECKING:
    from launcher.backends.base import JobStatus, ReplicaStatus

PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
# A job its gang scheduler holds is Queued with reason QueuedBy<Scheduler>
# (launcher/backends/kubernetes/queue.py), the scheduler's words in the message: Kueue's
# Workload conditions, the PodGroup's, KAI's, Volcano's.
GANG_REASON_PREFIX = "QueuedBy"
_IMAGE = re.compile(r'(?:image|Back-off pulling image) "?([^"\s]+)"?')


def _text(*parts: str | None) -> str:
    return ": ".join(p for p in parts if p)


def replica_cause(r: ReplicaStatus) -> str | None:
    """The cause one pod or rank gives, with the fix; None when it gives none."""
    reason, message = r.reason or "", r.message or ""
    where = f" on node {r.node}" if r.node else ""
    if reason == "Unschedulable":
        return (f"{r.name} cannot be scheduled: {message or 'no node fits'} (fix: free or "
                "add the resources named, or relax --selector/--toleration/--gputopology)")
    if reason in PULL_REASONS:
        found = _IMAGE.search(message)
        image = found.group(1) if found else "its image"
        return (f"{r.name}: image {image} cannot be pulled{where} ({reason}"
                f"{': ' + message if message else ''}) (fix: check the image name and tag, "
                "and that the node can reach the registry, with an imagePullSecret if private)")
    if reason == "OOMKilled":
        limit = f" ({message})" if message else ""
        return (f"{r.name} was killed out of memory{limit}{where} (fix: raise --memory, "
                "or lower --batch-size)")
    if reason == "Evicted":
        return (f"{r.name} was evicted{where}: {message or 'node pressure'} (fix: ask for "
                "the memory/disk it uses (--memory), or run it on a node with room)")
    if reason in ("Preempted", "PreemptionByScheduler", "DisruptionTarget") or \
            "preempt" in message.lower():
        return (f"{r.name} was preempted{where}: {message or reason} (fix: a higher "
                "--priority, or wait for the capacity to free up)")
    if reason in ("CreateContainerConfigError", "CreateContainerError", "RunContainerError"):
        return f"{r.name} cannot start its container: {_text(reason, message)}"
    if reason == "CrashLoopBackOff":
        return f"{r.name} keeps crashing{where}: {_text(reason, message)} (see hvdk8s logs)"
    return None


# Recognised log lines, most specific first: (pattern, what it means, the fix).
LOG_PATTERNS: Sequence[tuple[re.Pattern, str, str]] = (
    (re.compile(r"Host key verification failed"),
     "ssh to a worker failed: host key verification failed",
     "the launcher's known_hosts must hold the workers' keys, or StrictHostKeyChecking=no "
     "in its ssh config (hvdk8s's images and pods set it)"),
    (re.compile(r"ssh: connect to host (\S+) port (\d+): Connection refused"),
     "ssh to worker {0} refused on port {1}: its sshd is not up",
     "the worker image must run sshd (the launcher starts before it is ready only if "
     "nothing waits for it); see hvdk8s logs --worker N"),
    (re.compile(r"ssh: Could not resolve hostname (\S+?):"),
     "ssh cannot resolve worker {0}",
     "the workers' headless Service must exist and the pods be Ready"),
    (re.compile(r"(ORTE|PRTE) was unable to reliably start one or more daemons"),
     "mpirun could not start its daemons on the workers ({0})",
     "check that ssh from the launcher to every worker works and that the workers have "
     "the same Open MPI at the same path"),
    (re.compile(r"There are not enough slots available in the system"),
     "mpirun found fewer slots than ranks",
     "the hostfile's slots must add up to -np (hvdk8s's own launch line does)"),
    (re.compile(r"(?:PRTE|ORTE) has lost communication with a remote daemon"),
     "mpirun lost a worker's daemon (the worker pod or node went away)",
     "see which worker ended: hvdk8s get shows each pod"),
    (re.compile(r"NCCL (?:error|WARN)\s*:?\s*(.*)"),
     "NCCL failed: {0}",
     "run with -e NCCL_DEBUG=INFO; check the GPUs' links (hvdk8s top node -d) and "
     "NCCL_SOCKET_IFNAME"),
    (re.compile(r"One or more tensors were submitted to be reduced.*?(Missing ranks:.*)?$"),
     "Horovod stall: some ranks stopped submitting tensors {0}",
     "a rank is stuck or much slower (hvdk8s get names the ranks not reporting)"),
)
_MISSING_RANKS = re.compile(r"^\s*(\d+): \[")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^(?:\[[^\]]*\]\s*(?:<std(?:out|err)>:)?\s*)?"
                        r"([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$")


def log_cause(lines: Sequence[str]) -> str | None:
    """The cause a failing log shows: a recognised pattern, else a Python traceback's last
    line; None when it shows none."""
    for pattern, meaning, fix in LOG_PATTERNS:
        for at, line in enumerate(lines):
            found = pattern.search(line)
            if found is None:
                continue
            groups = [g or "" for g in found.groups()]
            if meaning.startswith("Horovod stall"):
                missing = [m.group(1) for m in map(_MISSING_RANKS.match, lines[at + 1:at + 9])
                           if m]
                groups = [f"(missing ranks: {', '.join(missing)})" if missing else ""]
            return f"{meaning.format(*groups).strip()} (fix: {fix})"
    if any(_TRACEBACK in line for line in lines):
        last = next((m.group(1) for line in reversed(lines)
                     if (m := _EXCEPTION.match(line.strip()))), None)
        if last:
            return f"the program raised {last} (see hvdk8s logs for the traceback)"
    return None


def why(status: JobStatus) -> str | None:
    """The one cause that keeps `status`'s job from running or made it fail, with the fix;
    None for a job that runs (or ran) as it should."""
    phase = status.phase
    if phase == "Succeeded":
        return None
    if phase == "Queued" and (status.reason or "").startswith(GANG_REASON_PREFIX):
        # its pods wait for the gang, not for a node: the scheduler's reason comes first
        return (f"the gang is not admitted ({status.reason}): {status.message or 'queued'} "
                "(fix: free quota or capacity in the queue, or ask for fewer GPUs)")
    for r in status.replicas:
        found = replica_cause(r)
        if found:
            return found
    if phase == "Failed" and status.reason == STALLED_REASON:
        # ended for its stall (--stall-timeout): what its log shows after is the ending's
        return _text(status.reason, status.message)
    if phase == "Failed":
        found = log_cause(status.log_tail)
        if found:
            return found
    progress = status.progress
    if phase == "Running" and progress is not None and progress.stalled:
        return progress.problems()[0]
    if phase in ("Failed", "Queued", "Unknown") or (phase == "Pending" and status.reason):
        return _text(status.reason, status.message) or None
    return None
