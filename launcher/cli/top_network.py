"""`hvdk8s top node`: nodes grouped by NVLink partition, rack and block, with the free GPUs
of each group.

A multi-node job runs best under one rack's switch (mpijob.scheduling.network), so the question a
user asks before submitting one is which rack still has whole nodes free.
"""

from __future__ import annotations

from rich.table import Table


def group_rows(cluster) -> list[dict]:
    """One row per rack, then one per block (rack "*"), for nodes with a known position."""
    racks: dict[tuple, dict] = {}
    blocks: dict[tuple, dict] = {}
    for n in cluster.nodes:
        pos = n.network
        if not pos.known:
            continue
        for table, key, rack in ((racks, (pos.zone, pos.block, pos.rack), pos.rack),
                                 (blocks, (pos.zone, pos.block, None), "*")):
            if table is blocks and pos.block is None:
                continue
            if table is racks and pos.rack is None:
                continue
            row = table.setdefault(key, {"zone": pos.zone, "block": pos.block, "rack": rack,
                                         "nodes": 0, "gpus": 0, "free_gpus": 0,
                                         "idle_nodes": 0, "largest_free": 0})
            free = len(n.free_gpus) if n.ready else 0
            row["nodes"] += 1
            row["gpus"] += n.gpus
            row["free_gpus"] += free
            row["idle_nodes"] += 1 if n.ready and n.gpus and not n.allocated else 0
            row["largest_free"] = max(row["largest_free"], free)

    def order(row):
        return (str(row["zone"]), str(row["block"]), row["rack"] == "*", str(row["rack"]))

    return sorted([*racks.values(), *blocks.values()], key=order)


def print_groups(console, rows: list[dict], print_table) -> None:
    if not rows:
        return
    table = Table("ZONE", "BLOCK", "RACK", "NODES", "GPUS", "FREE GPUS", "IDLE NODES",
                  "LARGEST FREE ON A NODE", title="by network position")
    for r in rows:
        table.add_row(r["zone"] or "-", r["block"] or "-",
                      "(all racks)" if r["rack"] == "*" else r["rack"], str(r["nodes"]),
                      str(r["gpus"]), str(r["free_gpus"]), str(r["idle_nodes"]),
                      str(r["largest_free"]))
    print_table(console, table)


def partition_rows(cluster) -> list[dict]:
    """One row per multi-node NVLink partition (mpijob.scheduling.nvlink): a job that fits
    one runs at NVLink speed across its nodes."""
    parts: dict[str, dict] = {}
    for n in cluster.nodes:
        if not n.nvlink_domain:
            continue
        row = parts.setdefault(n.nvlink_domain, {"nvlink_domain": n.nvlink_domain, "nodes": 0,
                                                 "gpus": 0, "free_gpus": 0, "idle_nodes": 0})
        row["nodes"] += 1
        row["gpus"] += n.gpus
        row["free_gpus"] += len(n.free_gpus) if n.ready else 0
        row["idle_nodes"] += 1 if n.ready and n.gpus and not n.allocated else 0
    return [parts[k] for k in sorted(parts)]


def print_partitions(console, rows: list[dict], print_table) -> None:
    if not rows:
        return
    table = Table("NVLINK PARTITION", "NODES", "GPUS", "FREE GPUS", "IDLE NODES",
                  title="by NVLink partition")
    for r in rows:
        table.add_row(r["nvlink_domain"], str(r["nodes"]), str(r["gpus"]), str(r["free_gpus"]),
                      str(r["idle_nodes"]))
    print_table(console, table)
