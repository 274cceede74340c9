"""The Kubernetes backend against the test API server (or a real cluster, see k8s_env)."""

from __future__ import annotations

import pytest

from kubesim.kubelet import Run
from launcher.backends.kubernetes import submit as submit_module
from launcher.backends.kubernetes.backend import OPERATOR_MISSING, KubernetesOptions
from launcher.backends.kubernetes.client import ApiError
from launcher.backends.kubernetes.status import ANNOTATION_IMAGES_PER_SEC
from launcher.errors import NotFound, Timeout, UsageError, UserError
from launcher.preparing.planning import Plan
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.start_gate import is_worker
from mpijob.scheduling.placement import PlacementRequest, place
from tests.launcher.backends.contract_calls import create_job

KINDS = ("pods", "jobs", "services", "configmaps", "secrets")


def make_spec(k8s, name="vgg16", **fields):
    fields.setdefault("command", ("python", "train.py"))
    return build_spec(name=name, namespace=k8s.namespace, image=k8s.image, **fields)


def plan(backend, spec):
    cluster = backend.snapshot().cluster
    return place(cluster, PlacementRequest.from_spec(spec), policy=spec.placement_policy)


def placed_job(k8s, **fields):
    """The test server, a backend, a job's spec and its placement on the cluster as it is."""
    srv = k8s.server()
    backend = k8s.backend()
    spec = make_spec(k8s, **fields)
    return srv, backend, spec, plan(backend, spec)


def leftovers(srv, job, extra=()):
    out = []
    for kind in (*KINDS, *extra):
        out += [f"{kind}/{o['metadata']['name']}" for o in srv.objects(kind, "default")
                if (o["metadata"].get("labels") or {}).get(names.LABEL_JOB) == job]
    return out


def posts(srv) -> int:
    return srv.count_requests("POST")


def without_owner(obj: dict) -> dict:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}}


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_submit_sends_exactly_what_prepare_returned(k8s, monkeypatch, mode):
    """The backend contract (launcher.backends.base.Prepared): what a client dry run
    prints is what is created, but for the ownerReference to the root, whose uid only
    exists once the root does."""
    srv, backend, spec, placement = placed_job(k8s, workers=2, gpus_per_worker=1)
    if mode == "operator":
        srv.install_mpi_operator()
    sent: list[dict] = []
    real_create = submit_module.create

    def recording_create(client, obj, submission, **kw):
        sent.append(obj)
        return real_create(client, obj, submission, **kw)

    monkeypatch.setattr(submit_module, "create", recording_create)
    options = KubernetesOptions(mode=mode, schedule_timeout=20)
    planned, _ = backend.preflight(Plan(spec, placement), options)
    prepared = backend.prepare(planned, options)
    backend.submit(prepared, options)
    assert [without_owner(o) for o in sent] == [without_owner(o) for o in prepared.objects]
    assert "ownerReferences" not in sent[0]["metadata"]
    # Built-in workers are owned by the start gate's pod (test_start_gate.py), the rest by
    # the root.
    assert all(o["metadata"]["ownerReferences"][0]["kind"] == "Pod" if is_worker(o)
               else o["metadata"]["ownerReferences"][0]["name"] == sent[0]["metadata"]["name"]
               for o in sent[1:])


# --- the happy path -----------------------------------------------------------------------------
def test_submit_get_wait_logs_delete(k8s):
    srv, backend, spec, placement = placed_job(k8s, workers=4, gpus_per_worker=1)
    k8s.script_launcher("vgg16", [(0.3, "hvdk8s: starting"), (0.2, "total images/sec: 321.5")])
    result = create_job(backend, spec, placement, mode="pods", schedule_timeout=20)
    assert "all workers scheduled; launcher released" in result.message
    assert [o["kind"] for o in result.objects] == ["Job", "ConfigMap", "Secret", "Service",
                                                   "Job", "Pod"]
    root_uid = result.objects[0]["metadata"]["uid"]
    for obj in result.objects[1:-1]:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == root_uid
    # The worker is owned by the start gate's pod (test_start_gate.py).
    assert result.objects[-1]["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    workers = [p for p in srv.objects("pods", "default") if "worker" in p["metadata"]["name"]]
    assert len(workers) == 1
    assert workers[0]["spec"]["nodeName"] == placement.assignments[0].node
    assert workers[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"

    status = backend.wait("vgg16", timeout=30)
    assert status.phase == "Succeeded" and status.images_per_sec == 321.5
    assert "total images/sec: 321.5" in list(backend.logs("vgg16"))
    # cleanPodPolicy Running: the worker (sshd, never released by this fake) stays until
    # `tidy` removes it (wait only reads).
    assert [p["metadata"]["name"] for p in srv.objects("pods", "default")
            if "worker" in p["metadata"]["name"]] == ["vgg16-worker-0"]
    assert "job vgg16: removed vgg16-worker-0 (cleanPodPolicy Running)" in list(
        backend.tidy("vgg16"))
    assert [p["metadata"]["name"] for p in srv.objects("pods", "default")
            if "worker" in p["metadata"]["name"] and not p["metadata"].get("deletionTimestamp")] == []
    assert backend.delete("vgg16") is True
    assert leftovers(srv, "vgg16") == []
    assert backend.delete("vgg16") is False
    with pytest.raises(NotFound):
        backend.get("vgg16")


def test_server_dry_run_creates_nothing(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    spec = make_spec(k8s, workers=2, gpus_per_worker=2)
    result = create_job(backend, spec, plan(backend, spec), dry_run=True)
    assert [o["kind"] for o in result.objects][:4] == ["Job", "ConfigMap", "Secret", "Service"]
    assert all(o["metadata"].get("uid") for o in result.objects), "the server's answers"
    assert leftovers(srv, "vgg16") == []
    srv.forbid("create", "secrets", "default")
    with pytest.raises(UserError, match="forbidden: cannot create secrets in namespace default"):
        create_job(backend, spec, None, dry_run=True)


# --- all or nothing -----------------------------------------------------------------------------
def test_plan_that_no_longer_fits_is_refused_before_anything_is_created(k8s):
    srv, backend, spec, placement = placed_job(k8s, workers=2, gpus_per_worker=8)
    assert placement.feasible
    srv.cordon("gpu-node-1")
    before = posts(srv)
    with pytest.raises(UserError, match="does not fit the cluster now") as err:
        create_job(backend, spec, placement)
    assert "gpu-node-1" in str(err.value) or "unschedulable" in str(err.value).lower()
    assert posts(srv) == before
    assert leftovers(srv, "vgg16") == []


def test_stale_plan_is_placed_again(k8s):
    srv, backend, spec, placement = placed_job(k8s, workers=1, gpus_per_worker=4)
    planned = placement.assignments[0].node
    srv.cordon(planned)
    result = create_job(backend, spec, placement, schedule_timeout=20)
    assert f"the plan went stale (node {planned} is cordoned)" in result.message
    pods = [p for p in srv.objects("pods", "default") if "worker" in p["metadata"]["name"]]
    assert pods[0]["spec"]["nodeName"] != planned


def test_workers_not_scheduled_in_time_roll_back_with_the_reason(k8s):
    srv, backend, spec, placement = placed_job(k8s, workers=4, gpus_per_worker=1)
    target = placement.assignments[0].node
    real_create = backend.client.create

    def create_then_cordon(obj, dry_run=False):
        out = real_create(obj, dry_run=dry_run)
        if obj["kind"] == "Job":  # the node goes away between plan and schedule
            srv.cordon(target)
        return out

    backend.client.create = create_then_cordon
    with pytest.raises(UserError) as err:
        create_job(backend, spec, placement, schedule_timeout=1)
    message = str(err.value)
    assert message.startswith("workers not scheduled within 1s: vgg16-worker-0: 0/2 nodes are "
                              "available:")
    assert "was deleted (all or nothing" in message
    assert leftovers(srv, "vgg16") == []


def test_requests_beyond_capacity_roll_back(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    # CPU-only: no GPU plan to re-check; the scheduler finds no node with 100 free cores.
    spec = make_spec(k8s, workers=2, cpu="100")
    with pytest.raises(UserError, match=r"vgg16-worker-0: 0/2 nodes are available: 2 "
                                        r"Insufficient cpu"):
        create_job(backend, spec, None, schedule_timeout=1)
    assert leftovers(srv, "vgg16") == []


# --- gang schedulers ----------------------------------------------------------------------------
def test_volcano_gang_is_created_and_scheduled_together(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    backend = k8s.backend()
    assert backend.detect_gang_scheduler() == "volcano"
    spec = make_spec(k8s, workers=2, gpus_per_worker=4, gang="volcano")
    result = create_job(backend, spec, plan(backend, spec), schedule_timeout=20)
    assert "PodGroup" in [o["kind"] for o in result.objects]
    assert "launcher released" in result.message
    assert srv.objects("podgroups.scheduling.volcano.sh", "default")
    assert backend.delete("vgg16")
    assert leftovers(srv, "vgg16", ("podgroups.scheduling.volcano.sh",)) == []


def test_gang_that_does_not_fit_stays_queued_and_get_says_why(k8s):
    srv = k8s.server()
    srv.install_group("volcano")
    backend = k8s.backend()
    spec = make_spec(k8s, workers=3, gpus_per_worker=8, gang="volcano")
    result = create_job(backend, spec, None, schedule_timeout=1)
    assert result.message.startswith("job vgg16: queued by Volcano: workers not scheduled within 1s")
    status = backend.get("vgg16")
    assert (status.phase, status.reason) == ("Queued", "QueuedByVolcano")
    # The gang scheduler's reason, from the job's PodGroup.
    assert status.message == ("PodGroup vgg16 Inqueue: 0/2 nodes are available: "
                              "2 Insufficient nvidia.com/gpu.")
    assert all(r.node is None for r in status.replicas if r.role == "worker"), "nothing bound"
    with pytest.raises(Timeout, match=r"still Queued after 0.5s \(QueuedByVolcano: PodGroup"):
        backend.wait("vgg16", timeout=0.5)
    assert backend.delete("vgg16")  # a queued job deletes whole
    assert leftovers(srv, "vgg16", ("podgroups.scheduling.volcano.sh",)) == []


def test_stale_plan_does_not_starve_a_gang_job(k8s):
    """The plan chose gpu-node-0; it fills up before the job is created. The gang scheduler
    is in charge, so the planned node is only preferred and the job runs on gpu-node-1."""
    srv = k8s.server()
    srv.install_group("volcano")
    backend = k8s.backend()
    spec = make_spec(k8s, workers=4, gpus_per_worker=1, gang="volcano")
    placement = plan(backend, spec)
    planned = placement.assignments[0].node
    srv.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"},
                "spec": {"nodeName": planned, "containers": [{
                    "name": "c", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
    result = create_job(backend, spec, placement, schedule_timeout=10)
    assert "launcher released" in result.message
    workers = [p for p in srv.objects("pods", "default") if "worker" in p["metadata"]["name"]]
    assert {p["spec"]["nodeName"] for p in workers} == {"gpu-node-1"} != {planned}
    affinity = workers[0]["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"] == {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [planned]}]}


def test_gang_scheduler_asked_for_but_absent(k8s):
    k8s.server()
    spec = make_spec(k8s, workers=1, gpus_per_worker=1, gang="scheduler-plugins")
    with pytest.raises(UserError, match="scheduler-plugins .* is not installed"):
        create_job(k8s.backend(), spec, None)


# --- name clashes -------------------------------------------------------------------------------
def test_existing_job_is_refused_and_left_untouched(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    spec = make_spec(k8s, workers=1, gpus_per_worker=1)
    create_job(backend, spec, plan(backend, spec), schedule_timeout=20)
    srv.wait_for(lambda: backend.get("vgg16").phase == "Running")
    srv.clear_requests()
    with pytest.raises(UserError) as err:
        create_job(backend, spec, plan(backend, spec))
    assert str(err.value).startswith("job vgg16 already exists in namespace default (created ")
    assert "phase Running); delete it first: hvdk8s delete vgg16 -n default" in str(err.value)
    writes = [r for r in srv.request_log if r.method in ("POST", "PUT", "PATCH", "DELETE")]
    assert writes == []
    assert backend.get("vgg16").phase == "Running"


def test_leftovers_block_a_resubmit_until_deleted(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "vgg16-worker", "namespace": "default",
                             "labels": names.job_labels("vgg16")},
                "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}})
    backend = k8s.backend()
    spec = make_spec(k8s, workers=1, gpus_per_worker=1)
    with pytest.raises(UserError, match="phase partially deleted"):
        create_job(backend, spec, None)
    assert backend.delete("vgg16") is True
    create_job(backend, spec, None, schedule_timeout=20)


def test_a_foreign_job_with_the_launcher_name_is_refused(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "vgg16-launcher", "namespace": "default"},
                "spec": {"suspend": True, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}})
    before = posts(srv)
    with pytest.raises(UserError, match="a Job named vgg16-launcher that is not an hvdk8s job"):
        create_job(k8s.backend(), make_spec(k8s, workers=1), None)
    assert posts(srv) == before


def test_a_foreign_object_with_a_clashing_name_rolls_back(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "vgg16-config", "namespace": "default"}, "data": {}})
    backend = k8s.backend()
    with pytest.raises(UserError, match="configmaps vgg16-config .* not part of job vgg16"):
        create_job(backend, make_spec(k8s, workers=1), None)
    assert leftovers(srv, "vgg16") == []
    assert srv.get("configmaps", "vgg16-config"), "someone else's object is not touched"


# --- refusals and faults --------------------------------------------------------------------------
def test_rbac_refusal_names_verb_and_resource_and_rolls_back(k8s):
    srv = k8s.server()
    srv.forbid("create", "pods", "default")
    backend = k8s.backend()
    with pytest.raises(UserError) as err:
        create_job(backend, make_spec(k8s, workers=2), None)
    assert str(err.value).startswith("forbidden: cannot create pods in namespace default (RBAC)")
    assert leftovers(srv, "vgg16") == []


def test_flaky_server_is_retried(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    backend.client.retry.sleep = lambda s: None
    srv.fail_next(2, 503, method="POST")
    srv.fail_next(1, 429, method="GET", path_regex=r"/pods$")
    result = create_job(backend, make_spec(k8s, workers=2), None, schedule_timeout=20)
    assert "launcher released" in result.message
    assert srv.faults.pending == 0
    assert len(srv.objects("pods", "default")) >= 2


def test_create_retried_after_it_landed_counts_as_created(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    real_create = backend.client.create
    seen = set()

    def lost_answer(obj, dry_run=False):
        if obj["kind"] == "ConfigMap" and "cm" not in seen:
            seen.add("cm")
            real_create(obj, dry_run=dry_run)  # it landed, but the answer was lost ...
        return real_create(obj, dry_run=dry_run)  # ... so the retry meets 409

    backend.client.create = lost_answer
    result = create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    assert "launcher released" in result.message
    assert len(srv.objects("configmaps", "default")) == 2  # ours + kube-root-ca.crt


def test_a_create_whose_answer_was_lost_is_retried_and_counts_as_created(k8s):
    """The connection drops after the server created the ConfigMap: urllib3's Retry (POST
    included) sends it again, the server answers 409, and the submission annotation shows
    the object is this submit's own."""
    srv = k8s.server()
    backend = k8s.backend()
    backend.client.retry.sleep = lambda s: None
    srv.fail_next(1, method="POST", path_regex=r"/configmaps$", lose_answer=True)
    srv.clear_requests()
    result = create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    assert "launcher released" in result.message
    assert srv.count_requests("POST", r"/configmaps$") == 2
    assert len(srv.objects("configmaps", "default")) == 2  # ours + kube-root-ca.crt


def test_ctrl_c_during_submit_rolls_back(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    real_create = backend.client.create
    calls = []

    def interrupted(obj, dry_run=False):
        calls.append(obj["kind"])
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_create(obj, dry_run=dry_run)

    backend.client.create = interrupted
    with pytest.raises(KeyboardInterrupt):
        create_job(backend, make_spec(k8s, workers=2, gpus_per_worker=1), None)
    assert calls == ["Job", "ConfigMap", "Secret", "Service"]
    assert leftovers(srv, "vgg16") == []


# --- failures, logs, cleanup ------------------------------------------------------------------------
def test_failing_worker_fails_the_job_with_its_log(k8s):
    srv = k8s.server()
    srv.script_pod("vgg16-worker-1", logs=[(0.2, "NCCL WARN Call to connect returned "
                                                 "Connection refused"), "fatal"], exit_code=1)
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, workers=2), None, schedule_timeout=20)
    status = backend.wait("vgg16", timeout=20)
    assert (status.phase, status.reason) == ("Failed", "WorkerFailed")
    assert status.message.startswith("vgg16-worker-1 failed (exit 1")
    assert status.log_tail[-2:] == ["NCCL WARN Call to connect returned Connection refused",
                                    "fatal"]
    assert list(backend.logs("vgg16", worker=1))[-1] == "fatal"
    with pytest.raises(UsageError, match=r"--worker: job vgg16 has worker pods 0\.\.1, not 7"):
        list(backend.logs("vgg16", worker=7))


def test_wait_times_out(k8s):
    k8s.server()
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    with pytest.raises(Timeout, match="job vgg16 is still Running after 0.5s") as err:
        backend.wait("vgg16", timeout=0.5)
    assert err.value.exit_code == 124


def test_follow_survives_a_replaced_launcher_and_ends_with_the_job(k8s):
    srv = k8s.server()
    srv.script_pod(r"vgg16-launcher-.*", runs=[
        Run([(0.2, "attempt 1"), "boom"], exit_code=1),
        Run([(0.2, "attempt 2"), "total images/sec: 42.0"], exit_code=0)])
    backend = k8s.backend(poll=0.1)
    create_job(backend, make_spec(k8s, workers=1, run_policy={"backoff_limit": 1}), None, schedule_timeout=20)
    lines = list(backend.logs("vgg16", follow=True))
    assert lines == ["attempt 1", "boom", "attempt 2", "total images/sec: 42.0"]
    assert backend.get("vgg16").phase == "Succeeded"


def test_logs_of_all_pods_are_prefixed(k8s):
    srv = k8s.server()
    srv.script_pod("vgg16-worker-0", logs=["sshd ready"], exit_code=None)
    k8s.script_launcher("vgg16", ["mpirun started"], exit_code=None)
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    srv.wait_for(lambda: [p["status"].get("phase") for p in srv.objects("pods", "default")
                          if names.LABEL_JOB in p["metadata"]["labels"]] == ["Running", "Running"])
    launcher = next(p["metadata"]["name"] for p in srv.objects("pods", "default")
                    if "launcher" in p["metadata"]["name"])

    def both():
        lines = sorted(backend.logs("vgg16", all_replicas=True))
        return lines if len(lines) == 2 else None

    lines = srv.wait_for(both)
    assert lines == [f"[{launcher}] mpirun started", "[vgg16-worker-0] sshd ready"]


@pytest.mark.parametrize("follow", [False, True])
def test_logs_of_all_pods_are_prefixed_after_the_job_finished(k8s, follow):
    srv = k8s.server()
    k8s.script_launcher("vgg16", ["mpirun started", "total images/sec: 12.0"])
    backend = k8s.backend(poll=0.1)
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    assert backend.wait("vgg16", timeout=20).phase == "Succeeded"
    list(backend.tidy("vgg16"))
    # cleanPodPolicy Running removed the worker: the launcher is the only pod left.
    launcher = next(p["metadata"]["name"] for p in srv.objects("pods", "default")
                    if "launcher" in p["metadata"]["name"])
    lines = list(backend.logs("vgg16", all_replicas=True, follow=follow))
    assert lines == [f"[{launcher}] mpirun started", f"[{launcher}] total images/sec: 12.0"]
    # Worker 0 belongs to the job but is gone: not a bad option value.
    with pytest.raises(UserError, match="pod vgg16-worker-0 of job vgg16 does not exist") as err:
        list(backend.logs("vgg16", worker=0))
    assert err.value.exit_code == 1


def test_logs_of_a_worker_index_outside_the_job_is_a_usage_error(k8s):
    srv = k8s.server()
    k8s.script_launcher("long1", ["running"], exit_code=None)
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, name="long1", workers=2), None, schedule_timeout=20)
    # the two workers (the start gate's pod and the launcher's come and go beside them)
    srv.wait_for(lambda: {p["metadata"]["name"] for p in srv.objects("pods", "default")}
                 >= {"long1-worker-0", "long1-worker-1"})
    with pytest.raises(UsageError, match=r"^--worker: job long1 has worker pods 0\.\.1, not 3$"):
        list(backend.logs("long1", worker=3))


@pytest.mark.parametrize("policy, left", [("Running", ["launcher"]), ("All", []),
                                           ("None", ["launcher", "worker"])])
def test_clean_pod_policy_applies_once_the_launcher_is_done(k8s, policy, left):
    srv = k8s.server()
    k8s.script_launcher("vgg16", ["done"], exit_code=0)
    backend = k8s.backend()
    spec = make_spec(k8s, workers=1, run_policy={"clean_pod_policy": policy})
    create_job(backend, spec, None, schedule_timeout=20)
    status = backend.wait("vgg16", timeout=20)
    assert status.phase == "Succeeded"
    list(backend.tidy("vgg16"))
    remaining = sorted(p["metadata"]["labels"][names.LABEL_ROLE]
                       for p in srv.objects("pods", "default")
                       if not p["metadata"].get("deletionTimestamp")
                       and names.LABEL_ROLE in p["metadata"]["labels"])  # not the start gate
    assert remaining == left


# --- operator mode ------------------------------------------------------------------------------
def test_operator_mode_without_the_crd_creates_nothing(k8s):
    srv = k8s.server()
    before = posts(srv)
    with pytest.raises(UserError) as err:
        create_job(k8s.backend(), make_spec(k8s, workers=2, gpus_per_worker=1), None, mode="operator")
    assert str(err.value) == OPERATOR_MISSING
    assert posts(srv) == before


def test_operator_mode_creates_the_mpijob_and_the_objects_it_mounts(k8s):
    srv = k8s.server()
    srv.install_crd("mpijob")
    backend = k8s.backend()
    spec = make_spec(k8s, workers=2, gpus_per_worker=1, command=())  # the built-in benchmark
    result = create_job(backend, spec, plan(backend, spec), mode="operator")
    assert [o["kind"] for o in result.objects] == ["MPIJob", "ConfigMap"]
    mpijob = srv.get("mpijobs.kubeflow.org", "vgg16")
    mounted = {v["configMap"]["name"]
               for replica in mpijob["spec"]["mpiReplicaSpecs"].values()
               for v in replica["template"]["spec"].get("volumes") or [] if "configMap" in v}
    assert mounted and mounted <= {o["metadata"]["name"] for o in srv.objects("configmaps", "default")}
    for name in mounted:
        owner = srv.get("configmaps", name)["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "MPIJob", "vgg16", mpijob["metadata"]["uid"])
    status = backend.get("vgg16")
    assert (status.mode, status.phase, status.reason) == ("operator", "Pending", "WaitingForOperator")
    assert [s.name for s in backend.list()] == ["vgg16"]
    assert backend.delete("vgg16") is True
    assert srv.objects("mpijobs.kubeflow.org", "default") == []
    assert leftovers(srv, "vgg16") == []


def test_operator_mode_rolls_back_the_mpijob_when_a_later_object_is_refused(k8s):
    srv = k8s.server()
    srv.install_crd("mpijob")
    srv.forbid("create", "configmaps", "default")
    backend = k8s.backend()
    spec = make_spec(k8s, workers=2, gpus_per_worker=1, command=())
    with pytest.raises(UserError, match="forbidden: cannot create configmaps"):
        create_job(backend, spec, plan(backend, spec), mode="operator")
    assert srv.objects("mpijobs.kubeflow.org", "default") == []
    assert leftovers(srv, "vgg16") == []


# --- list ---------------------------------------------------------------------------------------
def test_list_makes_the_same_number_of_calls_for_any_number_of_jobs(k8s):
    srv = k8s.server()
    backend = k8s.backend()
    counts = []
    for batch in (("a", "b"), ("c", "d", "e", "f")):
        for job in batch:
            create_job(backend, make_spec(k8s, name=job, workers=1), None, schedule_timeout=20)
        srv.clear_requests()
        rows = backend.list()
        counts.append(srv.count_requests())
    assert [r.name for r in rows] == ["a", "b", "c", "d", "e", "f"]
    assert counts[0] == counts[1] <= 4


def test_tidy_records_the_rate_before_clean_pod_policy_all_removes_the_launcher(k8s):
    srv = k8s.server()
    k8s.script_launcher("vgg16", ["total images/sec: 400.00"])
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, workers=1, run_policy={"clean_pod_policy": "All"}),
               None, schedule_timeout=20)
    assert [r.images_per_sec for r in backend.list()] == [None]  # not measured yet
    assert backend.wait("vgg16", timeout=20).images_per_sec == 400.0
    assert ANNOTATION_IMAGES_PER_SEC not in (
        srv.get("jobs", names.launcher("vgg16"))["metadata"].get("annotations") or {})
    done = list(backend.tidy("vgg16"))
    assert done[0] == "job vgg16: recorded its 400 images/sec on Job vgg16-launcher"
    assert done[1].startswith("job vgg16: removed vgg16-launcher-") and \
        done[1].endswith(", vgg16-worker-0 (cleanPodPolicy All)")
    root = srv.get("jobs", names.launcher("vgg16"))
    assert float(root["metadata"]["annotations"][ANNOTATION_IMAGES_PER_SEC]) == 400.0
    srv.wait_for(lambda: not [p for p in srv.objects("pods", "default")
                              if names.LABEL_ROLE in p["metadata"]["labels"]])
    srv.clear_requests()
    assert list(backend.tidy("vgg16")) == ["job vgg16: nothing to tidy"]
    assert srv.count_requests("PATCH") == 0  # recorded once
    assert backend.get("vgg16").images_per_sec == 400.0
    assert [(r.name, r.images_per_sec) for r in backend.list()] == [("vgg16", 400.0)]


def test_a_launcher_pod_removed_before_tidy_takes_its_rate_with_it(k8s):
    """`list` reads the rate from the launcher pod's termination message: once that pod is
    gone without `tidy` (kubectl delete, the pod garbage collector), no rate is shown."""
    srv = k8s.server()
    srv.script_pod(r"vgg16-launcher-.*", runs=[{"logs": ["total images/sec: 300.00"],
                                                "termination_message": "total images/sec: 300"}])
    backend = k8s.backend()
    create_job(backend, make_spec(k8s, workers=1), None, schedule_timeout=20)
    backend.wait("vgg16", timeout=20)
    assert [r.images_per_sec for r in backend.list()] == [300.0]
    for p in srv.objects("pods", "default"):
        if srv.get("pods", p["metadata"]["name"]) is not None:
            srv.delete("pods", p["metadata"]["name"])
    srv.wait_for(lambda: not srv.objects("pods", "default"))
    assert [(r.phase, r.images_per_sec) for r in backend.list()] == [("Succeeded", None)]


def test_get_of_a_missing_job(k8s):
    with pytest.raises(NotFound, match="job nope not found in namespace"):
        k8s.backend().get("nope")


def test_api_errors_reach_the_user_as_user_errors(k8s):
    srv = k8s.server()
    srv.forbid("list", "pods")
    with pytest.raises(UserError, match="forbidden: cannot list pods in namespace default") as err:
        k8s.backend().list()
    assert not isinstance(err.value, ApiError)


def test_follow_reopens_the_stream_when_the_container_restarts(k8s):
    srv = k8s.server()
    srv.script_pod("crash-launcher-abcde", runs=[Run([(0.1, "attempt 1")], exit_code=1),
                                                 Run([(0.1, "attempt 2")], exit_code=0)])
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "crash-launcher-abcde", "namespace": "default",
                             "labels": {**names.job_labels("crash"),
                                        names.LABEL_ROLE: names.ROLE_LAUNCHER}},
                "spec": {"restartPolicy": "OnFailure",
                         "containers": [{"name": "launcher", "image": "x"}]}})
    backend = k8s.backend(poll=0.1)
    assert list(backend.logs("crash", follow=True)) == ["attempt 1", "attempt 2"]
    assert list(backend.logs("crash")) == ["attempt 2"]
    assert list(backend.logs("crash", previous=True)) == ["attempt 1"]


def test_kueue_gang_in_built_in_mode_is_refused_before_anything_is_created(k8s):
    srv = k8s.server()
    srv.install_group("kueue")
    backend = k8s.backend()
    assert backend.detect_gang_scheduler() == "kueue"
    spec = make_spec(k8s, workers=2, gpus_per_worker=1, gang="kueue", queue="team-a")
    before = posts(srv)
    with pytest.raises(UsageError, match=r"kueue does not gang-schedule built-in mode.*"
                                         r"use --mode operator"):
        create_job(backend, spec, plan(backend, spec), schedule_timeout=20)
    assert posts(srv) == before and leftovers(srv, "vgg16") == []


def test_logs_of_a_pod_that_cannot_start_say_why(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "img-worker-0", "namespace": "default",
                             "labels": {**names.job_labels("img"), names.LABEL_INDEX: "0",
                                        names.LABEL_ROLE: names.ROLE_WORKER}},
                # Bound to a node no kubelet serves, so only this test writes its status.
                "spec": {"nodeName": "ghost", "containers": [{"name": "worker", "image": "x"}]}})
    srv.store.mutate("/pods", "default", "img-worker-0", lambda p: p.__setitem__("status", {
        "phase": "Pending", "containerStatuses": [{"name": "worker", "restartCount": 0, "state": {
            "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}))
    with pytest.raises(UserError, match=r"img-worker-0 has not started yet \(Pending: "
                                        r"ImagePullBackOff: Back-off pulling image\)"):
        list(k8s.backend().logs("img", worker=0))
