"""Elastic jobs on this machine (--min-workers/--max-workers with the local backend):
`horovodrun` elastic over Gloo, each worker one "host" that horovodrun runs without ssh.

horovodrun starts a rank over ssh unless its host name resolves to an address of one of
this machine's interfaces (horovod/runner/gloo_run.py `_exec_command`:
`network.resolve_host_address(host)` in `network.get_local_host_addresses()`), and it tells
hosts apart by their names. So the workers are `localhost`, then this machine's IPv4
addresses (127.0.0.1 first): as many workers as names, each with its slots (one rank per
worker on CPU). The host discovery script lists the first N of them, N in JOBDIR/workers
(the size now, which `hvdk8s scale` changes); a worker whose rank dies is blacklisted by
horovodrun and the job goes on with the others while at least the minimum remain.

GPU jobs are refused: horovodrun gives the first rank of every host local rank 0, and
the ranks pin their GPU by local rank, so two workers would share a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

from launcher.errors import Timeout, UsageError
from mpijob.jobspec.spec import JobSpec

DISCOVERY = "discover_hosts.sh"
SIZE = "elastic-size"  # the workers the job should have now (hvdk8s scale writes it)
SCALED = "elastic-scaled.json"  # each size `hvdk8s scale` asked for, and when (for `get`)
PROC = Path("/proc")
# Loopback: every "host" is this machine, so Gloo's traffic stays on lo.
INTERFACE = "lo"


def local_addresses() -> list[str]:
    """This machine's IPv4 interface addresses, as horovodrun reads them (psutil, which
    Horovod requires), 127.0.0.1 first."""
    try:
        import psutil  # type: ignore[import-untyped]  # Horovod requires it; no stubs
    except ImportError:
        return ["127.0.0.1"]
    found = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family == socket.AF_INET}
    return sorted(found, key=lambda a: (a != "127.0.0.1", a))


def hosts() -> list[str]:
    """The names horovodrun runs here without ssh, each one worker."""
    addresses = local_addresses()
    try:
        localhost = socket.gethostbyname("localhost")
    except OSError:
        localhost = None
    return (["localhost"] if localhost in addresses else []) + addresses


def horovodrun(python: str) -> str | None:
    beside = Path(python).parent / "horovodrun"
    return str(beside) if beside.is_file() else shutil.which("horovodrun")


def check(spec: JobSpec, python: str) -> str:
    """The horovodrun to run, after refusing, in one line, what this machine cannot give."""
    if spec.gpus_per_worker:
        raise UsageError("--min-workers/--max-workers with --backend local: CPU workers only "
                         "(--gpus 0); horovodrun gives every local host's first rank local "
                         "rank 0, so two workers would share a GPU (use --backend kubernetes)")
    names = hosts()
    if spec.max_size > len(names):
        raise UsageError(f"--max-workers {spec.max_size}: this machine gives horovodrun "
                         f"{len(names)} local hosts ({', '.join(names)}), one per worker; "
                         f"give --max-workers {len(names)} or less")
    found = horovodrun(python)
    if found is None:
        raise UsageError("--min-workers/--max-workers: elastic jobs run under horovodrun, "
                         "which is not installed here (pip install horovod)")
    return found


def host_slots(spec: JobSpec) -> list[str]:
    """The `host:slots` lines of the most workers the job can have."""
    return [f"{h}:{spec.gpus_per_worker or 1}" for h in hosts()[:spec.max_size]]


def discovery_script(spec: JobSpec) -> str:
    lines = "".join(f"{line}\\n" for line in host_slots(spec))
    return ("#!/bin/sh\n"
            "# hvdk8s local elastic job: one host:slots line per worker horovodrun may run\n"
            f"# now, the first N of this machine's local hosts, N in ./{SIZE}.\n"
            f'n=$(cat "$(dirname "$0")/{SIZE}" 2>/dev/null || echo {spec.workers})\n'
            f"printf '{lines}' | head -n \"$n\"\n")


def write_files(job_dir: Path, spec: JobSpec) -> None:
    script = job_dir / DISCOVERY
    script.write_text(discovery_script(spec))
    script.chmod(0o755)
    (job_dir / SIZE).write_text(f"{spec.workers}\n")


def scale(job_dir: Path, workers: int) -> None:
    """The next discovery lists `workers` hosts (horovodrun adds or removes ranks), and the
    change is recorded for `get`."""
    history = [*scaled_history(job_dir), {"at": datetime.now(timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"), "workers": workers}]
    for name, text in ((SCALED, json.dumps(history)), (SIZE, f"{workers}\n")):
        tmp = job_dir / f".{name}.{os.getpid()}"
        tmp.write_text(text)
        os.replace(tmp, job_dir / name)


def scaled_history(job_dir: Path) -> list[dict]:
    try:
        value = json.loads((job_dir / SCALED).read_text())
    except (OSError, ValueError):
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def running_ranks(job_dir: Path) -> int:
    """The job's ranks alive now: its rank wrappers (`python -S rank.py JOBDIR ...`,
    launcher.backends.local.rank), which horovodrun starts and stops as workers join and
    leave."""
    count = 0
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        at = next((i for i, a in enumerate(argv) if a.endswith(b"/rank.py")), None)
        if state != "Z" and at is not None and argv[at + 1:at + 2] == [str(job_dir).encode()]:
            count += 1
    return count


def await_size(job_dir: Path, name: str, workers: int, slots: int, timeout: float,
               poll: float = 0.5) -> None:
    """Until the job runs `workers` workers' ranks; Timeout (exit 124) saying what it waits
    for: horovodrun changes the ranks only when the program's hvd.elastic loop next checks
    for host changes (a commit)."""
    deadline = time.monotonic() + timeout
    while (running := running_ranks(job_dir)) != workers * slots:
        if time.monotonic() >= deadline:
            raise Timeout(
                f"job {name}: asked for {workers} workers; {running} ranks running after "
                f"{timeout:g}s, waiting for horovodrun to {'add' if running < workers * slots else 'stop'} "
                "ranks at the program's next hvd.elastic commit (the built-in benchmark "
                "commits every --elastic-commit-every steps); the change stands")
        time.sleep(poll)


def size_lines(job_dir: Path, spec: dict, running: int | None) -> list[str]:
    """What `get` says of a local elastic job: its size now, and each size asked for."""
    start = int(spec.get("workers") or 1)
    low, high = int(spec.get("min_workers") or start), int(spec.get("max_workers") or start)
    slots = int(spec.get("gpus_per_worker") or 0) or 1
    now = (f"{running // slots} running" if running is not None else "ended")
    lines = [f"workers: {now} (elastic {low}..{high}, started with {start})"]
    lines += [f"  {s.get('at', '')} scaled to {s.get('workers')} workers (hvdk8s scale)"
              for s in scaled_history(job_dir)]
    return lines
