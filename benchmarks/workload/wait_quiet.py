#!/usr/bin/env python3
"""Block until the machine is idle, so a throughput run is not sharing its cores.

CPU benchmarks on a shared machine are dominated by whatever else runs: this waits until
the whole machine has been at least --idle (default 90%) idle over a --window second
sample, for at most --timeout seconds, and says on stderr if it gave up.
"""

from __future__ import annotations

import argparse
import sys
import time


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return idle, sum(fields[:8])  # guest time is already counted in user


def idle_fraction(window: float) -> float:
    idle0, total0 = _cpu_times()
    time.sleep(window)
    idle1, total1 = _cpu_times()
    return (idle1 - idle0) / max(1, total1 - total0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--idle", type=float, default=0.9)
    p.add_argument("--window", type=float, default=3.0)
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args()
    deadline = time.monotonic() + args.timeout
    while True:
        frac = idle_fraction(args.window)
        if frac >= args.idle:
            return 0
        if time.monotonic() > deadline:
            print(f"wait_quiet: machine still busy ({frac:.0%} idle), running anyway",
                  file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
