"""What the CLI shows is what happens: each case as a new user met it, against the test API
server (two 8-GPU nodes) or offline. Every test here failed before its fix."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
import yaml
from typer.testing import CliRunner

from launcher.backends.kubernetes import job_logs as k8s_job_logs
from launcher.backends.kubernetes import start_guard
from launcher.backends.kubernetes.client import ApiError
from launcher.cli.app import app
from tests.k8s_env import hvdk8s

runner = CliRunner()


def _submit(k8s, *args):
    """submit as a user types it: the backend chosen from $KUBECONFIG, not named."""
    result = runner.invoke(app, ["submit", "mpi", "--image", k8s.image, *args,
                                 "-n", k8s.namespace])
    assert "Traceback" not in result.output, result.output
    return result


# --- 1: the client dry run plans on the live cluster ------------------------------------------
def test_client_dry_run_shows_the_pods_submit_creates(k8s):
    result = _submit(k8s, "--name", "cmp", "--workers", "4", "--gpus", "1", "--dry-run",
                     "-o", "json")
    assert result.exit_code == 0, result.output
    pods = [o for o in json.loads(result.stdout)["items"] if o["kind"] == "Pod"]
    assert len(pods) == 1  # one pod holding the node's four GPUs, as submit makes
    limits = pods[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] in (4, "4")
    assert "no cluster snapshot" not in result.stderr
    assert "placement: gpu-node-" in result.stderr


def test_client_dry_run_on_an_unreachable_cluster_says_it_is_offline(tmp_path, monkeypatch):
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
              "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}
    (tmp_path / "kc").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kc"))
    result = runner.invoke(app, ["submit", "mpi", "--name", "off", "--workers", "2",
                                 "--gpus", "1", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "note: offline dry run: cannot reach the Kubernetes API server" in result.stderr


# --- 3: a missing ServiceAccount is named, not called RBAC --------------------------------------
def test_a_missing_service_account_is_named_before_anything_is_created(k8s):
    srv = k8s.server()
    result = _submit(k8s, "--name", "sa", "--workers", "2", "--gpus", "1",
                     "--service-account", "nope")
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: --service-account nope: no ServiceAccount nope in namespace default (kubectl "
        "get serviceaccounts -n default); pod sa-launcher names it (nothing was created)"]
    assert srv.objects("jobs", "default") == []


def test_a_403_from_admission_is_not_called_rbac():
    exc = ApiError(403, "Forbidden", 'pods "x" is forbidden: error looking up service account '
                   'default/nope: serviceaccount "nope" not found', verb="create",
                   resource="pods", namespace="default")
    text = str(exc.user_error())
    assert "RBAC" not in text and 'serviceaccount "nope" not found' in text
    rbac = ApiError(403, "Forbidden", 'pods is forbidden: User "alice" cannot create resource '
                    '"pods" in API group "" in the namespace "default"', verb="create",
                    resource="pods", namespace="default")
    assert "(RBAC)" in str(rbac.user_error())


# --- 4: a patch naming a container the pod lacks -----------------------------------------------
def test_a_worker_patch_applied_to_the_launcher_is_refused_naming_the_target(tmp_path):
    patch = tmp_path / "p.yaml"
    patch.write_text("spec:\n  containers:\n  - name: worker\n    env:\n    - name: A\n"
                     "      value: '1'\n")
    result = runner.invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--cluster",
                                 "tests/data/clusters/two-dgx1.yaml", "--name", "pp",
                                 "--workers", "2", "--gpus", "1", "--pod-patch", str(patch),
                                 "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "the launcher pod does not have (its containers: launcher)" in result.output
    assert f"--pod-patch worker={patch}" in result.output
    fixed = runner.invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--cluster",
                                "tests/data/clusters/two-dgx1.yaml", "--name", "pp",
                                "--workers", "2", "--gpus", "1", "--pod-patch",
                                f"worker={patch}", "--dry-run"])
    assert fixed.exit_code == 0, fixed.output


# --- 5: logs -f says what it waits for, and ends with the failure -------------------------------
def test_logs_follow_says_it_waits_for_an_image_and_ends_with_the_reason(k8s, monkeypatch):
    srv = k8s.server()
    missing = "registry.example/gone:1"
    srv.unpullable_image(missing)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "unp", "--workers", "2", "--gpus", "1",
                       "--image", missing, "--start-timeout", "30", "python", "t.py")
    assert submitted.exit_code == 0, submitted.output
    said: list[str] = []
    real_note, real_now = k8s_job_logs.note, start_guard.utc_now

    def record(message):
        said.append(message)
        real_note(message)

    def pulled_for_a_while():  # the start timeout passes once -f has said why it waits
        late = any("ErrImagePull" in m or "ImagePullBackOff" in m for m in said)
        return real_now() + (timedelta(seconds=31) if late else timedelta())

    monkeypatch.setattr(k8s_job_logs, "note", record)
    monkeypatch.setattr(start_guard, "utc_now", pulled_for_a_while)
    done: dict = {}  # in a thread: a stream that never ends fails the test, not hangs it
    follow = threading.Thread(target=lambda: done.update(r=hvdk8s(k8s, "logs", "-f", "unp")),
                              daemon=True)
    follow.start()
    follow.join(120)
    assert "r" in done, f"logs -f still silent after 120 s; it said {said}"
    result = done["r"]
    assert any(m.startswith("waiting for unp-launcher") and "ErrImagePull" in m or
               "ImagePullBackOff" in m for m in said), said
    assert result.exit_code == 1, result.output
    # It reads only: nothing failed the job, and the last lines say so and what does.
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("error: job unp missed its start timeout: not running 30s "
                                "after it was scheduled: "), lines[-1]
    assert lines[-1].endswith("; not failed in the cluster yet")
    assert "note: job unp missed its start timeout and has not been failed: `hvdk8s tidy unp " \
           "-n default` fails it and frees its GPUs" in result.output
    assert not srv.get("jobs", "unp-launcher")["spec"].get("suspend")


# --- 6: config lists are explicit --------------------------------------------------------------
def test_config_set_keeps_a_comma_and_lists_are_added_to_explicitly(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    monkeypatch.delenv("HVDK8S_CONFIG")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert runner.invoke(app, ["config", "set", "env", "NCCL_SOCKET_IFNAME=^lo,docker0"]) \
        .exit_code == 0
    assert runner.invoke(app, ["config", "add", "env", "B=1"]).exit_code == 0
    stored = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert stored == {"env": ["NCCL_SOCKET_IFNAME=^lo,docker0", "B=1"]}
    assert runner.invoke(app, ["config", "remove", "env", "B=1"]).exit_code == 0
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {
        "env": ["NCCL_SOCKET_IFNAME=^lo,docker0"]}
    bad = runner.invoke(app, ["config", "add", "env", "docker0"])
    assert bad.exit_code == 2 and "key env: expected KEY=VALUE" in bad.output


def test_a_bad_config_value_names_the_file_and_key_not_a_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path))
    monkeypatch.delenv("HVDK8S_CONFIG")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / "config.yaml").write_text("env: [docker0]\n")
    result = runner.invoke(app, ["submit", "mpi", "--workers", "1", "--gpus", "0",
                                 "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: config {tmp_path / 'config.yaml'}: key env: "
                                     "expected KEY=VALUE, got 'docker0'")


# --- 7: a request the cluster cannot serve is one line, exit 2 -----------------------------------
@pytest.mark.parametrize("args, start", [
    (["--data", "nope:/data"], "error: --data nope: no PersistentVolumeClaim nope"),
    (["--gang-scheduler", "kai"], "error: --gang-scheduler kai: KAI is not installed"),
    (["--mode", "operator"], "error: --mode operator: the Kubeflow MPI Operator is not"),
    (["-n", "doesnotexist"], "error: -n/--namespace doesnotexist: no namespace"),
])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_what_the_cluster_cannot_serve_is_one_line_and_exit_2(k8s, args, start, dry_run):
    result = runner.invoke(app, ["submit", "mpi", "--image", k8s.image, "--name", "no",
                                 "--workers", "2", "--gpus", "1", *dry_run, *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), lines
    assert "drop --gang" not in lines[0]  # --gang was not given
    assert k8s.server().objects("jobs", "default") == []


def test_exit_codes_are_documented_in_help():
    text = " ".join(runner.invoke(app, ["submit", "mpi", "--help"], env={"COLUMNS": "200"})
                    .output.split())
    assert "Exit codes: 0 created" in text and "2 bad input, or a request the cluster cannot" \
        " serve as asked" in text and "124 --wait timed out" in text


# --- 8: image references -----------------------------------------------------------------------
@pytest.mark.parametrize("ref", ["IMG", "repo/Name:1", "a//b", "x:bad tag", "x@sha256:zz"])
def test_an_invalid_image_reference_is_refused_before_anything(ref, tmp_path):
    from mpijob.jobspec.image_ref import image_problem

    assert image_problem(ref) is not None
    result = runner.invoke(app, ["submit", "mpi", "--backend", "kubernetes", "--cluster",
                                 "tests/data/clusters/two-dgx1.yaml", "--workers", "1",
                                 "--gpus", "1", "--image", ref, "--dry-run"])
    assert result.exit_code == 2 and result.output.startswith("error: --image: "), \
        result.output


@pytest.mark.parametrize("ref", ["horovod/horovod:0.28.1", "localhost/hvdk8s-train:0.1.0-cpu",
                                 "registry.example:5000/a/b_c:v1", "nvcr.io/nvidia/pytorch",
                                 "ghcr.io/x/y@sha256:" + "a" * 64])
def test_valid_image_references_pass(ref):
    from mpijob.jobspec.image_ref import image_problem

    assert image_problem(ref) is None


# --- 2: doctor's fix installs no image that does not exist -------------------------------------
def test_install_agent_needs_an_image_the_nodes_can_pull(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    result = runner.invoke(app, ["install", "agent"])
    assert result.exit_code == 2 and result.output.startswith("error: --image: ")
    assert kube_server.objects("daemonsets", "kube-system") == []
    from mpijob.scheduling import doctor

    assert "--image REF" in doctor.INSTALL_AGENT


# --- 9: list reads no log; the rate `get` read stays on the job for list ---------------------------
def test_list_shows_the_rate_from_the_termination_message_and_reads_no_log(k8s):
    """A log per job would make `list` cost a request per job (listing.py): it shows what
    the objects say, the launcher pod's termination message (launcher.sh writes the rate
    there) or the rate `tidy` recorded on the root; neither writes."""
    srv = k8s.server()
    srv.script_pod(r"said-launcher-.*", runs=[{"logs": ["total images/sec: 300.00"],
                                               "termination_message": "total images/sec: 300.00"}])
    k8s.script_launcher("quiet", ["total images/sec: 400.00"])  # an image without awk
    for job in ("said", "quiet"):
        assert hvdk8s(k8s, "submit", "mpi", "--name", job, "--image", k8s.image,
                      "python", "train.py").exit_code == 0
    srv.wait_for(lambda: sum((p.get("status") or {}).get("phase") == "Succeeded"
                             for p in srv.objects("pods", "default")
                             if "launcher" in p["metadata"]["name"]) == 2)
    srv.clear_requests()
    rows = json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)
    assert [(r["name"], r["phase"], r["images_per_sec"]) for r in rows] == [
        ("quiet", "Succeeded", None), ("said", "Succeeded", 300.0)]
    assert srv.count_requests("GET", r"/log$") == 0
    assert json.loads(hvdk8s(k8s, "get", "quiet", "-o", "json").stdout)["images_per_sec"] == 400.0
    assert [r.method for r in srv.request_log if r.method != "GET"] == []
    assert [r["images_per_sec"] for r in json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)] \
        == [None, 300.0]
    assert "job quiet: recorded its 400 images/sec on Job quiet-launcher" in hvdk8s(
        k8s, "tidy", "quiet").stdout
    rows = json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)
    assert [(r["name"], r["images_per_sec"]) for r in rows] == [("quiet", 400.0), ("said", 300.0)]


# --- smaller ones ------------------------------------------------------------------------------
def test_gang_help_names_every_gang_scheduler():
    from launcher.cli.options import GANG_HELP
    from mpijob import gang as gangs

    assert gangs.listed() in GANG_HELP and gangs.listed(built_in=True) in GANG_HELP
    from launcher.cli.job_help import SHOWN  # --queue's help, presented by the CLI

    for s in gangs.SCHEDULERS.values():
        if s.queue:
            assert s.short_title in SHOWN["queue"].help, s.name


def test_namespace_completion_lists_the_clusters_namespaces(kube_server, kubeconfig,
                                                            monkeypatch):
    import typer

    from launcher.cli import completion

    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    ctx = typer.Context(typer.main.get_command(app))
    assert completion.namespaces(ctx, "kube-") == ["kube-node-lease", "kube-public",
                                                   "kube-system"]


def test_config_view_into_a_closed_pipe_is_quiet(tmp_path):
    """`config view --all | head -1`: the reader gone, the writer stops without a word (a
    pipe whose reader closed before the first write makes it certain)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HVDK8S_HOME": str(tmp_path)}
    env.pop("HVDK8S_CONFIG", None)
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "launcher.cli.app", "config", "view",
                               "--all"], env=env, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write)
    assert done.stderr == "", done.stderr


def test_no_rdma_warning_for_a_job_rdma_would_not_speed_up():
    from launcher.formats.clusterfile import cluster_from_data
    from launcher.preparing.planning import plan_job
    from mpijob.jobspec.spec import build_spec
    from tests.mpijob.scheduling.test_rdma import two_nodes

    spec = build_spec(name="j", workers=16, gpus_per_worker=1, rdma="off",
                      benchmark={"model": "resnet50", "batch_size": 256})
    plan = plan_job(spec, cluster_from_data(two_nodes()))
    assert plan.network.warning is None
    assert "would be no faster with it" in plan.network.lines[-1]


def test_doctor_at_80_columns_cuts_no_command(kube_server, kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "80"})
    assert "kubectl" in result.output and "…" not in result.output, result.output
