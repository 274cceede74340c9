"""`get` shows the GPUs a pod really got (the topology agent's PodResources data in the node
annotation), says when they differ from the plan, and later plans believe the agent, not
the planned-GPU annotation (issue 10 #8). Through the CLI against the test API server."""

from __future__ import annotations

import json

from mpijob.jobspec import names
from mpijob.scheduling.presets import preset
from mpijob.scheduling.topology import ANNOTATION_TOPOLOGY, annotation_payload
from tests.k8s_env import hvdk8s


def test_get_shows_the_allocated_gpus_and_the_next_plan_believes_them(k8s):
    srv = k8s.server()
    srv.script_pod(r"real-launcher-\w{5}", exit_code=None)
    srv.script_pod(r"real-worker-\d+", exit_code=None)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "real", "--workers", "1", "--gpus", "4",
                    "--image", "img:1", "--gputopology", "python", "train.py")
    assert result.exit_code == 0, result.output
    worker = srv.get("pods", "real-worker-0")
    node = worker["spec"]["nodeName"]
    planned = [int(i) for i in worker["metadata"]["annotations"][names.ANNOTATION_GPUS].split(",")]
    got = sorted(set(range(8)) - set(planned))  # the device plugin chose the other four
    payload = annotation_payload(node=node, topology=preset("dgx1-v100"),
                                 gpu_model="Tesla-V100-SXM2-16GB", pcie_gen=3,
                                 allocated={"default/real-worker-0": got})

    def agent_writes(n):  # what `hvdk8s agent` patches onto its node
        n["metadata"].setdefault("annotations", {})[ANNOTATION_TOPOLOGY] = payload
    srv.store.mutate("/nodes", "", node, agent_writes)

    shown = json.loads(hvdk8s(k8s, "get", "real", "-o", "json").stdout)
    (row,) = shown["gpu_allocation"]
    assert (row["pod"], row["planned"], row["allocated"], row["differs"]) == \
        ("real-worker-0", planned, got, True)
    worker_row = next(r for r in shown["replicas"] if r["name"] == "real-worker-0")
    assert worker_row["gpus"] == got
    table = hvdk8s(k8s, "get", "real").output
    line = next(x for x in table.splitlines() if x.startswith("real-worker-0: allocated"))
    assert f"GPUs {','.join(map(str, got))}" in line
    assert f"not the planned {','.join(map(str, planned))}" in line

    # Later plans: the worker holds `got` on that node, not its planned GPUs.
    snap = k8s.backend().snapshot()
    usage = {u.name: u.indices for u in snap.pods}
    assert usage["real-worker-0"] == tuple(got)
    assert snap.cluster.node(node).allocated == frozenset(got)
