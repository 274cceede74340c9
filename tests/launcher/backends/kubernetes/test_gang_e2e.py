"""Gang scheduling end to end through the CLI, against the test API server running the
models of the MPI Operator (kubesim/mpi_operator.py), Kueue (kueue.py) and the gang
schedulers (scheduler.py): a job that fits runs whole, one that cannot fit holds no GPU and
says why, delete leaves nothing."""

from __future__ import annotations

import json

import pytest

from mpijob.jobspec import names
from tests.k8s_env import hvdk8s
from tests.paths import ROOT

KINDS = ("pods", "jobs", "services", "configmaps", "secrets", "mpijobs", "workloads",
         "podgroups.scheduling.volcano.sh")


def submit(k8s, name, *args):
    return hvdk8s(k8s, "submit", "mpi", "--name", name, "--image", "img:1", *args,
                  "python", "train.py")


def leftovers(srv, job) -> list[str]:
    out = []
    for kind in KINDS:
        try:
            objs = srv.objects(kind, "default")
        except KeyError:  # that API is not installed
            continue
        for o in objs:
            m = o["metadata"]
            owned = any(r.get("name") == job for r in m.get("ownerReferences") or [])
            if (m.get("labels") or {}).get(names.LABEL_JOB) == job or owned or m["name"] == job:
                out.append(f"{kind}/{m['name']}")
    return out


def gpus_held(srv) -> int:
    total = 0
    for p in srv.objects("pods", "default"):
        if p["spec"].get("nodeName") and p["status"].get("phase") in ("Pending", "Running"):
            for c in p["spec"]["containers"]:
                total += int((c.get("resources") or {}).get("limits", {}).get(
                    "nvidia.com/gpu", 0))
    return total


def get_json(k8s, name) -> dict:
    result = hvdk8s(k8s, "get", name, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def listed(k8s, name) -> dict:
    """The job's row of `hvdk8s list -o json` (one call per kind, none per job)."""
    result = hvdk8s(k8s, "list", "-o", "json")
    assert result.exit_code == 0, result.output
    return next(j for j in json.loads(result.stdout) if j["name"] == name)


@pytest.fixture
def kueue(k8s):
    srv = k8s.server()
    srv.install_kueue()
    srv.install_mpi_operator()
    srv.kueue_queue("team-a", {"nvidia.com/gpu": 8, "cpu": 64, "memory": "256Gi"})
    srv.script_pod(r"\w+-launcher-\w{5}", logs=["total images/sec: 10"], exit_code=0,
                   duration=0.2)
    srv.script_pod(r"\w+-worker-\d+", exit_code=None)
    return srv


# --- Kueue, operator mode -----------------------------------------------------------------------
def test_kueue_operator_job_that_fits_is_admitted_whole_and_runs(k8s, kueue):
    result = submit(k8s, "fits", "--workers", "2", "--gpus", "2", "--gang-scheduler", "kueue",
                    "--queue", "team-a", "--mode", "operator")
    assert result.exit_code == 0, result.output
    assert "queued in Kueue LocalQueue team-a" in result.output
    assert hvdk8s(k8s, "wait", "fits", "--timeout", "30").exit_code == 0
    (wl,) = kueue.objects("workloads", "default")
    assert wl["spec"]["queueName"] == "team-a"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("launcher", 1),
                                                                         ("worker", 1)]
    assert any(c["type"] == "Admitted" and c["status"] == "True"
               for c in wl["status"]["conditions"])
    # The Kueue webhook created it suspended; Kueue resumed it on admission.
    mj = kueue.get("mpijobs", "fits")
    assert [c["reason"] for c in mj["status"]["conditions"] if c["type"] == "Suspended"] == [
        "MPIJobResumed"]
    assert hvdk8s(k8s, "delete", "fits").exit_code == 0
    assert leftovers(kueue, "fits") == []


def test_kueue_operator_job_over_quota_holds_no_gpu_and_says_why(k8s, kueue):
    result = submit(k8s, "big", "--workers", "2", "--gpus", "8", "--gang-scheduler", "kueue",
                    "--queue", "team-a", "--mode", "operator")
    assert result.exit_code == 0, result.output
    kueue.wait_for(lambda: kueue.objects("workloads", "default") and get_json(
        k8s, "big")["phase"] == "Queued")
    status = get_json(k8s, "big")
    assert status["reason"] == "QueuedByKueue"
    assert (listed(k8s, "big")["phase"], listed(k8s, "big")["reason"]) == ("Queued",
                                                                           "QueuedByKueue")
    # The workers' default cpu/memory (a share of each node) are over this quota too.
    assert "couldn't assign flavors to pod set worker: " in status["message"]
    assert ("insufficient quota for nvidia.com/gpu in flavor default-flavor, request > "
            "maximum capacity (16 > 8)") in status["message"]
    assert gpus_held(kueue) == 0 and kueue.objects("pods", "default") == []
    # get's one cause: the Workload's condition, with the fix
    assert status["why"].startswith("the gang is not admitted (QueuedByKueue): mpijob-big-")
    assert "couldn't assign flavors to pod set worker: " in status["why"]
    assert "why: the gang is not admitted" in hvdk8s(k8s, "get", "big").stdout
    waited = hvdk8s(k8s, "wait", "big", "--timeout", "0.5")
    assert waited.exit_code == 124 and "still Queued" in waited.output
    assert hvdk8s(k8s, "delete", "big").exit_code == 0
    assert leftovers(kueue, "big") == []


def test_kueue_unknown_local_queue_is_refused_before_anything_is_created(k8s, kueue):
    before = kueue.count_requests("POST")
    result = submit(k8s, "lost", "--workers", "2", "--gpus", "1", "--gang-scheduler", "kueue",
                    "--queue", "nope", "--mode", "operator")
    assert result.exit_code == 2
    assert "--queue nope: no Kueue LocalQueue of that name in namespace default" in result.output
    assert kueue.count_requests("POST") == before


# --- Volcano, operator mode ---------------------------------------------------------------------
def test_volcano_operator_with_gang_scheduling_runs_whole(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    srv.install_mpi_operator(gang_scheduling="volcano")
    # The launcher runs 2 s: a job that ended before submit's first look takes its PodGroup
    # with it, and submit then looks for it for 30 s.
    srv.script_pod(r"\w+-launcher-\w{5}", logs=[(2.0, "total images/sec: 10")], exit_code=0)
    srv.script_pod(r"\w+-worker-\d+", exit_code=None)
    result = submit(k8s, "vop", "--workers", "2", "--gpus", "8", "--gang-scheduler", "volcano",
                    "--mode", "operator")
    assert result.exit_code == 0, result.output
    assert "in Volcano's PodGroup vop" in result.output
    assert hvdk8s(k8s, "wait", "vop", "--timeout", "60").exit_code == 0
    assert hvdk8s(k8s, "delete", "vop").exit_code == 0
    assert leftovers(srv, "vop") == []


# --- Volcano, built-in mode: PodGroup phases and the pod webhook ------------------------------
def hog(srv, node, gpus=8, name=None):
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name or f"hog-{node}"},
                "spec": {"nodeName": node, "containers": [{
                    "name": "c", "image": "x", "resources": {"limits": {
                        "nvidia.com/gpu": str(gpus)}}}]}})


def test_volcano_pod_group_with_min_resources_turns_pending_and_its_pods_are_refused(k8s):
    """The race the issue describes, on the model: Volcano < v1.6, a busy cluster."""
    srv = k8s.server()
    srv.install_group("volcano")
    srv.volcano_webhook.version = "v1.5.0"
    hog(srv, "gpu-node-0")
    srv.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg1", "namespace": "default"},
                "spec": {"minMember": 2, "minResources": {"nvidia.com/gpu": "16"}}})
    srv.wait_for(lambda: (srv.get("podgroups.scheduling.volcano.sh", "pg1").get("status")
                          or {}).get("phase") == "Pending")
    from kubesim import errors
    with pytest.raises(errors.ApiError, match=r"failed to create pod <default/w0> as the "
                                              r"podgroup phase is Pending"):
        srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "w0", "annotations": {"scheduling.k8s.io/group-name": "pg1"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]}})
    # Without minResources the group is enqueued at once and its pods are admitted.
    srv.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg2", "namespace": "default"}, "spec": {"minMember": 2}})
    srv.wait_for(lambda: (srv.get("podgroups.scheduling.volcano.sh", "pg2").get("status")
                          or {}).get("phase") == "Inqueue")


def test_volcano_built_in_job_on_a_busy_cluster_queues_then_runs_whole(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    srv.volcano_webhook.version = "v1.5.0"
    hog(srv, "gpu-node-0")
    hog(srv, "gpu-node-1")
    # Released after --schedule-timeout, the launcher waits for its workers (no limit with a
    # gang scheduler): it keeps running while the gang is queued, so `get` sees it Queued
    # however late it asks (a launcher scripted to exit at once raced `get` under load).
    srv.script_pod(r"\w+-launcher-\w{5}", exit_code=None)
    result = submit(k8s, "busy", "--workers", "2", "--gpus", "8", "--gang-scheduler", "volcano",
                    "--schedule-timeout", "1")
    assert result.exit_code == 0, result.output
    assert "queued by Volcano" in result.output
    pg = srv.get("podgroups.scheduling.volcano.sh", "busy")
    assert "minResources" not in pg["spec"] and pg["status"]["phase"] == "Inqueue"
    status = get_json(k8s, "busy")
    assert (status["phase"], status["reason"]) == ("Queued", "QueuedByVolcano")
    assert listed(k8s, "busy")["phase"] == "Queued"
    assert gpus_held(srv) == 16  # only the hogs: no worker holds a GPU while queued
    srv.delete("pods", "hog-gpu-node-0")
    srv.delete("pods", "hog-gpu-node-1")
    srv.wait_for(lambda: gpus_held(srv) == 16 and all(  # the whole gang bound at once
        p["spec"].get("nodeName") for p in srv.objects("pods", "default")
        if p["metadata"]["name"].startswith("busy-worker-")))
    assert hvdk8s(k8s, "delete", "busy").exit_code == 0
    assert leftovers(srv, "busy") == []


def test_scheduler_plugins_built_in_job_that_cannot_fit_holds_no_gpu(k8s):
    srv = k8s.server()
    srv.install_group("scheduler-plugins")
    hog(srv, "gpu-node-0")
    result = submit(k8s, "wide", "--workers", "2", "--gpus", "8", "--gang-scheduler",
                    "scheduler-plugins", "--schedule-timeout", "1")
    assert result.exit_code == 0, result.output
    assert "does not fit the cluster now" in result.output
    status = get_json(k8s, "wide")
    assert (status["phase"], status["reason"]) == ("Queued", "QueuedByCoscheduling")
    # The plugin's PreFilter checks the PodGroup's minResources against the free total
    # first, so its message (not the per-node fit's) is what a real cluster shows.
    assert "resource gap" in status["message"] and "nvidia.com/gpu" in status["message"]
    row = listed(k8s, "wide")
    assert (row["phase"], row["reason"]) == ("Queued", "QueuedByCoscheduling")
    assert "resource gap" in row["message"] and "nvidia.com/gpu" in row["message"]
    assert gpus_held(srv) == 8  # the hog's: the queued gang binds nothing
    assert hvdk8s(k8s, "delete", "wide").exit_code == 0
    assert leftovers(srv, "wide") == []
    # What could never fit, even on an idle cluster, is refused before anything is created.
    before = srv.count_requests("POST")
    never = submit(k8s, "never", "--workers", "3", "--gpus", "8", "--gang-scheduler",
                   "scheduler-plugins")
    assert never.exit_code == 2 and "cannot be placed" in never.output
    assert srv.count_requests("POST") == before


# --- MPI Operator without --gang-scheduling ----------------------------------------------------
def test_operator_without_gang_scheduling_is_refused_before_anything_is_created(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    srv.install_mpi_operator()  # the default deployment: no --gang-scheduling
    before = srv.count_requests("POST")
    result = submit(k8s, "nog", "--workers", "2", "--gpus", "1", "--gang-scheduler", "volcano",
                    "--mode", "operator")
    assert result.exit_code == 2
    assert ("the MPI Operator (mpi-operator/mpi-operator) runs without --gang-scheduling, so "
            "it makes no PodGroup") in result.output
    assert "use --mode pods" in result.output
    assert srv.count_requests("POST") == before and leftovers(srv, "nog") == []


def test_operator_without_gang_scheduling_is_detected_when_its_deployment_is_hidden(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    srv.install_mpi_operator()
    srv.forbid("list", "deployments")  # typical for a user who may only use one namespace
    result = submit(k8s, "nog", "--workers", "2", "--gpus", "1", "--gang-scheduler", "volcano",
                    "--mode", "operator")
    assert result.exit_code == 1
    assert "created worker pods of job nog but no Volcano PodGroup" in result.output
    srv.wait_for(lambda: leftovers(srv, "nog") == [])  # rolled back: nothing left


def test_gang_in_operator_mode_without_a_gang_scheduler_is_refused(k8s):
    srv = k8s.server()
    srv.install_mpi_operator()
    before = srv.count_requests("POST")
    result = submit(k8s, "lone", "--workers", "2", "--gpus", "1", "--gang", "--mode", "operator")
    assert result.exit_code == 2
    assert ("--gang with --mode operator needs Volcano, scheduler-plugins, Kueue or KAI"
            in result.output)
    assert "use --mode pods" in result.output
    assert srv.count_requests("POST") == before


def test_readme_table_covers_every_mode_and_gang_scheduler():

    from mpijob.k8s.gang import SUPPORT

    readme = ROOT.joinpath("README.md").read_text()
    titles = {"none": "none", "volcano": "Volcano", "scheduler-plugins": "scheduler-plugins",
              "kueue": "Kueue", "kai": "KAI", "workload-api": "Workload API"}
    for mode, gang in SUPPORT:
        assert f"  | {mode} | {titles[gang]} | " in readme, (mode, gang)


def test_kueue_without_its_mpijob_integration_is_refused(k8s):
    srv = k8s.server()
    srv.install_kueue(frameworks=("batch/job",))
    srv.install_mpi_operator()
    srv.kueue_queue("team-a", {"nvidia.com/gpu": 8})
    before = srv.count_requests("POST")
    args = ("--workers", "2", "--gpus", "1", "--gang-scheduler", "kueue", "--queue", "team-a",
            "--mode", "operator")
    result = submit(k8s, "off", *args)
    assert result.exit_code == 2 and "kubeflow.org/mpijob integration is off" in result.output
    assert srv.count_requests("POST") == before  # read from kueue-manager-config: refused first
    # Configuration hidden: the MPIJob comes back from the API not suspended, so Kueue does
    # not manage it; the job is rolled back.
    srv.forbid("get", "configmaps", namespace="kueue-system")
    result = submit(k8s, "off", *args)
    assert result.exit_code == 2 and "kubeflow.org/mpijob integration is off" in result.output
    srv.wait_for(lambda: leftovers(srv, "off") == [])
