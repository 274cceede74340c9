"""The cluster simulator: workload generation and traces, gang scheduling with EASY backfill,
durations from predicted throughput, the policy comparison and `hvdk8s simulate`."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.perf import simworkload
from mpijob.perf.perfmodel import single_gpu_images_per_sec
from mpijob.perf.simulate import SUMMARY_COLUMNS, percentile, simulate
from mpijob.perf.simworkload import (
    CSV_COLUMNS,
    SimJob,
    TraceError,
    generate_jobs,
    parse_jobs_csv,
)
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.presets import preset
from mpijob.wellknown import GPU_PRODUCT_LABEL
from tests.paths import DATA

V100 = "Tesla-V100-SXM2-16GB"


def dgx1(name: str, gbps: float = 10.0) -> Node:
    topo = preset("dgx1-v100")
    return Node(name=name, gpus=8, topology=topo, gpu_model=V100, network_gbps=gbps)


def job(i, submit, gpus, seconds, *, gpw=1, model="resnet50", batch=64) -> SimJob:
    """A job whose work takes `seconds` on perfectly scaling V100s."""
    ips = single_gpu_images_per_sec(V100, model, "fp32", batch)
    return SimJob(i, submit, gpus, gpw, model, batch, seconds * gpus * ips)


# --- the job stream --------------------------------------------------------------------------
def test_generated_stream_is_seeded_mostly_small_and_well_formed():
    cluster = simworkload.default_cluster(40)
    a = generate_jobs(2000, seed=7, cluster=cluster)
    assert a == generate_jobs(2000, seed=7, cluster=cluster)
    assert a != generate_jobs(2000, seed=8, cluster=cluster)
    sizes = [j.gpus for j in a]
    assert set(sizes) <= {1, 2, 4, 8, 16, 32, 64}
    assert sizes.count(1) / len(sizes) > 0.45
    assert sum(s > 8 for s in sizes) / len(sizes) < 0.15
    assert all(j.gpus % j.gpus_per_worker == 0 for j in a)
    assert [j.submit_s for j in a] == sorted(j.submit_s for j in a)
    products = {dict(j.node_selector)[simworkload.GPU_PRODUCT_LABEL] for j in a}
    assert products == set(simworkload.gpu_pools(cluster))


def test_durations_are_heavy_tailed():
    cluster = simworkload.default_cluster(40)
    jobs = generate_jobs(3000, seed=1, cluster=cluster)
    per_gpu_work = sorted(j.work_images / j.gpus for j in jobs)
    median = percentile(per_gpu_work, 50)
    assert percentile(per_gpu_work, 99) > 20 * median  # a long tail, not a bell


def test_default_cluster_mixes_presets_in_their_shares():
    c = simworkload.default_cluster(500)
    assert len(c.nodes) == 500 and c.total_gpus == 4000
    kinds = {}
    for n in c.nodes:
        kinds[n.topology.name] = kinds.get(n.topology.name, 0) + 1
    assert kinds == {"dgx1-v100": 200, "pcie-8gpu-dual-socket": 100, "dgx-a100": 150, "dgx-h100": 50}


def jobs_csv(jobs: list[SimJob]) -> str:
    """The CSV form of `jobs`, as a trace file holds them, with gpu_product."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow((*CSV_COLUMNS, "gpu_product"))
    for j in jobs:
        product = dict(j.node_selector).get(GPU_PRODUCT_LABEL, "")
        w.writerow((f"{j.submit_s:.3f}", j.gpus, j.gpus_per_worker, j.model, j.batch_size,
                    f"{j.work_images:.0f}", product))
    return out.getvalue()


def test_trace_csv_round_trips():
    jobs = generate_jobs(50, seed=3, cluster=simworkload.default_cluster(20))
    back = parse_jobs_csv(jobs_csv(jobs))
    assert [(j.gpus, j.gpus_per_worker, j.model, j.batch_size, j.node_selector) for j in back] == \
        [(j.gpus, j.gpus_per_worker, j.model, j.batch_size, j.node_selector) for j in jobs]
    assert [j.submit_s for j in back] == pytest.approx([j.submit_s for j in jobs], abs=1e-3)


@pytest.mark.parametrize("text, line, match", [
    ("submit_s,gpus\n1,2\n", 1, "missing column"),
    ("submit_s,gpus,gpus_per_worker,model,batch_size,work_images\n0,4,1,vgg16,64,1e6\n0,x,1,vgg16,64,1\n",
     3, "integers"),
    ("submit_s,gpus,gpus_per_worker,model,batch_size,work_images\n0,3,2,vgg16,64,1e6\n", 2, "multiple"),
    ("submit_s,gpus,gpus_per_worker,model,batch_size,work_images\n0,1,1,lenet,64,1e6\n", 2, "unknown model"),
])
def test_bad_traces_name_the_line(text, line, match):
    with pytest.raises(TraceError, match=match) as err:
        parse_jobs_csv(text)
    assert err.value.line == line


# --- scheduling semantics --------------------------------------------------------------------
def test_gang_fifo_the_second_whole_node_job_waits_for_the_first():
    cluster = Cluster((dgx1("a"),))
    jobs = [job(0, 0.0, 8, 1000), job(1, 10.0, 8, 1000)]
    r = simulate(cluster, jobs, "topology")
    first, second = r.outcomes
    assert first.start_s == 0.0
    assert second.start_s == pytest.approx(first.end_s)
    assert second.queue_s == pytest.approx(first.end_s - 10.0)


def test_duration_is_work_over_predicted_throughput():
    cluster = Cluster((dgx1("a"),))
    [out] = simulate(cluster, [job(0, 5.0, 1, 600)], "topology").outcomes
    assert out.end_s - out.start_s == pytest.approx(600)
    assert out.images_per_sec == pytest.approx(single_gpu_images_per_sec(V100, "resnet50", "fp32", 64))


def test_easy_backfill_lets_short_jobs_pass_but_not_ones_that_delay_the_head():
    cluster = Cluster((dgx1("a"),))
    jobs = [
        job(0, 0.0, 4, 1000),   # runs at once, holds 4 GPUs until t=1000
        job(1, 1.0, 8, 100),    # head: needs the whole node, reserved for t=1000
        job(2, 2.0, 2, 100),    # fits now and ends before t=1000: backfilled
        job(3, 3.0, 2, 5000),   # fits now but would hold GPUs past t=1000: waits
    ]
    out = simulate(cluster, jobs, "topology").outcomes
    assert out[2].start_s == pytest.approx(2.0)
    assert out[1].start_s == pytest.approx(out[0].end_s)
    assert out[3].start_s >= out[1].end_s


def test_jobs_that_can_never_fit_are_dropped_and_counted():
    cluster = Cluster((dgx1("a"),))
    r = simulate(cluster, [job(0, 0.0, 16, 100), job(1, 1.0, 1, 100)], "topology")
    assert r.outcomes[0].dropped and r.outcomes[1].dropped is None
    assert r.summary.jobs_dropped == 1 and r.summary.jobs_completed == 1


def test_spread_stretches_communication_bound_jobs():
    cluster = Cluster((dgx1("a"), dgx1("b")))
    jobs = [job(0, 0.0, 4, 1000, model="vgg16")]
    topo = simulate(cluster, jobs, "topology").outcomes[0]
    spread = simulate(cluster, jobs, "spread").outcomes[0]
    assert spread.nodes_used == 2 and topo.nodes_used == 1
    assert spread.end_s - spread.start_s > 2 * (topo.end_s - topo.start_s)


def test_percentile_interpolates_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10], 95) == 10
    assert percentile(list(range(101)), 95) == 95


# --- the policy comparison -------------------------------------------------------------------
def test_small_simulation_topology_gets_at_least_spreads_throughput_per_gpu():
    cluster = simworkload.default_cluster(30)
    jobs = generate_jobs(200, seed=11, cluster=cluster)
    topo = simulate(cluster, jobs, "topology").summary
    spread = simulate(cluster, jobs, "spread").summary
    assert topo.jobs_completed == spread.jobs_completed == 200
    assert topo.mean_images_per_sec_per_gpu >= spread.mean_images_per_sec_per_gpu
    assert topo.multi_node_share <= spread.multi_node_share
    for s in (topo, spread):
        assert 0 < s.gpu_utilization <= 1
        assert s.p95_jct_s >= s.mean_jct_s * 0.5 and s.mean_queue_s >= 0


def test_cli_writes_the_summary_csv_with_the_exact_columns_and_the_plots(tmp_path: Path):
    out = tmp_path / "sim"
    result = CliRunner().invoke(app, ["simulate", "--nodes", "30", "--jobs", "200", "--seed", "5",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    with (out / "summary.csv").open() as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == SUMMARY_COLUMNS
    assert [r[0] for r in rows[1:]] == ["topology", "binpack", "spread"]
    assert all(float(v) >= 0 for r in rows[1:] for v in r[1:])
    for png in ("comparison.png", "jct_cdf.png", "throughput_per_gpu.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert "topology" in result.stdout and "JCT" in result.stdout


def test_cli_reads_a_trace_and_a_cluster_file(tmp_path: Path):
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text("generate: {count: 4, prefix: dgx-, topology: dgx1-v100, "
                            "gpu_model: Tesla-V100-SXM2-16GB, network_gbps: 10}\n")
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_s,gpus,gpus_per_worker,model,batch_size,work_images\n"
                     "0,4,1,vgg16,64,1e6\n5,8,8,resnet50,64,2e6\n9,1,1,inception3,32,1e5\n")
    result = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster_file), "--trace", str(trace),
                                      "--policies", "topology,spread", "--out", str(tmp_path / "o"),
                                      "--no-plots"])
    assert result.exit_code == 0, result.output
    rows = (tmp_path / "o" / "summary.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["topology", "spread"]
    assert not (tmp_path / "o" / "comparison.png").exists()


@pytest.mark.parametrize("args, message", [
    (["--nodes", "2", "--jobs", "3", "--policies", "roundrobin"], "error: --policies: expected names"),
    (["--nodes", "2", "--jobs", "3", "--policy", "roundrobin"], "error: --policy: expected names"),
    (["--nodes", "2", "--jobs", "3", "--policies", "topology", "--policy", "x"], "error: --policy: "),
    (["--nodes", "2", "--jobs", "3", "--precision", "int8"], "error: --precision"),
    (["--nodes", "2", "--jobs", "3", "--load", "0"], "error: --load"),
    (["--nodes", "2", "--trace", "/nonexistent/jobs.csv"], "error: --trace: /nonexistent/jobs.csv: no such file"),
    (["--cluster", str(DATA / "clusters" / "two-dgx1.yaml"), "--nodes", "3"],
     "error: --nodes: sizes the generated cluster; --cluster gives the nodes"),
    (["--trace", "jobs.csv", "--jobs", "3"], "error: --jobs: shapes the generated job stream; --trace"),
    (["--trace", "jobs.csv", "--seed", "1"], "error: --seed: shapes the generated job stream"),
    (["--trace", "jobs.csv", "--load", "0.5"], "error: --load: shapes the generated job stream"),
])
def test_cli_rejects_bad_options_with_exit_2(args, message):
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_cli_writes_the_tables_other_figures_to_summary_extra_csv(tmp_path: Path):
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text("nodes: [{name: a, topology: dgx1-v100, gpu_model: Tesla-V100-SXM2-16GB}]\n")
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_s,gpus,gpus_per_worker,model,batch_size,work_images\n"
                     "0,4,1,vgg16,64,1e6\n5,16,8,resnet50,64,2e6\n9,1,1,inception3,32,1e5\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster_file), "--trace", str(trace),
                                      "--policy", "spread", "--out", str(out), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "3 jobs on 1 node (8 GPUs)" in result.stdout
    assert "spread: 2 jobs done, 1 dropped" in result.stdout
    with (out / "summary.csv").open() as f:
        assert tuple(next(csv.reader(f))) == SUMMARY_COLUMNS
    with (out / "summary_extra.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["policy"] == "spread"
    assert (row["jobs_completed"], row["jobs_dropped"]) == ("2", "1")
    assert 0 < float(row["multi_gpu_scaling_efficiency"]) <= 1
    assert float(row["makespan_s"]) > 0 and int(row["place_calls"]) >= 2


def test_plots_show_each_figure_in_the_unit_of_the_table(tmp_path: Path, monkeypatch):
    """What the comparison plot draws for a policy is the number its table row prints, in the
    unit its title names (utilisation in %, not 0..1 beside a table in %)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    drawn = []
    real_bar, real_title = Axes.bar, Axes.set_title
    monkeypatch.setattr(Axes, "bar", lambda ax, x, h, *a, **k: (
        drawn.append([ax, list(x), list(h)]), real_bar(ax, x, h, *a, **k))[1])
    monkeypatch.setattr(Axes, "set_title", lambda ax, t, *a, **k: (
        [d.append(t) for d in drawn if d[0] is ax and len(d) == 3], real_title(ax, t, *a, **k))[1])
    result = CliRunner().invoke(app, ["simulate", "--nodes", "30", "--jobs", "200", "--seed", "5",
                                      "--out", str(tmp_path / "sim")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    table = {line.split()[0]: line.split() for line in result.stdout.splitlines()
             if line.split()[:1] and line.split()[0] in ("topology", "binpack", "spread")}
    # The comparison plot's title for each column of the table, with the table's unit.
    titles = {1: "mean job completion time (h)", 2: "p95 job completion time (h)",
              3: "mean predicted images/s per GPU (images/s)", 4: "GPU utilisation (%)",
              5: "share of jobs on >1 node (%)", 6: "mean queueing delay (h)"}
    by_title = {d[3]: d for d in drawn if len(d) == 4}
    for cell, title in titles.items():
        _, policies, heights, _ = by_title[title]
        for policy, height in zip(policies, heights, strict=True):
            printed = float(table[policy][cell].rstrip("h%").replace(",", ""))
            assert height == pytest.approx(printed, abs=0.06), (title, policy)


def test_summary_says_why_utilisation_is_low_from_the_run():
    def run(load):
        result = CliRunner().invoke(app, ["simulate", "--nodes", "30", "--jobs", "300", "--seed",
                                          "5", "--load", str(load)], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("util is ")]
        return result.stdout, line

    out, light = run(0.3)
    best = max(float(ln.split()[4].rstrip("%")) for ln in out.splitlines()
               if ln.split()[:1] and ln.split()[0] in ("topology", "binpack", "spread"))
    assert light.startswith(f"util is {best:.1f}% because the jobs need only ")
    assert "raise --load" in light
    _, busier = run(0.6)
    assert busier != light  # computed from the run, not a fixed sentence
