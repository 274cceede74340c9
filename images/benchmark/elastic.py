"""The built-in benchmark, elastic: `hvd_cnn_bench.py --elastic` under `horovodrun` elastic
(https://horovod.readthedocs.io/en/stable/elastic_include.html).

The training loop runs inside `hvd.elastic.run`: the model, optimizer and step count are
a `TensorFlowKerasState`, committed every `--elastic_commit_every` steps. When a worker
is lost, Horovod raises in the next collective, the state rolls back to the last commit
and the loop goes on with the ranks left; when workers join, the next commit raises
`HostsUpdatedInterrupt` and they are synced in. Each stretch of steps at one size is a
phase; the benchmark says how many workers and ranks each phase had and its images/sec,
then the `total images/sec` over all of them (timed steps only, steps redone after a
rollback counted once, as they ran last).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

RESULT_PREFIX = "HVDK8S_RESULT "


def phase_rate(phase: dict, batch_size: int) -> float:
    """Images/sec of one phase: every rank's images over the phase's timed seconds."""
    seconds = phase["seconds"]
    return phase["steps"] * batch_size * phase["ranks"] / seconds if seconds > 0 else 0.0


def total_rate(phases: list[dict], batch_size: int) -> float:
    images = sum(p["steps"] * batch_size * p["ranks"] for p in phases)
    seconds = sum(p["seconds"] for p in phases)
    return images / seconds if seconds > 0 else 0.0


def phase_line(number: int, phase: dict, batch_size: int) -> str:
    return (f"elastic: phase {number}: {phase['workers']} workers ({phase['ranks']} ranks), "
            f"steps {phase['first_step']}-{phase['first_step'] + phase['steps'] - 1}: "
            f"{phase_rate(phase, batch_size):.2f} images/sec")


def run_elastic(args, *, tf, hvd, model, opt, make_step: Callable[[], Callable],
                local_step: Callable, next_batch: Callable[[], tuple],
                on_step: Callable[[int, float, float, int], None] | None = None) -> dict:
    """Warm-up then timed steps, elastic; returns the result rank 0 prints. `local_step`
    is a step without allreduce: one first makes the optimizer's variables, which Keras
    creates at the first step, so that a joining rank has the same ones to sync (Horovod's
    examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py does the same)."""
    def say(line: str) -> None:
        if hvd.rank() == 0:  # rank 0 of the ranks now, after any reset
            print(line, flush=True)

    total_steps = args.num_warmup_batches + args.num_batches
    local_step(*next_batch())  # its update is overwritten by rank 0's state at the sync
    state = hvd.elastic.TensorFlowKerasState(model, opt, step=0, phases=[])
    reset = {"count": 0}

    def on_reset() -> None:
        reset["count"] += 1
        say(f"elastic: reset {reset['count']}: now {hvd.cross_size()} workers "
            f"({hvd.size()} ranks); going on from the last commit, step {state.step}")

    state.register_reset_callbacks([on_reset])
    clock = time.perf_counter

    @hvd.elastic.run
    def train(state) -> float:
        step_fn = make_step()  # scales the loss by the world size of now
        workers, ranks = hvd.cross_size(), hvd.size()
        say(f"elastic: training on {workers} workers ({ranks} ranks) from step {state.step}")
        loss = 0.0
        phase: dict | None = None
        while state.step < total_steps:
            images, labels = next_batch()
            t0 = clock()
            loss_tensor, computed = step_fn(images, labels)
            loss = float(loss_tensor.numpy())
            seconds = clock() - t0
            state.step += 1
            if state.step > args.num_warmup_batches:
                if on_step is not None:  # progress reports: (timed step, wall, compute, ranks)
                    on_step(state.step - args.num_warmup_batches, seconds,
                            float(computed.numpy()), ranks)
                if phase is None:
                    phase = {"workers": workers, "ranks": ranks, "first_step":
                             state.step - args.num_warmup_batches, "steps": 0, "seconds": 0.0}
                    state.phases = [*state.phases, phase]
                phase["steps"] += 1
                phase["seconds"] += seconds
            if state.step % args.elastic_commit_every == 0 or state.step == total_steps:
                state.commit()
                # The commit keeps these dicts: go on counting in copies, so that a rollback
                # to it forgets the steps it undoes.
                state.phases = [dict(p) for p in state.phases]
                phase = state.phases[-1] if phase is not None else None
        return loss

    loss = train(state)
    phases = [p for p in state.phases if p["steps"]]
    for number, phase in enumerate(phases, 1):
        say(phase_line(number, phase, args.batch_size))
    total = total_rate(phases, args.batch_size)
    say("----------------------------------------------------------------")
    say(f"total images/sec: {total:.2f}")
    say("----------------------------------------------------------------")
    result = {
        "model": args.model, "batch_size": args.batch_size, "image_size": args.image_size,
        "num_batches": args.num_batches, "num_warmup_batches": args.num_warmup_batches,
        "device": args.device, "elastic": True, "world_size": hvd.size(),
        "total_images_per_sec": total, "final_loss": loss, "resets": reset["count"],
        "phases": [{**p, "images_per_sec": phase_rate(p, args.batch_size)} for p in phases],
    }
    say(RESULT_PREFIX + json.dumps(result, sort_keys=True))
    return result
