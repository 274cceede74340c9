"""End to end through the CLI (`hvdk8s ... --backend kubernetes`), and `hvdk8s top`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.jobspec import names
from tests.k8s_env import hvdk8s

runner = CliRunner()


def job_objects(srv, job):
    kinds = ("pods", "jobs", "services", "configmaps", "secrets")
    return [(kind, o["metadata"]["name"]) for kind in kinds for o in srv.objects(kind, "default")
            if (o["metadata"].get("labels") or {}).get(names.LABEL_JOB) == job]


def job_pods(srv, job):
    return [p for p in srv.objects("pods", "default")
            if p["metadata"]["labels"].get(names.LABEL_JOB) == job]


def run_to_success(k8s, job, logs):
    """A one-worker job whose launcher prints `logs`, submitted and waited for to the end."""
    k8s.server()
    k8s.script_launcher(job, logs)
    assert hvdk8s(k8s, "submit", "mpi", "--name", job, "--image", k8s.image,
                  "python", "train.py").exit_code == 0
    assert hvdk8s(k8s, "wait", job, "--timeout", "30").exit_code == 0


def test_done_when_submit_wait_logs_delete(k8s):
    job = k8s.name("vgg16")
    k8s.script_launcher(job, [(0.2, "hvdk8s: worker ready"), (0.3, "total images/sec: 1450.2"),
                              'HVDK8S_RESULT {"total_images_per_sec": 1450.2}'])
    result = runner.invoke(app, ["submit", "mpi", "--name", job, "--workers", "4", "--gpus", "1",
                                 "--gang", "--gputopology", "--image", k8s.image,
                                 "--model", "vgg16", *k8s.cli_args()])
    assert result.exit_code == 0, result.output
    if k8s.srv is not None:
        # The Job controller makes the launcher pod once submit has released the Job.
        pods = k8s.srv.wait_for(lambda: len(job_pods(k8s.srv, job)) == 2 and job_pods(k8s.srv, job))
        workers = [p for p in pods if p["metadata"]["labels"][names.LABEL_ROLE] == "worker"]
        launchers = [p for p in pods if p["metadata"]["labels"][names.LABEL_ROLE] == "launcher"]
        assert len(workers) == 1 and len(launchers) == 1
        worker = workers[0]
        assert worker["spec"]["nodeName"] in ("gpu-node-0", "gpu-node-1")
        assert worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
        assert len(worker["metadata"]["annotations"][names.ANNOTATION_GPUS].split(",")) == 4

    waited = hvdk8s(k8s, "wait", job, "--timeout", "600")
    assert waited.exit_code == 0, waited.output
    assert "Succeeded" in waited.output

    logs = hvdk8s(k8s, "logs", job)
    assert logs.exit_code == 0
    assert "total images/sec:" in logs.output

    got = hvdk8s(k8s, "get", job, "-o", "json")
    status = json.loads(got.stdout)
    assert status["phase"] == "Succeeded" and status["images_per_sec"] > 0

    deleted = hvdk8s(k8s, "delete", job)
    assert deleted.exit_code == 0 and f"job {job} deleted" in deleted.output
    if k8s.srv is not None:
        assert job_objects(k8s.srv, job) == []
    again = hvdk8s(k8s, "delete", job)
    assert again.exit_code == 0 and "not found" in again.output


def test_wait_exit_codes_for_failure_and_timeout(k8s):
    srv = k8s.server()
    srv.script_pod("bad-launcher-.*", logs=["mpirun: rank 3 died"], exit_code=1)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "bad", "--image", k8s.image,
                  "python", "train.py").exit_code == 0
    failed = hvdk8s(k8s, "wait", "bad", "--timeout", "30")
    assert failed.exit_code == 1 and "Failed" in failed.output

    assert hvdk8s(k8s, "submit", "mpi", "--name", "slow", "--image", k8s.image,
                  "python", "train.py").exit_code == 0
    slow = hvdk8s(k8s, "wait", "slow", "--timeout", "0.5")
    assert slow.exit_code == 124
    assert "error: job slow is still" in slow.output


def test_name_clash_through_the_cli(k8s):
    k8s.server()
    args = ["submit", "mpi", "--name", "dup", "--image", k8s.image, "python", "train.py"]
    assert hvdk8s(k8s, *args).exit_code == 0
    second = hvdk8s(k8s, *args)
    assert second.exit_code == 2
    assert "error: job dup already exists in namespace default" in second.output
    assert "delete it first: hvdk8s delete dup -n default" in second.output


def test_operator_mode_through_the_cli(k8s):
    srv = k8s.server()
    args = ["submit", "mpi", "--name", "op", "--workers", "2", "--gpus", "1", "--mode",
            "operator", "--image", k8s.image, "python", "train.py"]
    missing = hvdk8s(k8s, *args)
    assert missing.exit_code == 2
    assert "the Kubeflow MPI Operator is not installed" in missing.output
    srv.install_crd("mpijob")
    assert hvdk8s(k8s, *args).exit_code == 0
    assert [o["metadata"]["name"] for o in srv.objects("mpijobs.kubeflow.org", "default")] == ["op"]
    listed = hvdk8s(k8s, "list", "-o", "json")
    assert [(r["name"], r["mode"]) for r in json.loads(listed.stdout)] == [("op", "operator")]


def test_operator_mode_creates_the_benchmark_configmap_the_mpijob_mounts(k8s):
    srv = k8s.server()
    srv.install_mpi_operator()
    srv.script_pod(r"op1-worker-\d+", exit_code=None)
    result = hvdk8s(k8s, "submit", "mpi", "--name", "op1", "--workers", "2", "--gpus", "2",
                    "--image", "img:1", "--mode", "operator")
    assert result.exit_code == 0, result.output
    assert ("configmaps", "op1-benchmark") in job_objects(srv, "op1")
    owner = srv.get("configmaps", "op1-benchmark")["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("MPIJob", "op1")
    # `<job>-config` is the operator's: it writes its hostfile there and starts the workers
    # (an hvdk8s object of that name made it stop with ErrResourceExists).
    srv.wait_for(lambda: srv.get("pods", "op1-worker-0"))
    assert "hostfile" in srv.get("configmaps", "op1-config")["data"]
    assert not srv.events_for("op1", reason="ErrResourceExists")


def test_list_shows_the_rate_tidy_recorded_from_the_log(k8s):
    """A launcher that left no termination message (an image without awk): `get` reads the
    rate from its log, `tidy` records it on the root, where `list` reads."""
    run_to_success(k8s, "ok1", ["total images/sec: 400.00"])
    assert "total images/sec: 400.00" in hvdk8s(k8s, "get", "ok1").output
    assert [r["images_per_sec"] for r in json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)] \
        == [None]
    assert "job ok1: recorded its 400 images/sec on Job ok1-launcher" in hvdk8s(
        k8s, "tidy", "ok1").stdout
    rows = json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)
    assert [(r["name"], r["images_per_sec"]) for r in rows] == [("ok1", 400.0)]
    table = hvdk8s(k8s, "list").output.splitlines()
    assert "400" in next(line for line in table if line.startswith("ok1"))


def test_rbac_refusal_through_the_cli(k8s):
    srv = k8s.server()
    srv.forbid("create", "pods", "default")
    result = hvdk8s(k8s, "submit", "mpi", "--name", "rbac", "--image", k8s.image,
                    "python", "train.py")
    assert result.exit_code == 1
    assert "error: forbidden: cannot create pods in namespace default (RBAC)" in result.output
    assert job_objects(srv, "rbac") == []


def test_logs_of_one_worker_and_all(k8s):
    srv = k8s.server()
    srv.script_pod("two-worker-1", logs=["worker one says hi"], exit_code=None)
    srv.script_pod("two-launcher-.*", logs=["launcher says hi"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "two", "--workers", "2", "--image", k8s.image,
                  "python", "train.py").exit_code == 0
    srv.wait_for(lambda: "worker one says hi" in hvdk8s(k8s, "logs", "two", "--worker", "1").output
                 and "launcher says hi" in hvdk8s(k8s, "logs", "two").output)
    every = hvdk8s(k8s, "logs", "two", "--all").output
    assert "[two-worker-1] worker one says hi" in every
    assert any(line.startswith("[two-launcher-") and line.endswith("] launcher says hi")
               for line in every.splitlines())


def test_logs_all_of_a_finished_job_keeps_the_pod_prefix(k8s):
    run_to_success(k8s, "fin", ["launcher says bye"])
    lines = hvdk8s(k8s, "logs", "fin", "--all").output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("[fin-launcher-") and lines[0].endswith("] launcher says bye")


def test_logs_of_a_worker_the_job_does_not_have_is_a_usage_error(k8s):
    srv = k8s.server()
    k8s.script_launcher("long1", ["running"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "long1", "--workers", "2", "--image",
                  k8s.image, "python", "train.py").exit_code == 0
    srv.wait_for(lambda: len(job_pods(srv, "long1")) == 3)
    result = hvdk8s(k8s, "logs", "long1", "--worker", "3")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --worker: job long1 has worker pods 0..1, not 3"


def test_no_kubeconfig_anywhere_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "hvdk8s"))
    nothing = "no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config) and not running in a pod"
    # Each command offers the way on it has (every hint: tests/launcher/cli/
    # test_cli_no_surprises.py).
    # (`plan` with nothing configured plans on this machine: tests/launcher/cli/test_free_gpus.py.)
    for args, expected in (
            (["list", "--backend", "kubernetes"],
             f"{nothing}; pass --kubeconfig FILE or set $KUBECONFIG, or see this machine's jobs "
             "with --backend local"),
            (["get", "x", "--backend", "kubernetes", "--context", "prod"],
             f"--context prod: {nothing}; pass --kubeconfig FILE (the kubeconfig that has this "
             "context) or set $KUBECONFIG")):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        assert result.stderr.strip() == f"error: {expected}", args


# --- top ----------------------------------------------------------------------------------------
def test_top_node_and_job(k8s):
    srv = k8s.server()
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "hog-worker-0", "namespace": "default",
                             "labels": names.job_labels("hog"),
                             "annotations": {names.ANNOTATION_GPUS: "0,1,2,3"}},
                "spec": {"nodeName": "gpu-node-1", "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}})
    nodes = json.loads(runner.invoke(app, ["top", "node", "-o", "json", "--context", "test"]).stdout)
    by_name = {n["node"]: n for n in nodes["nodes"]}
    assert by_name["gpu-node-1"]["allocated"] == [0, 1, 2, 3]
    assert by_name["gpu-node-1"]["free_nvlink_groups"][0] == [4, 5, 6, 7]
    assert by_name["gpu-node-0"]["free_nvlink_groups"][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert by_name["gpu-node-0"]["topology_source"] == "preset"

    table = runner.invoke(app, ["top", "node", "-d", "--context", "test"])
    assert table.exit_code == 0
    assert "{4-7}" in table.output and "GPU0*" in table.output

    jobs = json.loads(runner.invoke(app, ["top", "job", "-o", "json", "--context", "test"]).stdout)
    # no hvdk8s job behind the pod, so no ranks' progress
    assert jobs["jobs"] == [{"job": "hog", "namespace": "default", "gpus": 4, "pods": 1,
                             "nodes": {"gpu-node-1": [0, 1, 2, 3]}, "progress": None}]


def test_free_nvlink_groups_are_maximal_cliques():
    from launcher.cli.top import free_nvlink_groups
    from mpijob.scheduling.presets import preset

    dgx1 = preset("dgx1-v100")
    assert free_nvlink_groups(dgx1, range(8))[:2] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    # GPU 3 taken: {0,1,2} stays a clique; 7's NVLink peers among the free are 4, 5, 6.
    groups = free_nvlink_groups(dgx1, [0, 1, 2, 4, 5, 6, 7])
    assert groups[:2] == [(4, 5, 6, 7), (0, 1, 2)]
    assert all(len(g) >= 2 for g in groups)
    pcie = preset("pcie-8gpu-dual-socket")
    assert free_nvlink_groups(pcie, range(8)) == []


@pytest.mark.parametrize("args, offers_a_file", [(["top", "node", "--backend", "kubernetes"], True),
                                                  (["top", "job", "--backend", "kubernetes"], False)])
def test_top_without_any_cluster_says_what_to_do(args, offers_a_file, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no kubeconfig found")
    # `top job` has no --cluster option (a cluster file holds no jobs).
    assert ("--cluster FILE" in result.stderr) == offers_a_file


def test_top_tables_keep_whole_names_when_piped(k8s, monkeypatch):
    srv = k8s.server()
    for var in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    long_node = "gpu-node-in-rack-17-of-the-east-datacenter-with-a-long-name-xyz"  # 63: the most
    srv.add_node(long_node, gpus=8, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                            "nvidia.com/gpu.count": "8"})
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a-job-with-a-long-name-worker-0", "namespace": "default",
                             "labels": names.job_labels("a-job-with-a-long-descriptive-name"),
                             "annotations": {names.ANNOTATION_GPUS: "0,1"}},
                "spec": {"nodeName": long_node, "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
    nodes = runner.invoke(app, ["top", "node", "--context", "test"])  # stdout is not a terminal
    assert nodes.exit_code == 0, nodes.output
    jobs = runner.invoke(app, ["top", "job", "--context", "test"])
    assert jobs.exit_code == 0, jobs.output
    for output, names_shown in ((nodes.output, ("gpu-node-0", "Tesla-V100-SXM2-16GB", long_node,
                                                "NVIDIA-A100-SXM4-80GB")),
                                (jobs.output, ("a-job-with-a-long-descriptive-name", long_node))):
        assert "…" not in output
        for name in names_shown:
            assert name in output


def test_server_dry_run_through_the_cli(k8s):
    srv = k8s.server()
    result = hvdk8s(k8s, "submit", "mpi", "--name", "dry", "--workers", "2", "--gpus", "2",
                    "--image", k8s.image, "--dry-run=server", "-o", "json", "python", "train.py")
    assert result.exit_code == 0, result.output
    kinds = [o["kind"] for o in json.loads(result.stdout)["items"]]
    assert kinds[:4] == ["Job", "ConfigMap", "Secret", "Service"] and "Pod" in kinds
    assert job_objects(srv, "dry") == []


def test_top_node_reads_a_cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n"
                    "  - {name: a, topology: dgx1-v100, allocated: [0, 4]}\n"
                    "  - {name: b, topology: pcie-8gpu-dual-socket}\n")
    result = runner.invoke(app, ["top", "node", "--cluster", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["node"]: r for r in json.loads(result.stdout)["nodes"]}
    assert rows["a"]["allocated"] == [0, 4] and rows["a"]["topology_source"] == "file"
    assert rows["a"]["free_nvlink_groups"][0] == [1, 2, 3]
    assert rows["b"]["free_nvlink_groups"] == []


def test_root_kubeconfig_option_selects_the_cluster(kube_server, kubeconfig, monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    result = runner.invoke(app, ["--kubeconfig", kubeconfig, "top", "node", "-o", "json"])
    assert result.exit_code == 0, result.output
    nodes = json.loads(result.stdout)["nodes"]
    assert {"gpu-node-0", "gpu-node-1"} <= {n["node"] for n in nodes}
    # A file that cannot be used: a runtime failure naming it (exit 1), never local jobs.
    missing = runner.invoke(app, ["--kubeconfig", str(tmp_path / "nope"), "list"])
    assert missing.exit_code == 1
    assert missing.stderr.startswith(f"error: --kubeconfig {tmp_path / 'nope'}: no such file")


def test_kueue_with_built_in_mode_is_refused_with_the_command_that_works(k8s):
    srv = k8s.server()
    srv.install_group("kueue")
    before = srv.count_requests("POST")
    result = hvdk8s(k8s, "submit", "mpi", "--name", "kq", "--workers", "2", "--gpus", "1",
                    "--gang", "--queue", "team-a", "--image", "img:1", "python", "train.py")
    assert result.exit_code == 2
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "use --mode operator" in error[0]
    assert "Traceback" not in result.output
    assert srv.count_requests("POST") == before and job_objects(srv, "kq") == []
