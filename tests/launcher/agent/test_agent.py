"""The topology agent's loop, with fake NVML, fake kubelet answers and a fake Node patch."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from launcher.agent import node_agent as agent_mod
from launcher.agent.podresources import ContainerDevices, ContainerResources, PodResources
from launcher.errors import UserError
from launcher.hardware import nvml_topology
from mpijob.scheduling.topology import TOPOLOGY_FORMAT_VERSION, parse_annotation
from tests import fake_pynvml
from tests.topo_files import gpu_links

START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def pod(namespace: str, name: str, *device_ids: str, resource: str = "nvidia.com/gpu") -> PodResources:
    devices = (ContainerDevices(resource, tuple(device_ids)),)
    return PodResources(name, namespace, (ContainerResources("main", devices),))


class Clock:
    def __init__(self):
        self.moment = START

    def __call__(self) -> datetime:
        self.moment += timedelta(seconds=60)
        return self.moment


class Node:
    """The agent's Node as far as the agent sees it: one annotation, get and patch."""

    def __init__(self, annotation: str | None = None):
        self.annotation = annotation
        self.patches: list[str] = []
        self.gets = 0
        self.patch_errors: list[Exception] = []

    def get(self, name: str) -> str | None:
        assert name == "gpu-node-1"
        self.gets += 1
        return self.annotation

    def patch(self, name: str, value: str) -> None:
        assert name == "gpu-node-1"
        if self.patch_errors:
            raise self.patch_errors.pop(0)
        self.patches.append(value)
        self.annotation = value


@pytest.fixture
def nvml():
    fake = fake_pynvml.dgx1_v100()
    fake.nvmlInit()
    return fake


def make_agent(nvml, node: Node, pods: list[PodResources], **kwargs) -> agent_mod.TopologyAgent:
    return agent_mod.TopologyAgent(
        "gpu-node-1",
        read_inventory=lambda: nvml_topology.collect(nvml),
        list_pods=lambda: list(pods),
        get_annotation=node.get,
        patch_annotation=node.patch,
        now=Clock(),
        **kwargs,
    )


def uuid(nvml, i: int) -> str:
    return nvml.gpus[i].uuid


def test_one_iteration_writes_the_annotation(nvml):
    node = Node()
    pods = [
        pod("ml", "resnet-worker-0", uuid(nvml, 5), uuid(nvml, 4)),
        pod("team-a", "notebook", f"{uuid(nvml, 7)}::2", resource="nvidia.com/gpu.shared"),
        pod("default", "web"),
    ]
    agent = make_agent(nvml, node, pods)

    assert agent.step() is True

    [value] = node.patches
    topology, taken, meta = parse_annotation(value)
    assert topology.links == gpu_links("dgx1-v100-mlx5.txt")
    assert topology.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topology.cpu_affinity[4] == "20-39,60-79"
    assert taken == frozenset({4, 5, 7})
    data = json.loads(value)
    assert data["allocated"] == {"ml/resnet-worker-0": [4, 5], "team-a/notebook": [7]}
    assert data["version"] == TOPOLOGY_FORMAT_VERSION
    assert meta["node"] == "gpu-node-1"
    assert meta["gpu_model"] == "Tesla V100-SXM2-16GB"
    assert meta["gpus"] == 8
    assert meta["uuids"] == [g.uuid for g in nvml.gpus]
    assert meta["pcie_gen"] == 3
    assert meta["updated"] == "2024-05-01T12:01:00Z"


def test_unchanged_state_is_not_patched_again(nvml):
    node = Node()
    pods = [pod("ml", "a", uuid(nvml, 0))]
    agent = make_agent(nvml, node, pods)

    assert agent.step() is True
    assert agent.step() is False  # a minute later, same GPUs, same pods
    assert agent.step() is False
    assert len(node.patches) == 1
    assert node.gets == 1

    pods.append(pod("ml", "b", uuid(nvml, 1)))
    assert agent.step() is True
    assert json.loads(node.patches[-1])["allocated"] == {"ml/a": [0], "ml/b": [1]}


def test_restart_with_the_same_annotation_does_not_patch(nvml):
    earlier = Node()
    make_agent(nvml, earlier, []).step()
    # A new agent process (pod restart) finds its predecessor's annotation, older `updated`.
    node = Node(annotation=earlier.patches[0].replace("2024-05-01T12:01:00Z", "2024-04-30T08:00:00Z"))

    assert make_agent(nvml, node, []).step() is False
    assert node.patches == []


@pytest.mark.parametrize("stale", [None, "not json", '{"version": 0}'])
def test_missing_or_foreign_annotation_is_replaced(nvml, stale):
    node = Node(annotation=stale)
    assert make_agent(nvml, node, []).step() is True
    parse_annotation(node.annotation)  # now a valid version-1 payload


def test_resync_repairs_an_annotation_removed_behind_the_agents_back(nvml):
    node = Node()
    agent = make_agent(nvml, node, [], resync_every=3)
    agent.step()
    node.annotation = None  # someone ran kubectl annotate node ... hvdk8s.io/gpu-topology-

    assert [agent.step() for _ in range(3)] == [False, False, True]
    assert node.gets == 2


def test_failed_patch_is_retried_and_reread(nvml):
    node = Node()
    node.patch_errors.append(ConnectionError("connection refused"))
    agent = make_agent(nvml, node, [])

    with pytest.raises(ConnectionError):
        agent.step()
    assert agent.step() is True
    assert node.gets == 2  # what the Node holds is unknown after a failure: read it again
    assert len(node.patches) == 1


def test_run_backs_off_then_succeeds(nvml):
    node = Node()
    node.patch_errors += [ConnectionError("refused"), TimeoutError("timed out")]
    sleeps: list[float] = []

    agent_mod.run(make_agent(nvml, node, []), once=True, sleep=sleeps.append, fraction=lambda: 0.5)

    assert sleeps == [1.0, 2.0]  # exponential, jitter at its middle
    assert len(node.patches) == 1


def test_run_once_gives_up_with_one_line(nvml):
    node = Node()
    node.patch_errors += [ConnectionError(f"refused\nline {i}") for i in range(5)]

    with pytest.raises(UserError) as err:
        agent_mod.run(make_agent(nvml, node, []), once=True, attempts=3, sleep=lambda s: None)

    assert str(err.value) == "agent: giving up on node gpu-node-1 after 3 attempts: ConnectionError: refused"


def test_run_sleeps_the_interval_between_steps(nvml):
    node = Node()
    agent = make_agent(nvml, node, [])
    sleeps: list[float] = []

    class Stop(Exception):
        pass

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise Stop

    with pytest.raises(Stop):
        agent_mod.run(agent, interval=45, sleep=sleep)
    assert sleeps == [45, 45, 45]
    assert len(node.patches) == 1


def test_nvml_disappearing_is_fatal_not_retried(nvml):
    def read_inventory():
        raise nvml_topology.NvmlUnavailable("NVML is unavailable: Driver Not Loaded")

    agent = agent_mod.TopologyAgent(
        "gpu-node-1", read_inventory=read_inventory, list_pods=list,
        get_annotation=Node().get, patch_annotation=Node().patch,
    )
    sleeps: list[float] = []
    with pytest.raises(nvml_topology.NvmlUnavailable):
        agent_mod.run(agent, sleep=sleeps.append)
    assert sleeps == []


def test_backoff_is_capped_and_jittered():
    assert agent_mod.backoff_seconds(1, fraction=0.0) == pytest.approx(0.8)
    assert agent_mod.backoff_seconds(4, fraction=0.999) == pytest.approx(8 * 1.2, rel=1e-3)
    assert agent_mod.backoff_seconds(30, fraction=0.5) == agent_mod.BACKOFF_MAX_SECONDS

