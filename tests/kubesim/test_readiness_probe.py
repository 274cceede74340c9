"""The kubelet model's readiness prober (kubesim/kubelet.py `_ready`), as the kubelet's
(kubernetes pkg/kubelet/prober/worker.go, prober.go): not Ready until a probe passes, a
probe every periodSeconds after initialDelaySeconds, the result changing only after
successThreshold/failureThreshold in a row, an `Unhealthy` event per failed probe."""

from __future__ import annotations

from kubesim import KubeAPIServer, Run

PROBE = {"exec": {"command": ["/bin/sh", "-c", "test ! -e /tmp/stalled"]},
         "initialDelaySeconds": 5, "periodSeconds": 10, "successThreshold": 2,
         "failureThreshold": 3}


def condition(pod: dict, kind: str) -> str | None:
    return next((c["status"] for c in pod["status"].get("conditions") or []
                 if c["type"] == kind), None)


def test_readiness_follows_the_probe_period_and_thresholds():
    answers: list[tuple[bool, str]] = []
    asked: list[float | None] = []

    def probe(logs_for):
        asked.append(logs_for)
        return answers[-1]

    with KubeAPIServer(controllers=False, start_delay=0.0) as srv:
        srv.add_node("n1", gpus=0)
        srv.script_pod("p", runs=[Run([], exit_code=None, probe=probe)])
        srv.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "img:1",
                                             "readinessProbe": PROBE}]}})

        def at(seconds: float) -> dict:
            srv.clock.advance(seconds)
            srv.step()
            return srv.store.get("/pods", "default", "p")

        answers.append((True, ""))
        pod = at(0)
        assert pod["status"]["phase"] == "Running"
        assert condition(pod, "Ready") == "False" and asked == []  # the initial delay
        assert condition(at(5), "ContainersReady") == "False" and len(asked) == 1  # 1 of 2
        assert condition(at(5), "Ready") == "False" and len(asked) == 1  # within the period
        assert condition(at(5), "Ready") == "True" and len(asked) == 2
        answers.append((False, "hvdk8s: stalled: rank 1"))
        assert condition(at(10), "Ready") == "True"  # 1 failure of 3
        assert condition(at(10), "Ready") == "True"
        pod = at(10)
        assert condition(pod, "Ready") == "False" and len(asked) == 5
        assert pod["status"]["containerStatuses"][0]["ready"] is False
        unhealthy = [e for e in srv.store.items("/events") if e["reason"] == "Unhealthy"]
        assert [(e["type"], e["message"], e["involvedObject"]["name"]) for e in unhealthy] == [
            ("Warning", "Readiness probe failed: hvdk8s: stalled: rank 1", "p")] * 3
