"""A PyTorch STAND-IN for the built-in TensorFlow benchmark: the same models on synthetic
ImageNet, for GPU machines without TensorFlow and Horovod. It is not the TensorFlow benchmark
(other kernels, other framework overheads): the GPU check labels its rows "pytorch stand-in".

Run under `hvdk8s submit` (one rank per GPU; ranks from Open MPI's or MPICH's environment):

    hvdk8s submit mpi --backend local -w 1 -g 1 --wait -- \\
        /opt/torch/.venv/bin/python benchmarks/gpu/torch_bench.py --model resnet50 --batch-size 64

What a step is: torchvision's model, synthetic 224 px images (299 for Inception V3) already on
the GPU, cross-entropy, SGD with momentum 0.9; `--precision fp32` leaves TF32 on (PyTorch's
default for cuDNN convolutions, and enabled here for matrix products, as TensorFlow does on
Ampere and later); `fp16` is automatic mixed precision (autocast to float16 + GradScaler) with
channels_last memory format. `cudnn.benchmark` picks the fastest convolution algorithms. With
several ranks, DistributedDataParallel allreduces the gradients over NCCL as Horovod would
(its bucketed allreduce overlaps the backward pass, like Horovod's Tensor Fusion).

Prints `total images/sec: N` (all ranks), the line hvdk8s reads, from rank 0.
"""

from __future__ import annotations

import argparse
import os
import time

MODELS = {"resnet50": "resnet50", "resnet101": "resnet101", "resnet152": "resnet152",
          "vgg16": "vgg16", "vgg19": "vgg19", "inception3": "inception_v3"}


def rank_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) from Open MPI's or MPICH's (Hydra's) environment."""
    for prefix in ("OMPI_COMM_WORLD_", "PMI_"):
        if prefix + "RANK" in os.environ:
            rank = int(os.environ[prefix + "RANK"])
            size = int(os.environ[prefix + "SIZE"])
            local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                       os.environ.get("MPI_LOCALRANKID", rank)))
            return rank, size, local
    return 0, 1, 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--num-warmup-batches", type=int, default=10)
    ap.add_argument("--num-batches", type=int, default=30)
    ap.add_argument("--port", type=int, default=29533, help="rank 0's rendezvous port")
    args = ap.parse_args(argv)

    import torch
    import torchvision

    rank, world, local = rank_env()
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}",
                                rank=rank, world_size=world)
    extra = {"aux_logits": False, "init_weights": False} if args.model == "inception3" else {}
    model = getattr(torchvision.models, MODELS[args.model])(weights=None, **extra).to(device)
    fp16 = args.precision == "fp16"
    fmt = torch.channels_last if fp16 else torch.contiguous_format
    model = model.to(memory_format=fmt)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    size = 299 if args.model == "inception3" else 224
    images = torch.randn(args.batch_size, 3, size, size, device=device).to(memory_format=fmt)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=fp16)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(args.num_warmup_batches):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.num_batches):
        step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    rate = torch.tensor([args.batch_size * args.num_batches / elapsed], device=device)
    if world > 1:
        torch.distributed.all_reduce(rate)
    if rank == 0:
        print(f"framework: pytorch {torch.__version__} stand-in, {args.model} {args.precision} "
              f"batch {args.batch_size} x {world} rank(s)")
        print(f"total images/sec: {rate.item():.2f}", flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
