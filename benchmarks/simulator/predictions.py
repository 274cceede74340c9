"""Print the throughput model's predictions for the scenarios quoted in README.md.

    .venv/bin/python benchmarks/simulator/predictions.py
"""

from __future__ import annotations

from mpijob.perf.perfmodel import predict
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.placement import NodeAssignment, Placement, PlacementRequest, place
from mpijob.scheduling.presets import preset

V100 = "Tesla-V100-SXM2-16GB"


def nodes(count, topology, model, gbps, **kw):
    topo = preset(topology)
    return tuple(Node(name=f"{topology}-{i}", gpus=topo.gpus, topology=topo, gpu_model=model,
                      network_gbps=gbps, **kw) for i in range(count))


def row(label, model, placement, cluster, precision="fp32", batch=64):
    p = predict(model=model, batch_size=batch, precision=precision, placement=placement,
                cluster=cluster)
    print(f"| {label} | {model} {precision} | {p.images_per_sec:,.0f} | {p.scaling_efficiency:.0%} "
          f"| {p.compute_seconds * 1e3:,.0f} | {p.allreduce_seconds * 1e3:,.1f} | "
          f"{p.algorithm.split(' (')[0]} | {p.bottleneck} |")
    return p


def main() -> None:
    print("| scenario | model | images/s | efficiency | compute ms | allreduce ms | algorithm | bottleneck |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    two = Cluster(nodes(2, "dgx1-v100", V100, 10))
    req = PlacementRequest(workers=4, gpus_per_worker=1)
    topo, spread = place(two, req, "topology"), place(two, req, "spread")
    for model in ("vgg16", "resnet50"):
        row("2x DGX-1 V100, 10 GbE, 4x1 GPU, topology (NVLink quad, 1 pod)", model, topo, two)
        row("same, spread (2+2 single-GPU pods)", model, spread, two)
    full = Placement(True, "topology", tuple(NodeAssignment(n.name, tuple(range(8)), 8)
                                             for n in two.nodes))
    row("2x DGX-1 V100, 10 GbE, 16 GPUs", "vgg16", full, two)
    rdma = {"feature.node.kubernetes.io/rdma.available": "true"}
    a100 = Cluster(nodes(2, "dgx-a100", "NVIDIA-A100-SXM4-80GB", 100, labels=rdma))
    full = Placement(True, "topology", tuple(NodeAssignment(n.name, tuple(range(8)), 8)
                                             for n in a100.nodes))
    row("2x DGX A100, 100 Gb RoCE, 16 GPUs", "vgg16", full, a100, "fp16")
    p100 = Cluster(nodes(32, "pcie-4", "Tesla-P100-PCIE-16GB", 25))
    pods = Placement(True, "topology", tuple(NodeAssignment(n.name, (0, 1, 2, 3), 4)
                                             for n in p100.nodes))
    for model in ("inception3", "resnet101", "vgg16"):
        row("32 nodes x 4 P100 PCIe, 25 GbE TCP (128 GPUs)", model, pods, p100)


if __name__ == "__main__":
    main()
