"""mpijob.scheduling.gpu_view: the per-pod allocated-vs-planned GPU view."""

from mpijob.scheduling.gpu_view import SOURCE_AGENT, agent_reports, allocation_view


def test_reported_gpus_win_and_a_difference_is_said():
    reports = agent_reports("ml", {"n0": ["j-worker-0", "j-worker-1"]},
                            {"n0": {"ml/j-worker-0": [3, 2], "other/j-worker-1": [0]}})
    view = allocation_view([("j-worker-0", "n0", (0, 1)), ("j-worker-1", "n0", (4, 5))],
                           reports)
    w0, w1 = view
    assert (w0.allocated, w0.held, w0.source, w0.differs) == ((2, 3), (2, 3), SOURCE_AGENT, True)
    assert "allocated GPUs 2,3" in w0.describe() and "planned 0,1" in w0.describe()
    # Another namespace's pod of the same name is not this one: the plan stands, unconfirmed.
    assert (w1.known, w1.held, w1.describe()) == (False, (4, 5), None)
    assert w0.to_json()["differs"] is True and w1.to_json()["allocated"] is None


def test_same_gpus_in_another_order_do_not_differ():
    (v,) = allocation_view([("p", "n", (0, 1))], {"p": ((1, 0), SOURCE_AGENT)})
    assert not v.differs and v.describe() is None
