"""How much of a step's gradient allreduce Horovod hides behind the backward pass.

Horovod's background thread wakes every cycle (HOROVOD_CYCLE_TIME), negotiates which
gradients every rank has ready, packs them into fusion buffers (HOROVOD_FUSION_THRESHOLD)
and allreduces the buffers one after another (docs/tensor-fusion.rst). Gradients become
ready in backward order: the last layers' first (mpijob.perf.perfdata.GRADIENT_PROFILES).

The allreduce stream is a single FIFO server, so it finishes at

    end = max over groups j of  ready_j + cycle/2 + ops_j * (latency + negotiation)
                                + bytes_from_j_on * seconds_per_byte

(a FIFO queue's departure time: the latest "arrival + all work queued from then on").
`ops_j`, the number of fused allreduces that carry the gradients from group j on, is one
per cycle while gradients keep arriving and the stream has time to spare (the time left
after moving the bytes), where a cycle lasts the configured cycle time or, when one
allreduce's latency is longer, that long (the thread starts the next cycle at once, and
everything that arrived meanwhile is fused together); at least one per fusion buffer, at
most one per tensor. It is kept continuous (no rounding) so that a faster link or a shorter
latency never predicts a later end. Half a cycle is the expected wait from a gradient's
readiness to the next cycle.

The part of `end` after the backward pass is over is exposed: the step waits for it. What
is hidden is what the stream moved while backprop still ran, so it is never more than the
backward pass lasts: exposed >= busy - backward (every gradient is ready after the forward
pass, so the FIFO bound already gives it; `schedule` keeps it explicit, and
tests/mpijob/perf/test_perfmodel_properties.py checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Overlap:
    end_s: float  # when the last allreduce ends, from the start of the step
    exposed_s: float  # of which after the backward pass ended
    busy_s: float  # allreduce time in all: bytes plus per-allreduce latency
    ops: float  # fused allreduces per step (continuous estimate)


def schedule(*, forward_s: float, backward_s: float,
             profile: Sequence[tuple[float, int, int]], bytes_per_param: int,
             seconds_per_byte: float, op_latency_s: float, negotiate_s: float,
             cycle_s: float, fusion_bytes: int) -> Overlap:
    """The allreduce timeline of one step (see the module docstring)."""
    if not profile:
        return Overlap(forward_s + backward_s, 0.0, 0.0, 0.0)
    backward_end = forward_s + backward_s
    per_op = op_latency_s + negotiate_s
    cycle = max(cycle_s, per_op)
    last_ready = forward_s + profile[-1][0] * backward_s
    remaining_bytes = sum(params for _, params, _ in profile) * bytes_per_param
    remaining_tensors = sum(tensors for _, _, tensors in profile)
    end = 0.0
    first_ops = None
    for frac, params, tensors in profile:
        ready = forward_s + frac * backward_s
        # Cycles happen only in the time the stream is not moving bytes: a busy stream fuses.
        slack = max(0.0, last_ready - ready - remaining_bytes * seconds_per_byte)
        by_cycles = slack / cycle + 1 if cycle > 0 else remaining_tensors
        by_buffers = remaining_bytes / fusion_bytes if fusion_bytes > 0 else remaining_tensors
        ops = min(float(remaining_tensors), max(by_cycles, by_buffers, 1.0))
        if first_ops is None:
            first_ops = ops
        end = max(end, ready + cycle_s / 2 + ops * per_op + remaining_bytes * seconds_per_byte)
        remaining_bytes -= params * bytes_per_param
        remaining_tensors -= tensors
    assert first_ops is not None  # the profile is not empty
    total_bytes = sum(params for _, params, _ in profile) * bytes_per_param
    busy = first_ops * per_op + total_bytes * seconds_per_byte
    exposed = max(0.0, end - backward_end, busy - backward_s)
    return Overlap(max(end, backward_end + exposed), exposed, busy, first_ops)
