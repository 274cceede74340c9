from launcher.formats.job_progress import (
    STALL_HEARTBEATS,
    STALL_STEPS,
    STRAGGLER_RATIO,
    summarize,
)

T0 = 1_000_000.0


def progress(rank, when, step, *, rate=None, avg=None, compute=None, step_time=None,
             warmup=False, total=60, per_step=16):
    r = {"kind": "progress", "rank": rank, "time": T0 + when, "step": step,
         "total_steps": total, "warmup": warmup, "images_per_step": per_step}
    for key, value in (("images_per_sec", rate), ("images_per_sec_avg", avg),
                       ("compute_time", compute), ("step_time", step_time)):
        if value is not None:
            r[key] = value
    return r


def beat(rank, when, step, every=2.0):
    return {"kind": "heartbeat", "rank": rank, "time": T0 + when, "step": step, "every": every}


def test_step_rate_eta_and_ratio_from_the_latest_reports():
    reports = [progress(0, 5, 10, rate=7.0, avg=7.0, compute=1.0),
               progress(1, 5, 10, rate=9.0, avg=9.0, compute=1.0),
               progress(0, 10, 20, rate=8.0, avg=7.5, compute=1.0),
               progress(1, 10, 20, rate=8.0, avg=8.5, compute=1.0),
               progress(0, 9, 99, warmup=True, step_time=1.0, total=60) | {"kind": "preflight"}]
    p = summarize(reports, T0 + 11, predicted_images_per_sec=10.0)
    assert (p.step, p.total_steps, p.images_per_sec, p.images_per_sec_avg) == (20, 60, 8.0, 8.0)
    assert p.ratio == 0.8
    assert p.eta_seconds == 40 * 16 / 8.0  # steps left x images per step / rate now
    assert p.last_step_age == 1.0 and not p.stalled and p.stragglers == []
    assert p.line() == ("step 20/60  images/sec 8.0 (predicted 10.0, 0.80x)  ETA 1m20s  "
                        "last step 1s ago")


def test_no_progress_report_is_no_progress():
    assert summarize([beat(0, 1, 0)], T0 + 2) is None


def test_a_stall_names_the_rank_whose_heartbeats_ceased():
    # 1 s steps: a stall after max(3 x 1 s, 3 heartbeats of 2 s) = 6 s without a new step.
    reports = [progress(r, 4, 4, rate=16.0, avg=16.0, compute=0.9) for r in (0, 1, 2)]
    reports += [beat(0, t, 4) for t in (6, 8, 10, 12)] + [beat(2, t, 4) for t in (6, 8, 10, 12)]
    reports += [beat(1, 5, 4)]  # rank 1 stopped beating at 5 s
    before = summarize(reports, T0 + 9, ranks=3)
    assert not before.stalled
    p = summarize(reports, T0 + 12, ranks=3)
    assert p.stall_after == max(STALL_STEPS * 1.0, STALL_HEARTBEATS * 2.0)
    assert p.stalled and p.silent_ranks == [1]
    assert p.problems()[0] == "stalled: no step for 8s (threshold 6s); not reporting: rank 1"
    assert "ETA" not in p.line()


def test_the_expected_step_time_is_measured_else_the_warmup_else_the_prediction():
    measured = summarize([progress(0, 1, 5, rate=4.0, avg=4.0)], T0 + 1)
    assert measured.expected_step_time == 16 / 4.0
    warm = summarize([progress(0, 1, 0, warmup=True, step_time=3.0)], T0 + 1)
    assert warm.expected_step_time == 3.0 and warm.warmup
    predicted = summarize([progress(0, 1, 0, warmup=True)], T0 + 1, predicted_images_per_sec=2.0)
    assert predicted.expected_step_time == 8.0
    # 20 s steps: 3 steps = 60 s without a step before it is a stall, not 6 s of heartbeats
    slow = summarize([progress(0, 1, 0, warmup=True, step_time=20.0), beat(0, 50, 0)], T0 + 55)
    assert slow.stall_after == 60.0 and not slow.stalled


def test_an_ended_or_finished_job_is_not_stalled():
    reports = [progress(0, 1, 60, rate=8.0, avg=8.0, total=60)]
    assert not summarize(reports, T0 + 500).stalled
    assert not summarize([progress(0, 1, 30, rate=8.0, avg=8.0)], T0 + 500, running=False).stalled


def test_a_rank_persistently_slower_to_compute_is_a_straggler():
    slow = STRAGGLER_RATIO * 1.2
    reports = []
    for i, when in enumerate((5, 10, 15)):
        for rank in (0, 1, 2, 3):
            reports.append(progress(rank, when, 10 * (i + 1), rate=8.0, avg=8.0,
                                    compute=slow if rank == 2 else 1.0))
    (s,) = summarize(reports, T0 + 16).stragglers
    assert (s.rank, s.compute_time, s.median) == (2, slow, 1.0)
    assert summarize(reports, T0 + 16).problems() == [
        "straggler: rank 2 computes 1.5s per step against the other ranks' median 1s (1.50x)"]
    # once fast again in one of its last reports: not persistent, not named
    reports.append(progress(2, 20, 40, rate=8.0, avg=8.0, compute=1.0))
    assert summarize(reports, T0 + 21).stragglers == []


def test_of_two_ranks_the_slow_one_is_measured_against_the_other():
    reports = [progress(rank, when, 10 * i, rate=8.0, avg=8.0, compute=1.6 if rank else 1.0)
               for i, when in enumerate((5, 10, 15), 1) for rank in (0, 1)]
    (s,) = summarize(reports, T0 + 16).stragglers
    assert (s.rank, s.median) == (1, 1.0)


def test_the_warmup_is_no_stall_its_end_counts_as_a_step():
    # heartbeats at step 0 from the start (TensorFlow's start, tracing, 10 warm-up steps of
    # 1.6 s), then the warm-up's report: the last step was then, not at the first heartbeat
    reports = [beat(r, t, 0) for t in range(0, 40, 2) for r in (0, 1)]
    reports += [progress(r, 40, 0, warmup=True, step_time=1.6) for r in (0, 1)]
    p = summarize(reports, T0 + 41, ranks=2)
    assert p.warmup and p.last_step_age == 1.0 and not p.stalled
