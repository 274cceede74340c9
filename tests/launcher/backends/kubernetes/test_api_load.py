"""What `wait`, `get` and friends cost the API server, counted on the test API server."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from launcher.backends.kubernetes import watching
from launcher.backends.kubernetes.client import ApiError
from launcher.errors import Timeout
from mpijob.jobspec.spec import build_spec
from tests.launcher.backends.contract_calls import create_job

# The production watch runs 300-600 s (watching.WATCH_TIMEOUT_SECONDS); the tests run it for
# 1 s, so one second of test time stands for SCALE seconds of a real wait.
SCALE = watching.WATCH_TIMEOUT_SECONDS


def make_spec(k8s, name="vgg16", **fields):
    fields.setdefault("command", ("python", "train.py"))
    return build_spec(name=name, namespace=k8s.namespace, image=k8s.image, **fields)


def running_job(k8s, name="vgg16"):
    srv = k8s.server()
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, name, workers=1), None, schedule_timeout=20)
    srv.wait_for(lambda: backend.get(name).phase == "Running")
    return srv, backend


# Requests counted over windows of real time (the client's waits and watch timeouts): slow.
@pytest.mark.slow
def test_wait_on_a_running_job_lists_nothing_while_its_watches_are_healthy(k8s, api_requests):
    srv, backend = running_job(k8s)
    backend.watch_timeout = 1
    api_requests.mark()
    window = 6.0
    with pytest.raises(Timeout):
        backend.wait("vgg16", timeout=window)
    requests = api_requests.since()
    kinds = [api_requests.kind(r) for r in requests]
    # Start-up: one list per watched kind (pods, Jobs; MPIJobs are not served here), then
    # watches only, each resumed where the last one ended.
    first_watch = kinds.index("watch")
    assert kinds[:first_watch] == ["list", "list"]
    # and no read of the launcher's log: its readiness probe passes (its monitor sees no
    # stall), which the pod watch carries (stallcheck.py)
    logs = [r for r in requests if r.path.endswith("/log")]
    assert logs == []
    steady = [r for r in requests[first_watch:] if r not in logs]
    assert {api_requests.kind(r) for r in steady} == {"watch"}
    assert all(r.query.get("allowWatchBookmarks") == "true" for r in steady)
    assert all(r.query.get("resourceVersion") for r in steady)
    per_minute = len(steady) / (window * SCALE / 60)
    assert per_minute <= 6, f"{len(steady)} requests in {window * SCALE / 60:g} simulated minutes"


def test_wait_polls_with_backoff_after_repeated_watch_failures(k8s, monkeypatch, capsys):
    k8s.server()
    backend = k8s.backend()
    monkeypatch.setenv("HVDK8S_DEBUG", "1")
    monkeypatch.setattr(watching, "RETRY_BACKOFF", (0.01, 0.01))
    monkeypatch.setattr(watching, "POLL_BACKOFF", (0.05, 0.2))
    k8s.script_launcher("vgg16", [(1.0, "total images/sec: 12.5")])
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)

    def refused(*a, **kw):
        raise ApiError(500, "InternalError", "watch refused by a proxy", verb="watch",
                       resource="pods")

    monkeypatch.setattr(backend.client, "watch", refused)
    status = backend.wait("vgg16", timeout=30)
    assert status.phase == "Succeeded" and status.images_per_sec == 12.5
    err = capsys.readouterr().err
    assert "watch on pods failed (watch refused by a proxy), 3 in a row" in err
    assert "watches on pods keep failing: polling instead" in err


def test_get_watch_prints_each_change_until_the_job_ends_without_polling(k8s, api_requests):
    from typer.testing import CliRunner

    from launcher.cli.app import app

    k8s.server()
    backend = k8s.backend()
    k8s.script_launcher("vgg16", [(1.5, "total images/sec: 9.0")])
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    api_requests.mark()
    result = CliRunner().invoke(app, ["get", "vgg16", "-w", *k8s.cli_args()])
    assert result.exit_code == 0, result.output
    assert "vgg16  Running" in result.stdout
    assert "total images/sec: 9.00" in result.stdout  # the final status, in full
    # one list per watched kind to start, and the final `get`'s pod list: nothing polled
    assert api_requests.count("list") == 3


@pytest.mark.slow
def test_a_hundred_concurrent_waits_cost_the_api_server_one_kubectl_wait_each(k8s, api_requests):
    """100 users waiting on running jobs at once (threads here, each with its own client as
    each `hvdk8s wait` has): start-up is one list per watched kind and discovery, then each
    waiter costs the API server only its watches, resumed every 5-10 (simulated) minutes,
    at most the 6 requests a minute of a `kubectl wait`; none relists or falls back to
    polling under the load of the others."""
    srv = k8s.server()
    creator = k8s.backend()
    jobs = ("vgg16", "resnet50")
    for name in jobs:
        create_job(creator, make_spec(k8s, name, workers=1), None, schedule_timeout=20)
    srv.wait_for(lambda: all(creator.get(n).phase == "Running" for n in jobs), timeout=60)
    waiters = [k8s.backend() for _ in range(100)]
    for backend in waiters:
        backend.watch_timeout = 2
    window = 10.0
    outcomes: list = []

    def wait(backend, name):
        try:
            backend.wait(name, timeout=window)
        except Timeout:
            outcomes.append("timeout")
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            outcomes.append(repr(exc))

    api_requests.mark()
    threads = [threading.Thread(target=wait, args=(b, jobs[i % len(jobs)]))
               for i, b in enumerate(waiters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(window + 60)
    assert outcomes == ["timeout"] * len(waiters)
    requests = api_requests.since()
    # No waiter reads a launcher's log: the launchers' readiness probes pass (no stall),
    # which the pod watches carry (stallcheck.py)
    logs = [r for r in requests if r.path.endswith("/log")]
    assert logs == []
    requests = [r for r in requests if not r.path.endswith("/log")]
    kinds = Counter(api_requests.kind(r) for r in requests)
    # Start-up: each waiter lists its pods and its Jobs once (a `kubectl wait` lists its
    # object once too) and reads discovery; no list after that, so no waiter polled.
    assert kinds["list"] == 2 * len(waiters), kinds
    assert kinds["get"] <= 2 * len(waiters), kinds
    assert set(kinds) <= {"list", "get", "watch"}, kinds
    # Steady state: watches only, each run to its end (2-4 s here) and resumed, none cut short
    # under the others' load: at most window / 2 + 1 per kind and waiter ...
    assert kinds["watch"] <= len(waiters) * 2 * (window / 2 + 1), kinds
    # ... which is well under the 6 requests a minute of a `kubectl wait` (one test second
    # stands for SCALE / 2 seconds: the production watch runs 150 times as long as these).
    simulated_minutes = window * SCALE / 2 / 60
    assert kinds["watch"] / len(waiters) / simulated_minutes <= 6, kinds
    for name in jobs:
        mine = [r for r in requests if api_requests.kind(r) == "watch"
                and f"={name}" in r.query.get("labelSelector", "")]
        assert len(mine) >= 2 * len(waiters) // len(jobs)  # every waiter watched both kinds
