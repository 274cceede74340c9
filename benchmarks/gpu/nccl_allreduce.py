"""NCCL all-reduce bus bandwidth between this machine's GPUs, through PyTorch's NCCL binding
(nccl-tests' all_reduce_perf is rarely installed; this measures the same quantity).

Run under `hvdk8s submit` with one rank per GPU:

    hvdk8s submit mpi --backend local -w 1 -g 2 --wait -- \\
        /opt/torch/.venv/bin/python benchmarks/gpu/nccl_allreduce.py

Bus bandwidth as nccl-tests defines it (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
algbw = bytes / time, busbw = algbw x 2(n-1)/n for all-reduce, the rate each link must carry,
comparable across GPU counts and with a link's bandwidth. Rank 0 prints one line per size:
`HVDK8S_NCCL {"bytes": ..., "ranks": n, "seconds": ..., "busbw_gbs": ...}`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_bench import rank_env  # noqa: E402

PREFIX = "HVDK8S_NCCL "
SIZES = (1 << 20, 8 << 20, 64 << 20, 256 << 20)


def bus_bandwidth_gbs(nbytes: int, ranks: int, seconds: float) -> float:
    return nbytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--port", type=int, default=29534)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    rank, world, local = rank_env()
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=world)
    for nbytes in SIZES:
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iterations):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / args.iterations
        if rank == 0:
            print(PREFIX + json.dumps({"bytes": nbytes, "ranks": world, "seconds": seconds,
                                       "busbw_gbs": bus_bandwidth_gbs(nbytes, world, seconds)}),
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
