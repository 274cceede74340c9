"""The NVML collector against fake NVML libraries wired like real machines."""

from __future__ import annotations

import sys

import pytest

from launcher.errors import UserError
from launcher.hardware import nvml_topology
from tests import fake_pynvml
from tests.topo_files import gpu_links


def collect(fake, **kwargs):
    fake.nvmlInit()
    return nvml_topology.collect(fake, **kwargs)


@pytest.mark.parametrize(
    "options",
    [{}, {"remote_device_type": False}, {"uuid_bytes": True}],
    ids=["current-nvml", "no-remote-device-type", "bytes-uuids"],
)
def test_dgx1_v100_reproduces_nvidia_smi(options):
    inventory = collect(fake_pynvml.dgx1_v100(**options))

    assert inventory.links == gpu_links("dgx1-v100-mlx5.txt")  # a real DGX-1's output
    assert inventory.gpus == 8
    assert inventory.gpu_model == "Tesla V100-SXM2-16GB"
    assert inventory.uuids[3] == "GPU-00000003-1111-2222-3333-000000000003"
    assert inventory.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert inventory.cpu_affinity[0] == "0-19,40-59"
    assert inventory.cpu_affinity[7] == "20-39,60-79"
    assert inventory.pcie_gen == 3
    assert inventory.mig_parents == {}


def test_a_link_that_is_down_is_not_counted():
    fake = fake_pynvml.dgx1_v100()
    # Take down one of the two GPU0<->GPU3 cables, at GPU0's end only.
    port = fake.gpus[0].ports.index((fake_pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, 0x0B, True))
    fake.gpus[0].ports[port] = (fake_pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, 0x0B, False)

    links = collect(fake).links

    assert links[0][3] == links[3][0] == "NV1"
    assert links[0][4] == "NV2"


def test_pcie_box_maps_common_ancestors_to_smi_codes():
    inventory = collect(fake_pynvml.pcie_box())

    assert inventory.links[0] == ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
    assert inventory.links[1][0] == "PIX"
    assert inventory.links[2][3] == "PHB"  # sw0b's GPU and a root-port GPU: the host bridge
    assert inventory.links[4][5] == "SYS"
    assert all(inventory.links[i][j] == inventory.links[j][i] for i in range(6) for j in range(6))
    assert inventory.numa == (0, 0, 0, 0, 0, 1)
    # The maximum link generation, not the current (idle GPUs drop to Gen1).
    assert inventory.pcie_gen == 4


def test_nvswitch_pairs_are_nv_switch_links():
    for options in ({}, {"remote_device_type": False}):
        inventory = collect(fake_pynvml.hgx_a100(**options))
        off_diagonal = {inventory.links[i][j] for i in range(8) for j in range(8) if i != j}
        assert off_diagonal == {"NV12"}


def test_nvswitch_pair_is_bounded_by_the_gpu_with_fewer_switch_links():
    fake = fake_pynvml.hgx_a100()
    fake.gpus[5].ports = fake.gpus[5].ports[:8]

    links = collect(fake).links

    assert links[5][0] == links[0][5] == "NV8"
    assert links[0][1] == "NV12"


def test_mig_devices_map_to_their_gpu():
    fake = fake_pynvml.hgx_a100()
    fake.gpus[2].mig = ["MIG-aaaa", None, "MIG-bbbb", None, None, None, None]

    assert collect(fake).mig_parents == {"MIG-aaaa": 2, "MIG-bbbb": 2}


def test_numa_falls_back_to_sysfs_when_nvml_lacks_the_call(tmp_path):
    fake = fake_pynvml.pcie_box(numa_call=False)
    for i, gpu in enumerate(fake.gpus):
        node_dir = tmp_path / f"0000:{gpu.bus:02x}:00.0"
        node_dir.mkdir()
        # The kernel says -1 when the platform does not tell.
        (node_dir / "numa_node").write_text("-1\n" if i == 3 else f"{gpu.numa}\n")

    assert collect(fake, sysfs=tmp_path).numa == (0, 0, 0, None, 0, 1)


@pytest.mark.parametrize(
    "level, code",
    [
        (fake_pynvml.NVML_TOPOLOGY_INTERNAL, "PIX"),  # two GPUs on one board (K80-style)
        (fake_pynvml.NVML_TOPOLOGY_SINGLE, "PIX"),
        (fake_pynvml.NVML_TOPOLOGY_MULTIPLE, "PXB"),
        (fake_pynvml.NVML_TOPOLOGY_HOSTBRIDGE, "PHB"),
        (fake_pynvml.NVML_TOPOLOGY_NODE, "NODE"),
        (fake_pynvml.NVML_TOPOLOGY_SYSTEM, "SYS"),
    ],
)
def test_every_nvml_topology_level(level, code):
    assert nvml_topology.pcie_code(fake_pynvml.dgx1_v100(), level) == code


def test_cpulist():
    assert nvml_topology.cpulist([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert nvml_topology.cpulist([]) == ""


def test_load_nvml_initialises_the_library(monkeypatch):
    fake = fake_pynvml.pcie_box()
    monkeypatch.setitem(sys.modules, "pynvml", fake)

    nvml = nvml_topology.load_nvml()

    assert nvml is fake and fake.initialized
    assert nvml_topology.collect(nvml).gpus == 6


def test_load_nvml_without_driver_is_a_one_line_user_error(monkeypatch):
    fake = fake_pynvml.pcie_box(init_error=fake_pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    monkeypatch.setitem(sys.modules, "pynvml", fake)

    with pytest.raises(UserError) as err:
        nvml_topology.load_nvml()

    message = str(err.value)
    assert message.startswith("NVML is unavailable: Driver Not Loaded")
    assert "\n" not in message
    assert err.value.exit_code != 0


def test_load_nvml_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail

    with pytest.raises(nvml_topology.NvmlUnavailable, match=r"hvdk8s\[agent\]"):
        nvml_topology.load_nvml()


NVML_CALLS = (
    "nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID",
    "nvmlDeviceGetName", "nvmlDeviceGetPciInfo", "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
)


def test_fake_matches_the_real_pynvml():
    """Where nvidia-ml-py is installed (the `agent` extra), the fake must keep its shape."""
    import ctypes
    import inspect

    real = pytest.importorskip("pynvml")
    if isinstance(real, fake_pynvml.FakeNvml):
        pytest.skip("pynvml is a fake here")
    fake = fake_pynvml.dgx1_v100()
    for name in NVML_CALLS:
        ours = getattr(fake, name)
        theirs = inspect.unwrap(getattr(real, name))
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    for const in (n for n in dir(fake_pynvml) if n.startswith("NVML_")):
        if const.endswith("_MAX_LINKS"):
            # A capacity that grows with NVML releases (18, then 36 from 13.590); the collector
            # reads it from the installed module, so the fake only has to cover every index.
            assert getattr(real, const) <= getattr(fake_pynvml, const), const
        else:
            assert getattr(real, const) == getattr(fake_pynvml, const), const

    def layout(struct):
        return [(name, ctypes.sizeof(ctype)) for name, ctype in struct._fields_]

    assert layout(fake_pynvml.nvmlPciInfo_t) == layout(real.nvmlPciInfo_t)
    assert issubclass(real.NVMLError, Exception)
