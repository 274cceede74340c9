#!/usr/bin/env python3
"""CPU seconds per training image of a benchmark command, robust to a shared machine.

Wall-clock images/sec on a machine that other jobs also use varies by tens of percent
from run to run. CPU time spent by the benchmark's own processes varies much less, so
this runs the same command twice, with --num_batches=SHORT and --num_batches=LONG, and
divides the difference in CPU time (user + system of all child processes: every rank,
mpirun, Horovod's threads, MPI busy-polling included) by the difference in images.
Start-up, graph building and warm-up cancel out. On an otherwise idle machine,
cores / (CPU seconds per image) is the throughput the program would reach if it kept
every core busy with useful work.

Usage: cpu_cost.py --images-per-step N [--short 3 --long 13] -- COMMAND... (COMMAND must
not contain --num_batches; it is appended).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys


def cpu_seconds_of(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--images-per-step", type=int, required=True,
                   help="batch size per rank x ranks")
    p.add_argument("--short", type=int, default=3)
    p.add_argument("--long", type=int, default=13)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    short = cpu_seconds_of(cmd + [f"--num_batches={args.short}"])
    long = cpu_seconds_of(cmd + [f"--num_batches={args.long}"])
    per_image = (long - short) / ((args.long - args.short) * args.images_per_step)
    print(f"cpu_s_per_image {per_image:.4f} (short {short:.1f} s, long {long:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
