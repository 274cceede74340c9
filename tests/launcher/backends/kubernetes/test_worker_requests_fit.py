"""A worker's default CPU request capped at its node's free CPU leaves room for the start
gate's pod, which the scheduler places first and may put on the same node: the job is
scheduled where the plan put it, not rolled back for "Insufficient cpu"."""

from __future__ import annotations

from tests.k8s_env import hvdk8s


def _hog(srv, node: str, cpu: str) -> None:
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"hog-{node}"},
                "spec": {"nodeName": node, "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}},
               "default")


def test_a_request_capped_at_the_free_cpu_leaves_the_start_gate_room(k8s):
    srv = k8s.server()
    for node in ("gpu-node-0", "gpu-node-1"):
        _hog(srv, node, "60")  # 4 of 64 CPUs free on each
    k8s.script_launcher("capped", ["x"], exit_code=None)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "capped", "--workers", "1", "--gpus",
                       "8", "--image", k8s.image, "--schedule-timeout", "5", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    assert ("capped at the 4 free for its 8 GPUs less 0.05 for the start gate's pod"
            in submitted.output)
    worker = srv.get("pods", "capped-worker-0")
    assert worker["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3"
    assert worker["spec"].get("nodeName")
