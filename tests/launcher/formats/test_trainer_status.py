"""A TrainJob's status.trainerStatus read as progress (launcher/formats/trainer_status.py),
from what hvdk8s's poster sends and from what another program may post."""

from __future__ import annotations

import datetime

from launcher.formats.trainer_status import progress_from_trainer_status
from tests.mpijob.k8s.test_trainer_status_poster import poster_module

POSTED = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _root(trainer_status: dict | None) -> dict:
    return {"status": {"trainerStatus": trainer_status} if trainer_status else {}}


def test_what_the_poster_sends_reads_back_as_the_same_figures():
    body = poster_module.status_body(30, 120, 412.5, 80.2, now=POSTED)
    p = progress_from_trainer_status(_root(body["trainerStatus"]), POSTED.timestamp() + 7,
                                     predicted_images_per_sec=500.0)
    assert (p.step, p.total_steps, p.images_per_sec, p.eta_seconds) == (30, 120, 412.5, 80.0)
    assert p.last_step_age == 7.0 and p.source == "trainerStatus"
    assert p.line().startswith("step 30/120  images/sec 412.5 (predicted 500.0, 0.82x)  ETA 1m20s")
    assert p.stalled is False and p.stragglers == []  # it cannot tell: no heartbeat, no rank


def test_a_percentage_alone_is_shown_as_one_not_as_a_step():
    p = progress_from_trainer_status(_root({"progressPercentage": 45,
                                            "lastUpdatedTime": "2026-11-28T12:00:00Z"}),
                                     POSTED.timestamp())
    assert p.line().startswith("45% done  ")
    assert p.images_per_sec is None and p.eta_seconds is None


def test_no_trainer_status_or_one_without_figures_is_no_progress():
    assert progress_from_trainer_status(_root(None), 0.0) is None
    assert progress_from_trainer_status(None, 0.0) is None
    assert progress_from_trainer_status(_root({"metrics": [{"name": "loss", "value": "0.2"}],
                                               "lastUpdatedTime": "2026-11-28T12:00:00Z"}),
                                        0.0) is None
