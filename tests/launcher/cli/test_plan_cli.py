"""`hvdk8s plan` and `hvdk8s topology` through the real CLI app, and the cluster file reader."""

from __future__ import annotations

import builtins
import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.errors import UsageError
from launcher.formats.clusterfile import cluster_from_data, load_cluster
from tests.paths import DATA

TWO_DGX1 = str(DATA / "clusters" / "two-dgx1.yaml")
QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})


def run(*args):
    result = CliRunner().invoke(app, list(args))
    return result


def plan_json(*args):
    result = run("plan", *args, "-o", "json")
    assert result.exit_code in (0, 1), result.output
    return result, json.loads(result.stdout)


def perfmodel_available() -> bool:
    try:
        import mpijob.perf.perfmodel  # noqa: F401
    except ImportError:
        return False
    return True


needs_perfmodel = pytest.mark.skipif(not perfmodel_available(),
                                     reason="mpijob.perf.perfmodel (another part of the project) is not there yet")


# --- the done-when --------------------------------------------------------------------------
def test_four_workers_with_gputopology_share_one_nvlink_quad():
    result, data = plan_json("--workers", "4", "--gpus", "1", "--cluster", TWO_DGX1, "--gputopology")
    assert result.exit_code == 0
    assert data["feasible"] is True and data["policy"] == "topology" and data["reason"] is None
    assert data["nodes_used"] == 1
    (pod,) = data["placement"]
    assert set(pod["gpus"]) in QUADS and pod["workers"] == 4
    assert pod["node"] in ("dgx1-a", "dgx1-b")
    assert data["explanation"]
    assert set(data) >= {"feasible", "placement", "nodes_used", "reason", "policy", "explanation", "prediction"}


def test_spread_spreads_four_pods_over_two_nodes():
    _, data = plan_json("--workers", "4", "--gpus", "1", "--cluster", TWO_DGX1, "--placement", "spread")
    assert data["policy"] == "spread"
    assert len(data["placement"]) == 4 and data["nodes_used"] == 2
    assert all(p["workers"] == 1 and len(p["gpus"]) == 1 for p in data["placement"])


def test_malformed_topo_file_fails_with_its_line_number(tmp_path):
    bad = tmp_path / "topo.txt"
    bad.write_text("        GPU0    GPU1\nGPU0     X      NV2\nGPU1    NV2     BOGUS\n")
    result = run("topology", "parse", str(bad))
    assert result.exit_code == 2
    assert "line 3" in result.stderr and "BOGUS" in result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def test_one_line_garbage_topo_file_names_its_only_line(tmp_path):
    bad = tmp_path / "topo.txt"
    bad.write_text("this is not nvidia-smi output\n")
    result = run("topology", "parse", str(bad))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}: line 1: no header line found")


def test_malformed_topo_file_in_a_cluster_file_fails_with_its_line_number(tmp_path):
    (tmp_path / "bad.txt").write_text("        GPU0    GPU1\nGPU0     X      NV2\nGPU1    NV1      X\n")
    (tmp_path / "c.yaml").write_text("nodes:\n  - name: n1\n    topology: bad.txt\n")
    result = run("plan", "--workers", "1", "--gpus", "1", "--cluster", str(tmp_path / "c.yaml"))
    assert result.exit_code == 2
    assert "nodes[0] (n1)" in result.stderr and "line 3" in result.stderr and "not symmetric" in result.stderr


# --- plan ---------------------------------------------------------------------------------------
@needs_perfmodel
def test_prediction_is_the_performance_model_s():
    from mpijob.perf.perfmodel import predict
    from mpijob.scheduling.placement import PlacementRequest, place

    _, data = plan_json("--workers", "4", "--gpus", "1", "--cluster", TWO_DGX1,
                        "--model", "resnet50", "--batch-size", "32", "--precision", "fp16")
    cluster = load_cluster(TWO_DGX1)
    expected = predict(model="resnet50", batch_size=32, precision="fp16",
                       placement=place(cluster, PlacementRequest(4, 1)), cluster=cluster).to_json()
    assert data["prediction"] == json.loads(json.dumps(expected))
    for key in ("images_per_sec", "step_seconds", "compute_seconds", "allreduce_seconds",
                "bottleneck", "scaling_efficiency"):
        assert key in data["prediction"]


@needs_perfmodel
def test_compare_shows_every_policy_with_predictions():
    result, data = plan_json("--workers", "4", "--gpus", "1", "--cluster", TWO_DGX1, "--compare")
    assert result.exit_code == 0
    policies = [d["policy"] for d in data["compare"]]
    assert policies == ["topology", "binpack", "spread"]
    by = {d["policy"]: d for d in data["compare"]}
    assert by["spread"]["nodes_used"] == 2 and by["topology"]["nodes_used"] == 1
    assert by["topology"]["prediction"]["images_per_sec"] > by["spread"]["prediction"]["images_per_sec"]
    table = run("plan", "--workers", "4", "--gpus", "1", "--cluster", TWO_DGX1, "--compare")
    assert table.exit_code == 0
    for word in ("topology", "binpack", "spread", "images/s"):
        assert word in table.stdout


def test_infeasible_plan_exits_1_and_says_why():
    result, data = plan_json("--workers", "17", "--gpus", "1", "--cluster", TWO_DGX1)
    assert result.exit_code == 1
    assert data["feasible"] is False and data["placement"] == [] and data["prediction"] is None
    assert "needs 17 GPUs" in data["reason"] and "16 free GPUs" in data["reason"]


def test_table_output_names_nodes_gpus_and_reasons():
    result = run("plan", "--workers", "2", "--gpus", "2", "--cluster", TWO_DGX1)
    assert result.exit_code == 0
    assert "dgx1-a" in result.stdout and "0,1,2,3" in result.stdout and "weakest link" in result.stdout
    too_big = run("plan", "--workers", "3", "--gpus", "8", "--cluster", TWO_DGX1)
    assert too_big.exit_code == 1 and "does not fit" in too_big.stdout


def test_selector_and_toleration_options(tmp_path):
    cluster = tmp_path / "c.json"
    cluster.write_text(json.dumps({
        "defaults": {"topology": "dgx-a100", "gpus": 8},
        "nodes": [
            {"name": "a", "labels": {"pool": "x"}, "taints": ["nvidia.com/gpu=present:NoSchedule"]},
            {"name": "b", "labels": {"pool": "y"}},
        ],
    }))
    _, data = plan_json("--workers", "1", "--gpus", "8", "--cluster", str(cluster), "--selector", "pool=x")
    assert not data["feasible"] and "excluded by taint nvidia.com/gpu=present:NoSchedule" in data["reason"]
    _, data = plan_json("--workers", "1", "--gpus", "8", "--cluster", str(cluster), "--selector", "pool=x",
                        "--toleration", "nvidia.com/gpu:NoSchedule")
    assert data["feasible"] and data["placement"][0]["node"] == "a"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--selector", "pool"], "--selector: expected KEY=VALUE"),
        (["--toleration", "gpu:Maybe"], "--toleration: unknown effect"),
        (["--placement", "random"], "--placement: expected topology, binpack, spread, got 'random'"),
        (["--placement", "spread", "--gputopology"],
         "--gputopology and --placement spread disagree: give one of them"),
        (["-o", "xml"], "-o/--output"),
        (["--precision", "fp8"], "--precision: expected fp32 or fp16, got 'fp8'"),
        (["--cpu", "lots"], "--cpu"),
        (["--model", "foo"], "--model: unknown model 'foo'; expected one of vgg16, vgg19, resnet50"),
        (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
        (["--batch-size", "5000"], "--batch-size: must be at most 4096, got 5000"),
        (["--gpus", "-1"], "--gpus: must be at least 0, got -1"),
    ],
)
def test_bad_option_values_exit_2_with_the_option_named(args, words):
    result = run("plan", "--workers", "1", "--gpus", "1", "--cluster", TWO_DGX1, *args)
    assert result.exit_code == 2
    assert words in result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [
    ["--model", "foo"], ["--placement", "x"], ["--placement", "spread", "--gputopology"],
    ["--gpus", "-1"], ["--batch-size", "0"],
])
def test_plan_and_submit_word_bad_options_alike(args):
    job = ["--workers", "1", "--gpus", "1", *args]  # a second --gpus wins, as in click
    planned = run("plan", *job, "--cluster", TWO_DGX1)
    submitted = run("submit", "mpi", "--name", "x", "--dry-run", *job)
    assert planned.exit_code == submitted.exit_code == 2
    assert planned.stderr == submitted.stderr


def test_a_model_name_in_capitals_is_the_same_model():
    _, lower = plan_json("--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1, "--model", "resnet50")
    _, upper = plan_json("--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1, "--model", "ResNet50")
    assert upper["prediction"] == lower["prediction"]


def test_cpu_and_memory_the_cluster_file_cannot_check_are_noted():
    note = "cpu/memory not checked: the cluster file gives no capacity for 1 node"
    _, data = plan_json("--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1,
                        "--cpu", "1000", "--memory", "10Ti")
    assert data["feasible"] and note in data["explanation"]
    table = run("plan", "--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1, "--cpu", "1000", "--memory", "10Ti")
    assert table.exit_code == 0 and note in table.stdout
    _, spread = plan_json("--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1, "--cpu", "1",
                          "--placement", "spread")
    assert "cpu not checked: the cluster file gives no capacity for 2 nodes" in spread["explanation"]
    _, plain = plan_json("--workers", "2", "--gpus", "1", "--cluster", TWO_DGX1)
    assert not any("not checked" in line for line in plain["explanation"])


def test_known_cpu_capacity_needs_no_note(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes:\n  - {name: a, topology: dgx-a100, cpu: '64', memory: 512Gi, labels: {pool: a}}\n"
                       "  - {name: b, topology: dgx-a100, labels: {pool: b}}\n")
    for node in ("a", "b"):
        _, data = plan_json("--workers", "1", "--gpus", "8", "--cpu", "4", "--cluster", str(cluster),
                            "--selector", f"pool={node}")
        notes = [line for line in data["explanation"] if "not checked" in line]
        assert notes == ([] if node == "a" else ["cpu not checked: the cluster file gives no capacity for 1 node"])


def test_without_cluster_and_without_a_backend_says_to_pass_cluster(monkeypatch):
    real_import = builtins.__import__

    def no_backend(name, *args, **kwargs):
        if name == "launcher.backends.kubernetes.backend" or name.startswith("launcher.backends.kubernetes.backend."):
            raise ImportError("no kubernetes backend")
        return real_import(name, *args, **kwargs)

    import sys

    monkeypatch.delitem(sys.modules, "launcher.backends.kubernetes.backend", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_backend)
    result = run("plan", "--workers", "1", "--gpus", "1")
    assert result.exit_code == 2
    assert "no --cluster given and no Kubernetes backend available: pass --cluster FILE" in result.stderr


def test_cpu_job_plan(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes:\n  - {name: cpu-1, cpu: '16', memory: 64Gi}\n  - {name: cpu-2, cpu: '16'}\n")
    _, data = plan_json("--workers", "6", "--gpus", "0", "--cpu", "4", "--cluster", str(cluster))
    assert data["feasible"] and {p["node"]: p["workers"] for p in data["placement"]} == {"cpu-1": 4, "cpu-2": 2}
    assert all(p["gpus"] == [] for p in data["placement"])


def test_plan_shows_the_network_submit_gives_the_job(tmp_path):
    """plan takes submit's plan of the placement (launcher.preparing.planning.plan_placed):
    a CPU job's workers request no RDMA device, so no network decision is shown for it,
    though its nodes offer RDMA; a GPU job's is submit's."""
    cluster = tmp_path / "c.yaml"
    cluster.write_text("defaults: {topology: dgx1-v100, resources: {rdma/hca: 10}}\n"
                       "nodes:\n  - {name: a, cpu: '64', memory: 256Gi}\n"
                       "  - {name: b, cpu: '64', memory: 256Gi}\n")
    _, cpu = plan_json("--workers", "2", "--gpus", "0", "--cluster", str(cluster))
    assert cpu["feasible"] and "network" not in cpu
    _, gpu = plan_json("--workers", "16", "--gpus", "1", "--cluster", str(cluster))
    assert gpu["network"]["rdma_resource"] == "rdma/hca"


# --- topology commands ----------------------------------------------------------------------
def test_topology_parse_json_is_the_matrix_as_printed():
    result = run("topology", "parse", str(DATA / "topo" / "k40-soc-mlx4.txt"), "-o", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["gpus"] == 4
    assert data["links"][0] == ["X", "PHB", "SYS", "SYS"]
    assert data["nics"] == ["mlx4_0"] and data["cpu_affinity"] == ["0-5", "0-5", "6-11", "6-11"]


def test_topology_parse_table_and_stdin():
    text = (DATA / "topo" / "dgx1-v100-mlx5.txt").read_text()
    result = CliRunner().invoke(app, ["topology", "parse", "-"], input=text)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[1].split()[:4] == ["GPU0", "X", "NV1", "NV1"]
    assert "NICs: mlx5_0" in result.stdout


def test_topology_presets_and_show():
    listing = run("topology", "presets")
    for name in ("dgx1-v100", "dgx2", "dgx-a100", "dgx-h100", "pcie-8gpu-dual-socket", "pcie-4gpu-nvlink-pairs"):
        assert name in listing.stdout
    shown = run("topology", "show", "dgx1-v100", "-o", "json")
    assert json.loads(shown.stdout)["links"][0] == ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    missing = run("topology", "show", "dgx-9000")
    assert missing.exit_code == 2 and "unknown topology preset 'dgx-9000'" in missing.stderr
    nofile = run("topology", "parse", "/nonexistent/topo.txt")
    assert nofile.exit_code == 2 and "no such file" in nofile.stderr


def test_topology_show_refuses_more_gpus_than_a_node_has_in_one_line():
    result = run("topology", "show", "uniform-1000-NV1")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: topology preset 'uniform-1000-NV1': at most 64 GPUs per node")
    assert result.stderr.count("\n") == 1


# --- cluster files ------------------------------------------------------------------------------
def test_two_dgx1_example_file():
    cluster = load_cluster(TWO_DGX1)
    assert [n.name for n in cluster.nodes] == ["dgx1-a", "dgx1-b"]
    for n in cluster.nodes:
        assert n.gpus == 8 and not n.allocated and n.network_gbps == 10.0
        assert n.topology.name == "dgx1-v100" and n.gpu_model == "Tesla-V100-SXM2-16GB"


def test_cluster_file_forms(tmp_path):
    (tmp_path / "topo.txt").write_text((DATA / "topo" / "tesla-t4-4gpu.txt").read_text())
    data = {
        "nodes": [
            {"name": "from-file", "topology": "topo.txt", "allocated": [1]},
            {"name": "matrix", "topology": [["X", "NV2"], ["NV2", "X"]], "pcie_gen": 4},
            {"name": "labels-only", "gpus": 8, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             "taints": [{"key": "a", "value": "b", "effect": "NoExecute"}, "c:PreferNoSchedule"],
             "cpu": "500m", "memory": "1Gi", "ready": False},
            {"name": "part", "gpus": 4, "topology": "dgx1-v100"},
        ],
        "generate": {"count": 12, "prefix": "gen-", "topology": "dgx-a100", "allocated_fraction": 0.5, "seed": 3},
    }
    cluster = cluster_from_data(data, source=tmp_path / "c.yaml")
    nodes = {n.name: n for n in cluster.nodes}
    assert nodes["from-file"].gpus == 4 and nodes["from-file"].topology.link(1, 2) == "NODE"
    assert nodes["matrix"].gpus == 2 and nodes["matrix"].pcie_gen == 4
    h100 = nodes["labels-only"]
    assert h100.topology.name == "dgx-h100" and h100.gpu_model == "NVIDIA-H100-80GB-HBM3"
    assert [t.effect for t in h100.taints] == ["NoExecute", "PreferNoSchedule"] and h100.taints[1].value is None
    assert h100.free_cpu == 0.5 and h100.free_memory == 2**30 and h100.ready is False
    from mpijob.scheduling.presets import PRESETS

    assert nodes["part"].topology.links == PRESETS["dgx1-v100"].subset(4).links and nodes["part"].gpus == 4
    generated = [n for n in cluster.nodes if n.name.startswith("gen-")]
    assert [n.name for n in generated][:2] == ["gen-01", "gen-02"] and len(generated) == 12
    assert 0 < sum(len(n.allocated) for n in generated) < 96
    again = cluster_from_data(data, source=tmp_path / "c.yaml")
    assert again == cluster  # the same seed gives the same cluster


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"nodes": [{"gpus": 8}]}, "nodes[0]: name: expected a non-empty string"),
        ({"nodes": [{"name": "a", "gpus": -1}]}, "nodes[0] (a): gpus: expected a whole number"),
        ({"nodes": [{"name": "a", "topology": "dgx-9000"}]}, "nodes[0] (a): topology: unknown topology preset"),
        ({"nodes": [{"name": "a", "topology": "dgx-a100", "allocated": [8]}]}, "allocated: GPU 8 does not exist"),
        ({"nodes": [{"name": "a", "topology": "dgx-a100", "allocated": [1, 1]}]}, "appears twice"),
        ({"nodes": [{"name": "a", "gpus": 16, "topology": "dgx-a100"}]}, "gpus is 16 but topology has 8"),
        ({"nodes": [{"name": "a", "gpus": 1000}]}, "nodes[0] (a): gpus: at most 64 GPUs per node"),
        ({"generate": {"count": 2, "gpus": 65}}, "generate[0] (node-1): gpus: at most 64 GPUs"),
        ({"nodes": [{"name": "a", "topology": "uniform-1000-NV1"}]},
         "nodes[0] (a): topology: topology preset 'uniform-1000-NV1': at most 64 GPUs per node"),
        ({"nodes": [{"name": "a", "taints": ["x=y"]}]}, "taints[0]: 'x=y' has no effect"),
        ({"nodes": [{"name": "a", "cpu": "many"}]}, "cpu: 'many' is not a Kubernetes quantity"),
        ({"nodes": [{"name": "a", "colour": "red"}]}, "unknown key colour;"),
        ({"nodes": [{"name": "a", "colour": "red", "size": 1}]}, "unknown keys colour, size;"),
        ({"nodes": [{"name": "a"}, {"name": "a"}]}, "node name 'a' appears twice"),
        ({"nodes": [{"name": "a", "topology": [["X", "NV1"], ["NV2", "X"]]}]}, "topology: links is not symmetric"),
        ({"machines": []}, "unknown top-level key machines;"),
        ({"nodes": []}, "no nodes"),
        ({"generate": {"count": -1}}, "generate: count"),
        ([1], "nodes[0]: expected a mapping"),
    ],
)
def test_bad_cluster_files_name_the_file_node_and_key(data, words, tmp_path):
    source = tmp_path / "cluster.yaml"
    with pytest.raises(UsageError) as info:
        cluster_from_data(data, source=source)
    assert str(source) in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(("data", "words"), [
    ({"nodes": [{"name": "a", "taints": [{"key": "k", "colour": "red"}]}]},
     "nodes[0] (a): taints[0]: unknown key colour; expected key=value:Effect or a mapping"),
    ({"nodes": [{"name": "a", "gpus": "8"}]},
     "nodes[0] (a): gpus: expected a whole number of GPUs (0 or more), got '8'"),
    ({"nodes": [{"name": "a", "gpus": 8, "dra": {"uuids": ["GPU 1"]}}]},
     "nodes[0] (a): dra: uuids[0]: expected a GPU UUID (GPU-...)"),
    ({"generate": [{"count": 1}, {"count": "x"}]},
     "generate[1]: count: expected a whole number of nodes, got 'x'"),
    ({"nodes": [{"name": "a"}], "network_labels": {"tor": "x"}},
     "network_labels: unknown key tor; expected a mapping with zone, block, rack"),
])
def test_cluster_file_problems_name_the_nested_key(data, words, tmp_path):
    source = tmp_path / "cluster.yaml"
    with pytest.raises(UsageError) as info:
        cluster_from_data(data, source=source)
    assert str(info.value).startswith(f"{source}: {words}")


def test_unreadable_or_invalid_cluster_files(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        load_cluster(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n  - name: a\n")
    with pytest.raises(UsageError, match=r"not valid YAML at line \d+"):
        load_cluster(bad)
    badjson = tmp_path / "bad.json"
    badjson.write_text('{"nodes": [}')
    with pytest.raises(UsageError, match="not valid JSON"):
        load_cluster(badjson)
