"""The simulator on NVLink partitions: placement that keeps multi-tray jobs in one
partition (the product's) beats the same policy blind to partitions, because a job split
across partitions meets on the network instead of NVLink (benchmarks/simulator/nvl72.py
measures it at scale)."""

from dataclasses import replace

from mpijob.perf.simulate import simulate
from mpijob.perf.simworkload import generate_jobs
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.presets import preset
from mpijob.wellknown import GPU_PRODUCT_LABEL

PRODUCT = "NVIDIA-GB200"


def nvl72(partitions=2, trays=6, compute_domains=True):
    topo = preset("gb200-nvl72-tray")
    return Cluster(tuple(
        Node(name=f"p{p}-tray{t}", gpus=4, topology=topo, gpu_model=PRODUCT,
             network_gbps=400.0, labels={GPU_PRODUCT_LABEL: PRODUCT,
                                         "feature.node.kubernetes.io/rdma.available": "true"},
             nvlink_domain=f"uuid.{p}")
        for p in range(partitions) for t in range(trays)), compute_domains=compute_domains)


def jobs(cluster, count=150, seed=0):
    # Workers of at most one tray; fp16, where a 400 Gb NIC is a split job's bottleneck.
    return [replace(j, gpus_per_worker=min(j.gpus_per_worker, 4))
            for j in generate_jobs(count, seed=seed, cluster=cluster, precision="fp16")]


def run(cluster, js, blind):
    return simulate(cluster, js, "topology", precision="fp16", ignore_partitions=blind)


def test_partition_aware_placement_has_higher_throughput_per_gpu():
    cluster = nvl72()
    js = jobs(cluster)
    aware, blind = run(cluster, js, False), run(cluster, js, True)
    split = [sum(1 for o in r.outcomes if o.nodes_used > 1 and not o.nvlink_across_nodes)
             for r in (aware, blind)]
    assert split[0] < split[1]
    assert aware.summary.mean_images_per_sec_per_gpu > blind.summary.mean_images_per_sec_per_gpu
    assert aware.summary.mean_jct_s < blind.summary.mean_jct_s


def test_blind_against_blind_shows_no_gain():
    # The comparison above can fail: with partitions hidden on both sides it is a tie.
    cluster = nvl72()
    js = jobs(cluster)
    a, b = run(cluster, js, True), run(cluster, js, True)
    assert a.summary.mean_images_per_sec_per_gpu == b.summary.mean_images_per_sec_per_gpu


def test_without_compute_domains_no_job_gets_nvlink_across_trays():
    cluster = nvl72(compute_domains=False)
    result = run(cluster, jobs(cluster), False)
    assert any(o.nodes_used > 1 for o in result.outcomes)
    assert not any(o.nvlink_across_nodes for o in result.outcomes)


def test_one_partition_job_is_priced_at_nvlink_speed():
    # 8 GPUs on two trays of one partition: NVLink with the channel, the network without.
    js = [replace(j, submit_s=0.0, gpus=8, gpus_per_worker=4, model="vgg16", batch_size=64)
          for j in jobs(nvl72(), count=1)]
    speeds = []
    for cd in (True, False):
        outcome = run(nvl72(partitions=1, trays=2, compute_domains=cd), js, False).outcomes[0]
        speeds.append(outcome.images_per_sec)
        assert outcome.nvlink_across_nodes is cd
    assert speeds[0] > 1.45 * speeds[1]  # 1.48: the fixed step time hides a little more
