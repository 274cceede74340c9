"""KAI Scheduler end to end (issue 26), against the test API server's model of it
(kubesim/kai.py): `--gang` picks KAI where its CRDs are served, the job is
admitted whole or queued with KAI's reason, and nothing is ever partly bound."""

from __future__ import annotations

import pytest

from kubesim.kai import PODGROUP_KEY
from tests.launcher.backends.kubernetes.test_gang_e2e import (
    get_json,
    gpus_held,
    hog,
    hvdk8s,
    leftovers,
    listed,
    submit,
)

PODGROUPS = "podgroups.scheduling.run.ai"


@pytest.fixture
def kai(k8s):
    srv = k8s.server()
    srv.install_kai()
    srv.kai_queue("team-a")
    return srv


def launcher_ends(srv):
    srv.script_pod(r"\w+-launcher-\w{5}", logs=["total images/sec: 10"], exit_code=0,
                   duration=0.2)


def worker_pods(srv, job):
    return [p for p in srv.objects("pods", "default") if p["metadata"]["name"].startswith(
        f"{job}-worker-")]


def test_gang_picks_kai_and_a_job_that_fits_runs_whole(k8s, kai):
    launcher_ends(kai)
    result = submit(k8s, "fits", "--workers", "2", "--gpus", "8", "--gang", "--queue", "team-a")
    assert result.exit_code == 0, result.output
    assert "gang: kai found in the cluster" in result.output
    pg = kai.get(PODGROUPS, "fits")
    assert (pg["spec"]["minMember"], pg["spec"]["queue"]) == (2, "team-a")
    for pod in worker_pods(kai, "fits"):
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
        # No owner, so KAI's podgrouper leaves the pod in hvdk8s's PodGroup.
        assert pod["metadata"]["annotations"]["pod-group-name"] == "fits"
        assert "ownerReferences" not in pod["metadata"]
    assert [g["metadata"]["name"] for g in kai.objects(PODGROUPS, "default")] == ["fits"]
    assert hvdk8s(k8s, "wait", "fits", "--timeout", "30").exit_code == 0
    assert hvdk8s(k8s, "delete", "fits").exit_code == 0
    assert leftovers(kai, "fits") == []


def test_kai_job_on_a_busy_cluster_is_queued_with_kais_reason_and_binds_nothing(k8s, kai):
    hog(kai, "gpu-node-0")
    # Released after --schedule-timeout, the launcher waits for its workers (no limit with a
    # gang scheduler), so it keeps running here while the gang is queued.
    kai.script_pod(r"\w+-launcher-\w{5}", exit_code=None)
    result = submit(k8s, "busy", "--workers", "2", "--gpus", "8", "--gang-scheduler", "kai",
                    "--queue", "team-a", "--schedule-timeout", "1")
    assert result.exit_code == 0, result.output
    assert "queued by KAI" in result.output
    status = get_json(k8s, "busy")
    assert (status["phase"], status["reason"]) == ("Queued", "QueuedByKai")
    assert ("Resources were found for 1 pods while 2 are required for gang scheduling. "
            "Additional pods cannot be scheduled due to: no nodes with enough resources were "
            "found") in status["message"]
    assert "didn't have enough resources: GPUs" in status["message"]
    assert listed(k8s, "busy")["phase"] == "Queued"
    assert gpus_held(kai) == 8  # the hog's: no worker is bound while the gang waits
    assert all(not p["spec"].get("nodeName") for p in worker_pods(kai, "busy"))
    kai.delete("pods", "hog-gpu-node-0")
    kai.wait_for(lambda: all(p["spec"].get("nodeName") for p in worker_pods(kai, "busy")))
    assert hvdk8s(k8s, "delete", "busy").exit_code == 0
    assert leftovers(kai, "busy") == []


def test_kai_without_the_queue_is_refused_before_anything_is_created(k8s, kai):
    before = kai.count_requests("POST")
    result = submit(k8s, "lost", "--workers", "2", "--gpus", "1", "--gang-scheduler", "kai",
                    "--queue", "team-b")
    assert result.exit_code == 2
    assert "--queue team-b: no KAI Queue of that name" in result.output
    assert kai.count_requests("POST") == before


def test_kai_groups_the_mpijob_as_its_podgrouper_does(k8s, kai):
    launcher_ends(kai)
    kai.install_mpi_operator()
    result = submit(k8s, "op", "--workers", "2", "--gpus", "8", "--gang-scheduler", "kai",
                    "--queue", "team-a", "--mode", "operator")
    assert result.exit_code == 0, result.output
    assert hvdk8s(k8s, "wait", "op", "--timeout", "30").exit_code == 0
    mpijob = kai.get("mpijobs", "op")
    (pg,) = kai.objects(PODGROUPS, "default")
    # The MPI grouper: named after the MPIJob, minMember from schedulingPolicy.minAvailable
    # (the workers: the launcher runs on the default scheduler), queue from its label.
    assert pg["metadata"]["name"] == f"pg-op-{mpijob['metadata']['uid']}"
    assert mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert (pg["spec"]["minMember"], pg["spec"]["queue"]) == (2, "team-a")
    assert hvdk8s(k8s, "delete", "op").exit_code == 0


def test_the_model_gives_a_job_owned_pod_its_own_group_of_one(k8s):
    """Why hvdk8s's KAI workers have no owner: the BatchJob grouper puts every pod of a Job
    in its own PodGroup with minMember 1 (plugins/job/job_grouper.go), no gang."""
    srv = k8s.server()
    srv.install_kai()
    srv.kai_queue("default-queue")
    job = srv.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "j", "namespace": "default"}, "spec": {"suspend": True, "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}})
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p0", "namespace": "default", "annotations": {"pod-group-name": "mine"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                             "uid": job["metadata"]["uid"]}]},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}})
    srv.wait_for(lambda: srv.get("pods", "p0")["metadata"]["annotations"]["pod-group-name"]
                 != "mine")
    (pg,) = srv.store.items(PODGROUP_KEY)
    assert pg["metadata"]["name"] == f"pg-p0-{job['metadata']['uid']}"
    assert pg["spec"]["minMember"] == 1


def test_doctor_says_kai_applies():
    from mpijob.scheduling.doctor import Facts, assess

    findings = assess(Facts(server="s", namespace="default", version="v1.35.0",
                            groups={"scheduling.run.ai"}))
    (kai_found,) = [f for f in findings if f.check == "kai"]
    assert kai_found.status == "ok" and "KAI installed (scheduling.run.ai)" in kai_found.finding
    assert "makes a KAI PodGroup" in kai_found.effect
    assert not [f for f in findings if f.check == "gang scheduler"]


def test_kai_topology_constraint_from_hvdk8s_plan():
    """Where a KAI Topology lists the levels, the plan's domain goes to KAI: the required
    level it keeps the job in, the rack preferred inside a block; on hvdk8s's PodGroup in
    built-in mode, as the MPIJob annotations KAI's podgrouper reads in operator mode."""
    from launcher.backends.kubernetes.rendering import render
    from launcher.backends.kubernetes.snapshot import build_snapshot
    from launcher.preparing.planning import plan_job
    from mpijob.jobspec.spec import build_spec
    from tests.launcher.backends.kubernetes.test_k8s_snapshot import node
    from tests.mpijob.scheduling.test_network_io import BLOCK, RACK, SSH

    nodes = [node(n, labels={BLOCK: "b1", RACK: r}) for n, r in
             (("a1", "r1"), ("b1", "r2"), ("b2", "r3"))]
    topo = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
            "metadata": {"name": "dc"}, "spec": {"levels": [{"nodeLabel": BLOCK},
                                                            {"nodeLabel": RACK}]}}
    snap = build_snapshot(nodes, [], kai_topologies=[topo])
    assert (snap.cluster.node("b1").network.scheduler,
            snap.cluster.node("b1").network.topology) == ("kai", "dc")
    spec = build_spec(name="j", workers=16, gpus_per_worker=1, gang="kai", queue="q")
    plan = plan_job(spec, snap.cluster)
    pg = next(o for o in render(spec, placement=plan.placement, ssh=SSH, benchmark_source="x")
              if o["kind"] == "PodGroup")
    assert pg["spec"]["topologyConstraint"] == {"topology": "dc", "requiredTopologyLevel": BLOCK,
                                                "preferredTopologyLevel": RACK}
    mpijob = render(spec, mode="operator", placement=plan.placement, benchmark_source="x")[0]
    notes = mpijob["metadata"]["annotations"]
    assert (notes["kai.scheduler/topology"], notes["kai.scheduler/topology-required-placement"],
            notes["kai.scheduler/topology-preferred-placement"]) == ("dc", BLOCK, RACK)
    # Without a KAI Topology nothing is emitted.
    plain = plan_job(spec, build_snapshot(nodes, []).cluster)
    pg = next(o for o in render(spec, placement=plain.placement, ssh=SSH, benchmark_source="x")
              if o["kind"] == "PodGroup")
    assert "topologyConstraint" not in pg["spec"]
