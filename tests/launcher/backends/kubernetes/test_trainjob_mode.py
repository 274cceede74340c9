"""Trainer mode (--mode trainjob, and --mode auto's choice) against the Kubeflow Trainer
model (kubesim/trainer.py, jobset.py), end to end through the CLI; the
TrainJob and hvdk8s's runtime validated against Trainer's published CRDs."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from kubesim import trainer as trainer_model
from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj
from tests import schemas
from tests.k8s_env import hvdk8s
from tests.kubeapi_fixtures import configmaps_made

runner = CliRunner()
IMAGE = "img:1"


def _spec(**kw):
    fields = {"name": "t", "workers": 4, "gpus_per_worker": 1, "image": IMAGE,
              "command": ("python", "train.py"), **kw}
    return build_spec(**fields)


def _trainer(srv, image: str = IMAGE):
    srv.install_trainer()
    srv.create(tj.horovod_runtime(_spec(image=image)))


def _placement(spec, nodes: list[tuple[str, list[int]]]):
    from mpijob.scheduling.placement import NodeAssignment, Placement

    return Placement(feasible=True, policy="topology", assignments=tuple(
        NodeAssignment(node=n, gpus=tuple(g), workers=len(g)) for n, g in nodes))


# --- the rendered objects against Trainer's CRDs ---------------------------------------------
def test_a_trainjob_dry_run_validates_against_trainers_published_crd():
    result = runner.invoke(app, ["submit", "mpi", "--name", "demo", "--workers", "4", "--gpus",
                                 "1", "--image", IMAGE, "--mode", "trainjob", "--dry-run",
                                 "--cluster", "tests/data/clusters/two-dgx1.yaml",
                                 "--run-as-user", "1000", "python", "t.py"])
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert [o["kind"] for o in objects] == ["TrainJob", "ConfigMap"]
    schemas.validate_trainer(objects[0])
    schemas.validate_core(objects[1])


def test_hvdk8s_runtime_validates_against_the_cluster_training_runtime_crd():
    result = runner.invoke(app, ["install", "runtime", "--image", IMAGE, "--dry-run"])
    assert result.exit_code == 0, result.output
    (runtime,) = [o for o in yaml.safe_load_all(result.stdout) if o]
    schemas.validate_trainer(runtime)
    mpi = runtime["spec"]["mlPolicy"]["mpi"]
    assert mpi["mpiImplementation"] == "OpenMPI" and mpi["runLauncherAsNode"] is False


def test_the_placement_goes_into_the_node_pods_through_the_runtime_patch():
    spec = _spec(gpus_per_worker=2)
    placement = _placement(spec, [("gpu-a", [0, 1]), ("gpu-b", [4, 5])])
    trainjob, config = render(spec, mode="trainjob", placement=placement)
    t = trainjob["spec"]["trainer"]
    assert (t["numNodes"], t["numProcPerNode"]) == (2, 2)
    assert t["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "2"
    (patch,) = trainjob["spec"]["runtimePatches"]
    node, launcher = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    values = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchFields"][0]["values"]
    assert values == ["gpu-a", "gpu-b"]
    assert "podAntiAffinity" in pod["affinity"]
    assert "affinity" not in launcher["template"]["spec"]["template"]["spec"]
    assert "mpirun" in config["data"]["launch.sh"] and "/etc/mpi/hostfile" in config["data"][
        "launch.sh"]
    schemas.validate_trainer(trainjob)


@pytest.mark.parametrize("args, option", [
    (("--host-network",), "--host-network"),
    (("--mpi", "mpich"), "--mpi"),
    (("--gpu-request", "dra"), "--gpu-request"),
])
def test_what_a_trainjob_cannot_carry_is_refused_naming_the_option(args, option):
    result = runner.invoke(app, ["submit", "mpi", "--name", "x", "--workers", "2", "--gpus", "1",
                                 "--image", IMAGE, "--mode", "trainjob", "--dry-run", *args,
                                 "python", "t.py"])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    # Offline nothing says the operator is installed: only built-in pods are suggested.
    assert line.startswith(f"error: {option}") and line.endswith("; use --mode pods"), line


# --- the Trainer model ------------------------------------------------------------------------
def test_the_model_builds_the_jobset_hostfile_and_mpi_env_from_the_runtime():
    spec = _spec(gpus_per_worker=2)
    trainjob, _ = render(spec, mode="trainjob",
                         placement=_placement(spec, [("a", [0, 1]), ("b", [0, 1])]))
    trainjob["metadata"].update(uid="u1", namespace="default")
    runtime = tj.horovod_runtime(spec)
    info = trainer_model.runtime_info(trainjob, runtime)
    assert info["counts"] == {"node": 2, "launcher": 1}
    assert trainer_model.hostfile(trainjob, info) == (
        "t-node-0-0.t slots=2\nt-node-0-1.t slots=2\n")
    js = trainer_model.jobset(trainjob, runtime, info)
    node, launcher = js["spec"]["replicatedJobs"]
    c = node["template"]["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == IMAGE and c["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"} in c["volumeMounts"]
    lc = launcher["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in lc["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert "resources" in lc and lc["resources"]["limits"].get("nvidia.com/gpu") is None
    assert node["template"]["spec"]["parallelism"] == 2


# --- end to end against the test API server -------------------------------------------------------
def test_auto_mode_creates_a_trainjob_where_only_trainer_is_installed_and_wait_ends_0(k8s):
    srv = k8s.server()
    _trainer(srv)
    srv.script_pod(r"bench-node-0-\d+-\w{5}", exit_code=None)
    srv.script_pod(r"bench-launcher-0-0-\w{5}", logs=["total images/sec: 123.4"], exit_code=0)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "bench", "--workers", "4", "--gpus", "1",
                    "--gang", "--gputopology", "--image", IMAGE)
    assert result.exit_code == 0, result.output
    (trainjob,) = srv.objects("trainjobs.trainer.kubeflow.org", "default")
    assert trainjob["metadata"]["labels"]["hvdk8s.io/mode"] == "trainjob"
    assert srv.get("jobsets.jobset.x-k8s.io", "bench") is not None
    waited = hvdk8s(k8s, "wait", "bench", "--timeout", "60")
    assert waited.exit_code == 0, waited.output
    got = hvdk8s(k8s, "get", "bench", "-o", "json")
    status = json.loads(got.stdout)
    assert status["phase"] == "Succeeded" and status["mode"] == "trainjob"
    assert status["images_per_sec"] == pytest.approx(123.4)
    listed = hvdk8s(k8s, "list", "-o", "json")
    assert [j["name"] for j in json.loads(listed.stdout)] == ["bench"]
    logs = hvdk8s(k8s, "logs", "bench")
    assert "total images/sec: 123.4" in logs.output
    assert hvdk8s(k8s, "delete", "bench").exit_code == 0
    assert srv.objects("trainjobs.trainer.kubeflow.org", "default") == []


def test_a_missing_runtime_is_refused_naming_the_install_command_and_nothing_is_made(k8s):
    srv = k8s.server()
    srv.install_trainer()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "nort", "--workers", "2", "--gpus", "1",
                    "--image", "other:2", "--mode", "trainjob", "python", "t.py")
    assert result.exit_code != 0, result.output
    line = result.output.strip().splitlines()[-1]
    assert "hvdk8s install runtime --image other:2" in line
    assert srv.objects("trainjobs.trainer.kubeflow.org", "default") == []
    assert configmaps_made(srv) == []


def test_install_runtime_then_a_submit_runs_on_it(k8s):
    srv = k8s.server()
    srv.install_trainer()
    installed = runner.invoke(app, ["install", "runtime", "--image", IMAGE,
                                    "--context", k8s.context])
    assert installed.exit_code == 0, installed.output
    name = tj.runtime_name(_spec())
    assert installed.output.strip() == f"clustertrainingruntime/{name} created"
    assert srv.get("clustertrainingruntimes.trainer.kubeflow.org", name, "") is not None
    srv.script_pod(r"after-node-0-\d+-\w{5}", exit_code=None)
    srv.script_pod(r"after-launcher-0-0-\w{5}", logs=["done"], exit_code=0)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "after", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--wait", "python", "t.py")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("install, root", [(None, "Job"), ("operator", "MPIJob"),
                                           ("both", "MPIJob"), ("trainer", "TrainJob")])
def test_auto_mode_takes_what_the_cluster_has(k8s, install, root):
    """Built-in pods where neither operator is installed; the MPI Operator where it is;
    Kubeflow Trainer where it alone is (a server dry run: what would be created)."""
    srv = k8s.server()
    if install in ("operator", "both"):
        srv.install_mpi_operator()
    if install in ("trainer", "both"):
        _trainer(srv)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "auto", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--dry-run=server", "python", "t.py")
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert objects[0]["kind"] == root


def test_strict_field_validation_refuses_a_trainjob_field_the_crd_lacks(k8s):
    srv = k8s.server()
    _trainer(srv)
    client = k8s.backend().client
    trainjob, _ = render(_spec(name="s"), mode="trainjob")
    trainjob["spec"]["bogus"] = 1
    from launcher.backends.kubernetes.client import ApiError

    with pytest.raises(ApiError) as err:
        client.create(trainjob, field_validation="Strict")
    assert 'unknown field "spec.bogus"' in err.value.message


def test_a_start_timeout_suspends_the_trainjob_and_releases_its_pods(k8s):
    srv = k8s.server()
    _trainer(srv)
    srv.unpullable_image("bad:1")
    srv.create(tj.horovod_runtime(_spec(image="bad:1")))
    result = hvdk8s(k8s, "submit", "mpi", "--name", "st", "--workers", "2", "--gpus", "1",
                    "--image", "bad:1", "--start-timeout", "1", "python", "t.py")
    assert result.exit_code == 0, result.output
    waited = hvdk8s(k8s, "wait", "st", "--timeout", "60")
    assert waited.exit_code == 1, waited.output
    assert "`hvdk8s tidy st -n default` fails it" in waited.output
    assert not srv.get("trainjobs.trainer.kubeflow.org", "st")["spec"].get("suspend")
    tidied = hvdk8s(k8s, "tidy", "st")
    assert tidied.stdout.startswith("job st: failed (StartTimeout: "), tidied.output
    assert srv.get("trainjobs.trainer.kubeflow.org", "st")["spec"]["suspend"] is True


def test_a_quota_without_room_for_the_nodes_refuses_before_anything_is_created(k8s):
    """The admission dry run and quota sum run on the pods Trainer will make of the
    TrainJob and its runtime: each node pod alone fits, the two do not."""
    srv = k8s.server()
    _trainer(srv)
    srv.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-gpus"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "12"}}}, "default")
    srv.wait_for(lambda: srv.get("resourcequotas", "team-gpus").get("status"))
    result = hvdk8s(k8s, "submit", "mpi", "--name", "q", "--workers", "2", "--gpus", "8",
                    "--image", IMAGE, "--mode", "trainjob", "python", "t.py")
    assert result.exit_code == 2, result.output
    assert ("does not fit ResourceQuota team-gpus in namespace default "
            "(requests.nvidia.com/gpu: the job needs 16, 12 of 12 free)") in result.output
    assert srv.objects("trainjobs.trainer.kubeflow.org", "default") == []


def test_doctor_reports_trainer_its_runtimes_and_what_auto_takes(kube_server, kubeconfig):
    """For the design-card command: what --mode auto picks, and that it would run. Trainer
    without hvdk8s's runtime for the image is passed over, saying so (it used to report
    `--mode auto takes trainjob`, and the command then failed)."""
    card_spec = build_spec(name="design-card", workers=4, gpus_per_worker=1)

    def findings():
        result = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor", "-o", "json"])
        assert "Traceback" not in result.output
        report = json.loads(result.stdout)
        return report["design_card"], {f["check"]: f for f in report["findings"]
                                       if f["check"] in ("trainer", "design card")}

    card, bare = findings()
    assert bare["trainer"]["status"] == "info"
    assert "no Kubeflow Trainer" in bare["trainer"]["finding"]
    assert (card["mode"], card["runs"]) == ("pods", True)
    kube_server.install_trainer()
    card, missing = findings()
    assert missing["trainer"]["status"] == "warn"
    assert "hvdk8s install runtime --image IMG" in missing["trainer"]["fix"]
    assert (card["mode"], card["runs"]) == ("pods", True)
    assert (f"not Kubeflow Trainer: no ClusterTrainingRuntime {tj.runtime_name(card_spec)} "
            "runs image horovod/horovod:0.28.1") in missing["design card"]["finding"]
    table = runner.invoke(app, ["--kubeconfig", kubeconfig, "doctor"]).output
    assert ("hvdk8s submit mpi --workers 4 --gpus 1 would run in pods mode, placed on 1 node "
            "now (--mode auto; not Kubeflow Trainer: no ClusterTrainingRuntime") in table
    kube_server.create(tj.horovod_runtime(card_spec))
    card, ready = findings()
    assert ready["trainer"]["status"] == "ok"
    assert tj.runtime_name(card_spec) in ready["trainer"]["finding"]
    assert "horovod/horovod:0.28.1" in ready["trainer"]["effect"]
    assert (card["mode"], card["runs"]) == ("trainjob", True)


def test_the_design_card_command_runs_where_trainer_has_no_runtime_for_its_image(k8s):
    srv = k8s.server()
    srv.install_trainer()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "card", "--workers", "4", "--gpus", "1")
    assert result.exit_code == 0, result.output
    assert "mode: pods (--mode auto; not Kubeflow Trainer: no ClusterTrainingRuntime" in \
        result.output
    assert srv.objects("trainjobs.trainer.kubeflow.org", "default") == []
    assert srv.get("jobs", "card-launcher") is not None


def test_trainjob_with_host_network_is_refused_before_any_install_is_advised(k8s):
    srv = k8s.server()
    srv.install_trainer()
    srv.set_pod_security("default", enforce="privileged")
    result = hvdk8s(k8s, "submit", "mpi", "--name", "hn", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--mode", "trainjob", "--host-network", "python", "t.py")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == ("error: --host-network: a TrainJob cannot put its pods "
                                     "on the host network; use --mode pods")
    assert srv.objects("jobs", "default") == [] and configmaps_made(srv) == []


def test_auto_leaves_trainer_for_what_a_trainjob_cannot_carry(k8s, tmp_path):
    srv = k8s.server()
    _trainer(srv)
    patch = tmp_path / "p.yaml"
    patch.write_text("spec:\n  priorityClassName: high\n")
    result = hvdk8s(k8s, "submit", "mpi", "--name", "pp", "--workers", "2", "--gpus", "1",
                    "--image", IMAGE, "--pod-patch", f"worker={patch}", "--dry-run=server",
                    "python", "t.py")
    assert result.exit_code == 0, result.output
    assert "not Kubeflow Trainer: --pod-patch" in result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert objects[0]["kind"] == "Job"


def test_kueue_admits_the_trainjob_whole_or_holds_it_queued_saying_why(k8s):
    """Kueue's TrainJob integration: the TrainJob names the queue, is created suspended
    (Trainer makes no pods), and resumes once Kueue admits all of it."""
    srv = k8s.server()
    _trainer(srv)
    srv.install_kueue()
    srv.kueue_queue("small", {"nvidia.com/gpu": 2, "cpu": 64, "memory": "256Gi"})
    srv.kueue_queue("big", {"nvidia.com/gpu": 16, "cpu": 64, "memory": "256Gi"})
    args = ("--workers", "4", "--gpus", "1", "--image", IMAGE, "--mode", "trainjob",
            "--gang-scheduler", "kueue", "python", "t.py")
    held = hvdk8s(k8s, "submit", "mpi", "--name", "held", "--queue", "small", *args)
    assert held.exit_code == 0, held.output
    assert srv.get("trainjobs.trainer.kubeflow.org", "held")["metadata"]["labels"][
        "kueue.x-k8s.io/queue-name"] == "small"
    srv.wait_for(lambda: "insufficient quota" in json.dumps(
        srv.objects("workloads.kueue.x-k8s.io", "default")))
    status = json.loads(hvdk8s(k8s, "get", "held", "-o", "json").stdout)
    assert status["phase"] == "Queued" and "insufficient quota for nvidia.com/gpu" in status[
        "message"]
    assert not [p for p in srv.objects("pods", "default")
                if p["metadata"]["name"].startswith("held-")]
    srv.script_pod(r"runs-node-0-\d+-\w{5}", exit_code=None)
    srv.script_pod(r"runs-launcher-0-0-\w{5}", logs=["ok"], exit_code=0)
    runs = hvdk8s(k8s, "submit", "mpi", "--name", "runs", "--queue", "big", *args)
    assert runs.exit_code == 0, runs.output
    assert hvdk8s(k8s, "wait", "runs", "--timeout", "60").exit_code == 0


def test_the_agents_sweep_fails_an_unpullable_trainjob_with_nobody_waiting(k8s):
    """The unattended release: the start guard's sweep (start_guard.sweep_node) finds
    the TrainJob's node pod past its start timeout and suspends the TrainJob, so Trainer
    suspends its JobSet and no pod keeps a GPU."""
    from datetime import timedelta

    from launcher.backends.kubernetes import start_guard

    srv = k8s.server()
    srv.install_trainer()
    srv.unpullable_image("gone:1")
    srv.create(tj.horovod_runtime(_spec(image="gone:1")))
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "unp", "--workers", "2", "--gpus", "1",
                       "--image", "gone:1", "--start-timeout", "30", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output

    def pulling():
        pods = [p for p in srv.objects("pods", "default")
                if p["metadata"]["name"].startswith("unp-node-")]
        return pods and all((p["status"].get("containerStatuses") or [{}])[0].get(
            "state", {}).get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")
            for p in pods)
    srv.wait_for(pulling)
    later = start_guard.utc_now() + timedelta(seconds=31)
    client = k8s.backend().client
    failed = {j for node in ("gpu-node-0", "gpu-node-1")
              for j in start_guard.sweep_node(client, node, later)}
    assert failed == {"default/unp"}
    assert srv.get("trainjobs.trainer.kubeflow.org", "unp")["spec"]["suspend"] is True
    srv.wait_for(lambda: not [p for p in srv.objects("pods", "default")
                              if p["metadata"]["name"].startswith("unp-")
                              and not p["metadata"].get("deletionTimestamp")])
    waited = hvdk8s(k8s, "wait", "unp", "--timeout", "30")
    assert waited.exit_code == 1 and "StartTimeout" in waited.output, waited.output


def test_install_runtime_where_trainer_is_missing_says_so_and_installs_nothing(k8s):
    result = runner.invoke(app, ["install", "runtime", "--image", IMAGE, "--context", k8s.context])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        "error: Kubeflow Trainer is not installed (no trainer.kubeflow.org TrainJob in the "
        "API); install Kubeflow Trainer first")


def test_auto_choices_take_only_what_a_trainjob_carries_and_given_ones_are_refused():
    spec = tj.within_trainjob(_spec())
    assert (spec.rdma, spec.gpu_request) == ("off", "device-plugin")
    spec = tj.within_trainjob(_spec(rdma="on", gpu_request="dra"))
    assert (spec.rdma, spec.gpu_request) == ("on", "dra")  # named: refused at rendering, not changed


def test_kueue_topology_annotation_goes_on_the_node_pods_and_compute_domains_are_refused():
    from types import SimpleNamespace

    from mpijob.errors import SpecError

    spec = _spec(gang="kueue", queue="q", gpus_per_worker=2)
    placement = _placement(spec, [("a", [0, 1]), ("b", [0, 1])])
    ranked = SimpleNamespace(label="cloud.example/rack", scheduler="kueue")
    object.__setattr__(placement, "network_domain", ranked)
    trainjob, _ = render(spec, mode="trainjob", placement=placement)
    node = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]
    assert node["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-required-topology"] == "cloud.example/rack"
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    object.__setattr__(placement, "compute_domain", True)
    with pytest.raises(SpecError, match="ComputeDomain IMEX channel"):
        render(spec, mode="trainjob", placement=placement)
