"""Issue 20: jobs on a cluster as strict as production ones. Pod Security Admission,
ResourceQuota and LimitRange, images that never pull, pods that never start, non-root pods.

The test API server models each component from its source (kubesim/
podsecurity.py, quota.py, kubelet.py); these tests drive hvdk8s through the CLI against it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from typer.testing import CliRunner

from kubesim import errors as kerrors
from kubesim.podsecurity import baseline_violations, restricted_violations
from launcher.backends.kubernetes import start_guard
from launcher.backends.kubernetes.client import ApiError
from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.command import mpirun_argv
from tests.k8s_env import hvdk8s
from tests.render_cases import FIXED_KEYS as KEYS

runner = CliRunner()
MISSING = "registry.example/horovod:missing"


def job_objects(srv, job: str) -> list[dict]:
    found = []
    for kind in ("pods", "jobs", "configmaps", "secrets", "services"):
        found += [o for o in srv.objects(kind, "default")
                  if (o["metadata"].get("labels") or {}).get(names.LABEL_JOB) == job]
    return found


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "img:1"}], **spec}}


def gpu_holders(srv, job: str) -> list[str]:
    """Pods of the job that still hold a GPU: not terminal, not being deleted."""
    out = []
    for p in srv.objects("pods", "default"):
        if (p["metadata"].get("labels") or {}).get(names.LABEL_JOB) != job:
            continue
        if p["metadata"].get("deletionTimestamp") or p["status"].get("phase") in (
                "Succeeded", "Failed"):
            continue
        if any("nvidia.com/gpu" in (c.get("resources") or {}).get("limits", {})
               for c in p["spec"]["containers"]):
            out.append(p["metadata"]["name"])
    return out


# --- the models ------------------------------------------------------------------------------
def test_baseline_is_the_default_and_refuses_host_network_with_the_real_message(kube_server):
    with pytest.raises(kerrors.ApiError) as err:
        kube_server.create(pod("hn", hostNetwork=True), "default")
    assert err.value.code == 403
    assert err.value.message == ('pods "hn" is forbidden: violates PodSecurity '
                                 '"baseline:latest": host namespaces (hostNetwork=true)')
    kube_server.set_pod_security("default", enforce="privileged")
    kube_server.create(pod("hn", hostNetwork=True), "default")


def test_restricted_lists_every_check_a_root_pod_fails(kube_server):
    kube_server.set_pod_security("default", enforce="restricted")
    with pytest.raises(kerrors.ApiError) as err:
        kube_server.create(pod("root"), "default")
    assert err.value.message == (
        'pods "root" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "c" must set '
        'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot '
        '!= true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type '
        'to "RuntimeDefault" or "Localhost")')


def test_warn_mode_admits_and_answers_a_warning_header(k8s):
    srv = k8s.server()
    srv.set_pod_security("default", enforce="baseline", warn="restricted")
    made, warnings = k8s.backend().client.create_with_warnings(
        {**pod("w"), "metadata": {"name": "w", "namespace": "default"}})
    assert made["metadata"]["name"] == "w"
    assert len(warnings) == 1 and warnings[0].startswith(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false')


def test_quota_refuses_with_the_figures_and_limit_range_fills_defaults(kube_server):
    kube_server.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
                        "spec": {"limits": [{"type": "Container", "default": {"memory": "1Gi"},
                                             "defaultRequest": {"cpu": "500m"}}]}}, "default")
    kube_server.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"},
                        "spec": {"hard": {"requests.nvidia.com/gpu": "2", "count/pods": "5"}}},
                       "default")
    gpu_pod = pod("g1")
    gpu_pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    made = kube_server.create(gpu_pod, "default")
    res = made["spec"]["containers"][0]["resources"]
    assert res["limits"]["memory"] == "1Gi" and res["requests"]["cpu"] == "500m"
    assert made["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        # SetDefaults_LimitRangeItem: defaultRequest takes the default limit's memory too
        "LimitRanger plugin set: cpu, memory request for container c; memory limit for "
        "container c")
    gpu_pod["metadata"]["name"] = "g2"
    with pytest.raises(kerrors.ApiError) as err:
        kube_server.create(gpu_pod, "default")
    assert err.value.message == (
        'pods "g2" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")
    kube_server.wait_for(lambda: (kube_server.get("resourcequotas", "gpu").get("status") or {})
                         .get("used", {}).get("requests.nvidia.com/gpu") == "2")


def test_unpullable_image_goes_err_image_pull_then_back_off(kube_server):
    kube_server.unpullable_image("img:gone")
    kube_server.create({**pod("p", nodeName="gpu-node-0"),
                        "spec": {"nodeName": "gpu-node-0",
                                 "containers": [{"name": "c", "image": "img:gone"}]}}, "default")

    def waiting():
        p = kube_server.get("pods", "p")
        return [s["state"].get("waiting", {}).get("reason")
                for s in p["status"].get("containerStatuses") or []]
    kube_server.wait_for(lambda: waiting() == ["ErrImagePull"])
    kube_server.wait_for(lambda: waiting() == ["ImagePullBackOff"])
    assert kube_server.get("pods", "p")["status"]["phase"] == "Pending"
    events = [e for e in kube_server.objects("events", "default") if e["reason"] == "Failed"]
    assert events and 'Failed to pull image "img:gone"' in events[0]["message"]


def test_missing_secret_key_is_create_container_config_error(kube_server):
    kube_server.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "stringData": {"a": "1"}}, "default")
    p = pod("cfg", nodeName="gpu-node-0")
    p["spec"]["containers"][0]["env"] = [{"name": "X", "valueFrom": {
        "secretKeyRef": {"name": "s", "key": "b"}}}]
    kube_server.create(p, "default")
    kube_server.wait_for(lambda: ((kube_server.get("pods", "cfg")["status"].get(
        "containerStatuses") or [{}])[0].get("state", {}).get("waiting", {}).get("reason"))
        == "CreateContainerConfigError")
    state = kube_server.get("pods", "cfg")["status"]["containerStatuses"][0]["state"]
    assert state["waiting"]["message"] == "couldn't find key b in Secret default/s"


# --- what hvdk8s renders ---------------------------------------------------------------------
def _pod_specs(objects: list[dict]) -> list[dict]:
    out = []
    for o in objects:
        if o["kind"] == "Pod":
            out.append(o["spec"])
        elif o["kind"] == "Job":
            out.append(o["spec"]["template"]["spec"])
        elif o["kind"] == "MPIJob":
            out += [r["template"]["spec"] for r in o["spec"]["mpiReplicaSpecs"].values()]
    return out


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_run_as_user_pods_meet_restricted_and_default_pods_meet_baseline(mode):
    for run_as in (None, 1000):
        spec = build_spec(name="sec", workers=2, gpus_per_worker=1, run_as_user=run_as,
                          command=("python", "t.py"))
        specs = _pod_specs(render(spec, mode=mode, ssh=KEYS if mode == "pods" else None))
        for s in specs:
            assert s["automountServiceAccountToken"] is False
            assert baseline_violations(s) == []
            assert (restricted_violations(s) == []) == (run_as is not None)
    if mode == "operator":
        mpijob, _config = render(build_spec(name="sec", workers=2, gpus_per_worker=1,
                                      run_as_user=1000, command=("python", "t.py")), mode=mode)
        assert mpijob["spec"]["sshAuthMountPath"] == "/home/hvdk8s/.ssh"


def test_generated_mpirun_line_disables_cma_but_a_users_own_line_is_untouched():
    spec = build_spec(name="v", workers=2, gpus_per_worker=1, command=("python", "t.py"))
    argv = mpirun_argv(spec, "/h")
    assert argv[argv.index("btl_vader_single_copy_mechanism") + 1] == "none"
    own = build_spec(name="v", workers=2, gpus_per_worker=1,
                     command=("mpirun -np 2 python t.py",), shell=True)
    job = render(own, mode="pods", ssh=KEYS)[0]
    assert "vader" not in " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""


# --- refusals before anything is created -----------------------------------------------------
@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_restricted_namespace_refuses_without_run_as_user_and_runs_with_it(k8s, mode):
    srv = k8s.server()
    if mode == "operator":
        srv.install_mpi_operator()
    srv.set_pod_security("default", enforce="restricted")
    srv.script_pod(r"r-worker-\d+", exit_code=None)
    srv.script_pod(r"r-launcher(-\w{5})?", logs=["done"], exit_code=0)
    args = ("submit", "mpi", "--name", "r", "--workers", "2", "--gpus", "1", "--image",
            "img:1", "--mode", mode, "python", "t.py")
    refused = hvdk8s(k8s, *args)
    assert refused.exit_code == 2, refused.output
    assert 'Pod Security "restricted"' in refused.output and "--run-as-user" in refused.output
    assert job_objects(srv, "r") == []
    if mode == "operator":
        assert srv.objects("mpijobs.kubeflow.org", "default") == []
    ok = hvdk8s(k8s, *args[:-2], "--run-as-user", "1000", "python", "t.py")
    assert ok.exit_code == 0, ok.output
    waited = hvdk8s(k8s, "wait", "r", "--timeout", "30")
    assert waited.exit_code == 0, waited.output


def test_host_network_is_refused_up_front_under_baseline(k8s):
    srv = k8s.server()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "hn", "--workers", "1", "--gpus", "1",
                    "--image", "img:1", "--host-network", "python", "t.py")
    assert result.exit_code == 2, result.output
    assert "--host-network" in result.output and 'Pod Security "baseline"' in result.output
    assert job_objects(srv, "hn") == []


def test_data_dir_is_refused_under_baseline_naming_the_option(k8s):
    srv = k8s.server()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "dd", "--workers", "1", "--gpus", "1",
                    "--image", "img:1", "--data-dir", "/mnt/x:/x", "python", "t.py")
    assert result.exit_code == 2, result.output
    assert ('--data-dir: namespace default enforces Pod Security "baseline", which forbids '
            "hostPath volumes; mount the data from a PersistentVolumeClaim") in result.output
    assert job_objects(srv, "dd") == []


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_quota_without_room_for_the_job_refuses_naming_the_quota_and_gap(k8s, mode):
    srv = k8s.server()
    if mode == "operator":
        srv.install_mpi_operator()
    srv.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-gpus"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "12"}}}, "default")
    srv.wait_for(lambda: srv.get("resourcequotas", "team-gpus").get("status"))
    # Two pods of 8 GPUs: each one alone fits the quota (a per-pod dry run passes), the job
    # does not.
    result = hvdk8s(k8s, "submit", "mpi", "--name", "q", "--workers", "2", "--gpus", "8",
                    "--image", "img:1", "--mode", mode, "python", "t.py")
    assert result.exit_code == 2, result.output
    assert ("does not fit ResourceQuota team-gpus in namespace default "
            "(requests.nvidia.com/gpu: the job needs 16, 12 of 12 free)") in result.output
    assert job_objects(srv, "q") == []
    assert srv.objects("mpijobs.kubeflow.org", "default") == [] if mode == "operator" else True


def test_a_403_from_admission_is_not_reported_as_rbac():
    exc = ApiError(403, "Forbidden", 'pods "w" is forbidden: exceeded quota: q, requested: '
                   "requests.cpu=2, used: requests.cpu=7, limited: requests.cpu=8",
                   verb="create", resource="pods", namespace="ml")
    text = str(exc.user_error())
    assert "RBAC" not in text and "ResourceQuota" in text and "limited: requests.cpu=8" in text


# --- pods that never start -------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["pods", "operator"])
@pytest.mark.parametrize("enforcer", ["agent", "tidy"])
def test_unpullable_image_fails_the_job_at_the_start_timeout_and_frees_the_gpus(
        k8s, monkeypatch, mode, enforcer):
    """Done-when of issue 20: with no hvdk8s process between submit and wait, the job
    fails with the pull error and no pod keeps a GPU; the start guard (its sweep, as its
    Deployment runs it) or `hvdk8s tidy` enforces it (`wait` only reads)."""
    srv = k8s.server()
    if mode == "operator":
        srv.install_mpi_operator()
    srv.unpullable_image(MISSING)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "unp", "--workers", "2", "--gpus", "1",
                       "--image", MISSING, "--mode", mode, "--start-timeout", "30",
                       "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: gpu_holders(srv, "unp"))  # pods mode packs both into one pod
    srv.wait_for(lambda: all(
        (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("waiting", {})
        .get("reason") in ("ErrImagePull", "ImagePullBackOff")
        for p in srv.objects("pods", "default") if "worker" in p["metadata"]["name"]))
    later = start_guard.utc_now() + timedelta(seconds=31)
    client = k8s.backend().client
    assert start_guard.overdue(None, [], later) is None
    if enforcer == "agent":
        failed = [j for node in ("gpu-node-0", "gpu-node-1")
                  for j in start_guard.sweep_node(client, node, later)]
        assert failed == ["default/unp"]
    else:
        monkeypatch.setattr(start_guard, "utc_now", lambda: later)
        tidied = hvdk8s(k8s, "tidy", "unp")
        assert tidied.exit_code == 0, tidied.output
        assert tidied.stdout.startswith("job unp: failed (StartTimeout: not running 30s after "
                                        "it was scheduled: unp-worker-0: "), tidied.stdout
    waited = hvdk8s(k8s, "wait", "unp", "--timeout", "30")
    assert waited.exit_code == 1, waited.output
    assert "StartTimeout" in waited.output and "not found" in waited.output
    assert "unp-worker-0: ErrImagePull" in waited.output or \
        "unp-worker-0: ImagePullBackOff" in waited.output
    srv.wait_for(lambda: gpu_holders(srv, "unp") == [])


def test_start_timeout_zero_never_fails_a_job():
    root = {"metadata": {"annotations": {names.ANNOTATION_SPEC: '{"start_timeout": 0}'}}}
    assert start_guard.start_timeout(root) == 0
    assert start_guard.overdue(root, [{"metadata": {"name": "x"}, "spec": {"nodeName": "n"},
                                       "status": {"phase": "Pending"}}]) is None


def test_doctor_reports_pod_security_quota_headroom_and_unattended_cleanup(kube_server,
                                                                           kubeconfig):
    import json

    kube_server.set_pod_security("default", enforce="restricted", warn="restricted")
    kube_server.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gq"},
                        "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}, "default")
    kube_server.wait_for(lambda: kube_server.get("resourcequotas", "gq").get("status"))
    result = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json",
                                 "-n", "default"])
    found = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
    assert found["pod security"]["finding"] == "enforce=restricted, warn=restricted, audit=-"
    assert "--run-as-user" in found["pod security"]["effect"]
    assert found["quota"]["finding"] == ("ResourceQuota gq: requests.nvidia.com/gpu 0/4 "
                                         "(used/hard)")
    assert found["unattended cleanup"]["status"] == "warn"
    assert "hvdk8s install agent" in found["unattended cleanup"]["fix"]


def test_get_shows_the_operators_warning_when_admission_refuses_its_worker_pods(k8s):
    """The MPI Operator retries a refused worker pod for ever (a Warning event each time);
    before, `get` said WaitingForOperator with no reason."""
    srv = k8s.server()
    srv.install_mpi_operator()
    spec = build_spec(name="opw", workers=1, gpus_per_worker=1, host_network=True,
                      command=("python", "t.py"))
    mpijob, _config = render(spec, mode="operator")
    srv.create(mpijob, "default")  # as if admitted before the namespace became baseline
    srv.wait_for(lambda: [e for e in srv.objects("events", "default")
                          if e["reason"] == "MPIJobFailed"])
    import json

    got = hvdk8s(k8s, "get", "opw", "-o", "json")
    message = json.loads(got.stdout)["message"]
    assert "operator: MPIJobFailed: worker pod created failed" in message, message
    assert 'violates PodSecurity "baseline:latest"' in message


def test_the_admission_dry_run_sends_one_pod_per_shape(k8s):
    """Worker pods that differ only in name and node get one dry run, counted for all."""
    from launcher.backends.kubernetes.admission_check import job_pods

    spec = build_spec(name="a", workers=4, gpus_per_worker=1, command=("python", "t.py"))
    sent = [(p["metadata"]["name"], n) for p, n in job_pods(render(spec, ssh=KEYS), "pods")]
    assert sent == [("a-launcher", 1), ("a-start-gate", 1), ("a-worker-0", 4)]
    srv = k8s.server()
    srv.script_pod(r"dr-.*", exit_code=None)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "dr", "--workers", "2", "--gpus", "8",
                    "--image", "img:1", "python", "t.py")
    assert result.exit_code == 0, result.output
    dry = [r for r in srv.request_log if r.method == "POST" and r.query.get("dryRun")]
    assert [r.path.rsplit("/", 1)[-1] for r in dry] == ["pods", "pods", "pods"]  # launcher, gate, workers
