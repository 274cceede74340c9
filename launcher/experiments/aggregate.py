"""From run records to the figures people compare: means over repetitions, scaling
efficiency against this experiment's own single-GPU (or single-rank) runs, placement
policies side by side. Pure functions over the record dicts of `results.py`.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from mpijob.phases import JobPhase

SUCCEEDED = JobPhase.SUCCEEDED.value

# A matrix point, as the report groups repetitions (the record's columns).
POINT_KEYS = ("model", "workers", "gpus", "placement", "batch_size", "precision", "image_size",
              "num_batches", "num_warmup_batches", "xla", "backend", "data")
# What must match for one run to be another's single-GPU baseline: the same work per rank.
WORKLOAD_KEYS = ("model", "batch_size", "precision", "image_size", "num_batches",
                 "num_warmup_batches", "xla", "backend", "data")


def ranks(record: dict) -> int:
    """GPUs in the job; on the CPU (gpus 0) one rank per worker."""
    workers = int(record.get("workers") or 0)
    gpus = int(record.get("gpus") or 0)
    return workers * gpus if gpus else workers


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _get(record: dict, key: str):
    value = record.get(key)
    return "synthetic" if key == "data" and value is None else value  # rows from before


def workload_key(record: dict) -> tuple:
    return (*(_get(record, k) for k in WORKLOAD_KEYS), "gpu" if record.get("gpus") else "cpu")


def point_key(record: dict) -> tuple:
    return tuple(_get(record, k) for k in POINT_KEYS)


def single_rank_baselines(records: Iterable[dict]) -> dict[tuple, float]:
    """Mean measured images/sec of the succeeded one-GPU (one-rank) runs, per workload."""
    found: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        value = _number(r.get("images_per_sec"))
        if r.get("status") == SUCCEEDED and ranks(r) == 1 and value:
            found[workload_key(r)].append(value)
    return {k: statistics.fmean(v) for k, v in found.items()}


def efficiency(record: dict, baselines: dict[tuple, float]) -> tuple[float | None, str | None]:
    """(scaling efficiency, where it comes from).

    measured / (GPUs x this experiment's single-GPU measurement) when the experiment has
    one ("measured"); else the performance model's predicted efficiency ("predicted");
    else none.
    """
    measured = _number(record.get("images_per_sec"))
    if record.get("status") != SUCCEEDED or measured is None:
        return None, None
    baseline = baselines.get(workload_key(record))
    if baseline:
        return measured / (ranks(record) * baseline), "measured"
    predicted = _number(record.get("predicted_scaling_efficiency"))
    if predicted is not None:
        return predicted, "predicted"
    return None, None


def with_efficiency(records: list[dict]) -> list[dict]:
    """Copies of the records with efficiency recomputed from all of them (the runner could
    only use the runs recorded before each one)."""
    baselines = single_rank_baselines(records)
    out = []
    for r in records:
        value, source = efficiency(r, baselines)
        out.append({**r, "scaling_efficiency": value, "efficiency_source": source})
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(records: list[dict]) -> list[dict]:
    """One row per matrix point: runs, successes, mean and spread over repetitions."""
    records = with_efficiency(records)
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(point_key(r), []).append(r)
    rows = []
    for key, group in groups.items():
        ok = [r for r in group if r.get("status") == SUCCEEDED]
        measured = [v for r in ok if (v := _number(r.get("images_per_sec"))) is not None]
        predicted = [v for r in group if (v := _number(r.get("predicted_images_per_sec"))) is not None]
        effs = [r["scaling_efficiency"] for r in ok if r.get("scaling_efficiency") is not None]
        sources = {r["efficiency_source"] for r in ok if r.get("efficiency_source")}
        predicted_eff = [v for r in group
                         if (v := _number(r.get("predicted_scaling_efficiency"))) is not None]
        statuses: dict[str, int] = defaultdict(int)
        for r in group:
            statuses[str(r.get("status"))] += 1
        failures = [r for r in group if r.get("status") != SUCCEEDED]
        mean = _mean(measured)
        mean_predicted = _mean(predicted)
        rows.append({
            **dict(zip(POINT_KEYS, key, strict=True)),
            "ranks": ranks(group[0]),
            "runs": len(group),
            "succeeded": len(ok),
            "statuses": dict(statuses),
            "images_per_sec": mean,
            "images_per_sec_std": statistics.stdev(measured) if len(measured) > 1 else None,
            "predicted_images_per_sec": mean_predicted,
            "measured_over_predicted": (mean / mean_predicted
                                        if mean is not None and mean_predicted else None),
            "scaling_efficiency": _mean(effs),
            "efficiency_source": "/".join(sorted(sources)) or None,
            "predicted_scaling_efficiency": _mean(predicted_eff),
            "last_failure": failures[-1].get("reason") if failures else None,
            "input_wait_share": _mean([v for r in ok
                                       if (v := _number(r.get("input_wait_share"))) is not None]),
        })
    return rows


def data_comparison(rows: list[dict]) -> list[dict]:
    """Matrix points that differ only by input, synthetic next to real: the gap is what
    the input pipeline costs (tf_cnn_benchmarks users compare the two to find jobs bound
    by their input)."""
    groups: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        if row["images_per_sec"] is None:
            continue
        key = tuple(row[k] for k in POINT_KEYS if k != "data")
        groups.setdefault(key, {})[row["data"]] = row
    out = []
    for key, by_data in groups.items():
        synthetic, real = by_data.get("synthetic"), by_data.get("imagenet")
        if synthetic is None or real is None:
            continue
        fields = dict(zip([k for k in POINT_KEYS if k != "data"], key, strict=True))
        out.append({**fields, "synthetic_images_per_sec": synthetic["images_per_sec"],
                    "real_images_per_sec": real["images_per_sec"],
                    "real_over_synthetic": real["images_per_sec"] / synthetic["images_per_sec"],
                    "real_input_wait_share": real["input_wait_share"]})
    return out


def placement_comparison(rows: list[dict]) -> list[dict]:
    """Matrix points that differ only by placement policy, side by side, with the
    topology-aware policy's throughput relative to each other policy."""
    groups: dict[tuple, dict[str, float]] = {}
    for row in rows:
        if row["images_per_sec"] is None:
            continue
        key = tuple(row[k] for k in POINT_KEYS if k != "placement")
        groups.setdefault(key, {})[row["placement"]] = row["images_per_sec"]
    out = []
    for key, by_policy in groups.items():
        if len(by_policy) < 2:
            continue
        topo = by_policy.get("topology")
        gains = ({p: topo / v for p, v in by_policy.items() if p != "topology" and v}
                 if topo is not None else {})
        fields = dict(zip([k for k in POINT_KEYS if k != "placement"], key, strict=True))
        out.append({**fields, "images_per_sec_by_placement": by_policy,
                    "topology_speedup": gains})
    return out
