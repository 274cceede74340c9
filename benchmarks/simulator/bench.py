"""Time the simulator: N jobs on the default mixed cluster, each policy, several seeds.

    .venv/bin/python benchmarks/simulator/bench.py [--nodes 500] [--jobs 10000] [--seeds 0 1 2]
        [--precision fp32] [--profile]

Prints wall time and placement calls per policy and seed (the figures in README.md).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from mpijob.perf import perfmodel
from mpijob.perf.simulate import simulate
from mpijob.perf.simworkload import default_cluster, generate_jobs

POLICIES = ("topology", "binpack", "spread")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--profile", action="store_true", help="cProfile the first seed's spread run")
    args = ap.parse_args()

    cluster = default_cluster(args.nodes)
    print(f"{args.jobs} jobs, {args.nodes} nodes, {args.precision}")
    print(f"{'seed':>4} {'policy':>9} {'wall s':>7} {'place calls':>11} {'JCT mean h':>10} "
          f"{'img/s/GPU':>9}")
    for seed in args.seeds:
        jobs = generate_jobs(args.jobs, seed=seed, cluster=cluster, precision=args.precision)
        total = 0.0
        for policy in POLICIES:
            perfmodel._single_gpu.cache_clear()  # each run pays its own model lookups
            perfmodel._pod_ring.cache_clear()
            started = time.perf_counter()
            if args.profile and seed == args.seeds[0] and policy == "spread":
                prof = cProfile.Profile()
                result = prof.runcall(simulate, cluster, jobs, policy, precision=args.precision)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
            else:
                result = simulate(cluster, jobs, policy, precision=args.precision)
            wall = time.perf_counter() - started
            total += wall
            s = result.summary
            print(f"{seed:>4} {policy:>9} {wall:>7.1f} {s.place_calls:>11,} "
                  f"{s.mean_jct_s / 3600:>10.2f} {s.mean_images_per_sec_per_gpu:>9.1f}")
        print(f"{seed:>4} {'all three':>9} {total:>7.1f}")


if __name__ == "__main__":
    main()
