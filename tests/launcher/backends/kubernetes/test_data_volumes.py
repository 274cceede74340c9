"""--data PVC:MOUNT[:ro] and --data-dir: rendering in both modes, the access-mode check
before creating, and the test API server's attach/detach model it guards against."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.jobspec.volumes import DataVolume, claim_refusal
from tests.render_cases import FIXED_KEYS, STUB_BENCHMARK
from tests.schemas import validate_object

runner = CliRunner()
RWO, ROX, RWX = ["ReadWriteOnce"], ["ReadOnlyMany"], ["ReadWriteMany"]


def _render(mode, **spec):
    s = build_spec(name="d", **spec)
    return render(s, mode=mode, ssh=FIXED_KEYS, benchmark_source=STUB_BENCHMARK)


def _pod_specs(objects):
    """(role, pod spec) of every pod or pod template."""
    for o in objects:
        role = (o["metadata"].get("labels") or {}).get(names.LABEL_ROLE)
        if o["kind"] == "Pod":
            yield role, o["spec"]
        elif o["kind"] == "Job" and names.LABEL_START_GATE not in o["metadata"]["labels"]:
            yield "launcher", o["spec"]["template"]["spec"]  # the start gate reads no data
        elif o["kind"] == "MPIJob":
            for r, rs in o["spec"]["mpiReplicaSpecs"].items():
                yield r.lower(), rs["template"]["spec"]


def _mounts(pod_spec):
    return {m["mountPath"]: m for c in pod_spec["containers"] for m in c.get("volumeMounts", [])}


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_every_worker_mounts_the_claim_and_the_host_dir(mode):
    objects = _render(mode, workers=3, gpus_per_worker=1,
                      data=[{"claim": "imagenet", "mount": "/data", "read_only": True}],
                      data_dirs=[{"path": "/mnt/scratch", "mount": "/scratch"}],
                      working_dir="/workspace", service_account="trainer")
    seen = 0
    for role, pod in _pod_specs(objects):
        mounts = _mounts(pod)
        vols = {v["name"]: v for v in pod["volumes"]}
        assert pod["serviceAccountName"] == "trainer"
        assert pod["containers"][0]["workingDir"] == "/workspace"
        if role == "worker":
            seen += 1
            assert mounts["/data"]["readOnly"] is True
            assert vols[mounts["/data"]["name"]]["persistentVolumeClaim"] == {
                "claimName": "imagenet", "readOnly": True}
            assert vols[mounts["/scratch"]["name"]]["hostPath"] == {
                "path": "/mnt/scratch", "type": "Directory"}
        else:  # the built-in launch line reads no data: the launcher does not mount it
            assert "/data" not in mounts and "/scratch" not in mounts
    assert seen == (3 if mode == "pods" else 1)
    for o in objects:
        validate_object(o)


@pytest.mark.parametrize("mode", ["pods", "operator"])
def test_the_launcher_mounts_the_data_when_the_users_mpirun_line_runs_there(mode):
    objects = _render(mode, workers=2, command=("mpirun python /data/train.py",), shell=True,
                      data=[{"claim": "imagenet", "mount": "/data"}])
    launchers = [p for role, p in _pod_specs(objects) if role == "launcher"]
    assert launchers and all("/data" in _mounts(p) for p in launchers)


@pytest.mark.parametrize("value, message", [
    ("imagenet", "expected PVC:MOUNT"),
    ("imagenet:data", "is not absolute"),
    ("imagenet:/etc/hvdk8s", "which hvdk8s uses"),
    ("Imagenet:/data", "is not a PersistentVolumeClaim name"),
    ("imagenet:/data:rx", "expected ro or rw"),
])
def test_bad_data_values_are_one_line_naming_the_option(value, message):
    result = runner.invoke(app, ["submit", "mpi", "--workers", "2", "--data", value, "--dry-run"])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if "--data" in x]
    assert message in line and "Traceback" not in result.output


def test_two_volumes_on_one_path_are_refused():
    result = runner.invoke(app, ["submit", "mpi", "--data", "a:/data", "--data-dir",
                                 "/mnt/a:/data", "--dry-run"])
    assert result.exit_code == 2 and "two volumes are mounted at /data" in result.output


def test_done_when_dry_run_mounts_the_claim_in_every_worker():
    result = runner.invoke(app, ["submit", "mpi", "--workers", "2", "--gpus", "1", "--data",
                                 "imagenet:/data:ro", "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    import json
    objects = json.loads(result.stdout)["items"]
    workers = [p for role, p in _pod_specs(objects) if role == "worker"]
    assert len(workers) == 2
    assert all(_mounts(w)["/data"]["readOnly"] for w in workers)


# --- the access-mode rule (pure) -----------------------------------------------------------
V = DataVolume(claim="imagenet", mount="/data")


@pytest.mark.parametrize("modes, nodes, pinned, refused", [
    (RWX, ["a", "b"], True, None),
    (ROX, ["a", "b"], True, "add :ro"),  # ROX only mounts read-only
    (RWO, ["a", "a"], True, None),
    (RWO, ["a", "b"], True, "placed on nodes a, b"),
    (RWO, [None, None], True, "not planned onto nodes"),
    (RWO, ["a", "a"], False, "gang scheduler may place"),
    (RWO, ["a"], False, None),
    (["ReadWriteOncePod"], ["a", "a"], True, "one pod only"),
    ([], ["a", "b"], True, None),  # no modes: nothing to judge by
])
def test_claim_refusal(modes, nodes, pinned, refused):
    why = claim_refusal(V, modes, nodes, pinned=pinned)
    if refused is None:
        assert why is None
    else:
        assert refused in why and "imagenet" in why


# --- the test API server's attach/detach model ------------------------------------------
def _pod(name, node, claim="shared"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}}


def _waiting(srv, name):
    pod = srv.get("pods", name)
    states = [c["state"] for c in (pod.get("status") or {}).get("containerStatuses") or []]
    return pod["status"].get("phase"), states


@pytest.mark.parametrize("modes, second_runs", [(RWO, False), (RWX, True), (ROX, True)])
def test_kubeapi_attaches_a_single_attach_claim_to_one_node_only(kube_server, modes, second_runs):
    srv = kube_server
    claim = srv.add_pvc("shared", modes)
    srv.create(_pod("first", "gpu-node-0"))
    srv.wait_for(lambda: srv.get("pods", "first").get("status", {}).get("phase") == "Running")
    srv.create(_pod("same-node", "gpu-node-0"))
    srv.create(_pod("second", "gpu-node-1"))
    srv.wait_for(lambda: srv.get("pods", "same-node").get("status", {}).get("phase") == "Running")
    if second_runs:
        srv.wait_for(lambda: srv.get("pods", "second").get("status", {}).get("phase") == "Running")
        assert not srv.events_for("second", reason="FailedAttachVolume")
        return
    (event,) = srv.wait_for(lambda: srv.events_for("second", reason="FailedAttachVolume"))
    assert event["type"] == "Warning"
    assert event["message"] == (f'Multi-Attach error for volume "{claim["spec"]["volumeName"]}" '
                                "Volume is already used by pod(s) first, same-node")
    phase, states = _waiting(srv, "second")
    assert phase == "Pending" and states == [{"waiting": {"reason": "ContainerCreating"}}]
    # Once the first node's pods are gone the volume detaches and the second pod starts.
    srv.delete("pods", "first")
    srv.delete("pods", "same-node")
    srv.wait_for(lambda: srv.get("pods", "second").get("status", {}).get("phase") == "Running")


# --- hvdk8s refuses before creating ----------------------------------------------------------
def _submit(k8s, *args):
    return runner.invoke(app, ["submit", "mpi", "--name", "data-job", "--image", k8s.image,
                               *args, *k8s.cli_args()])


def _created(srv):
    return [o["metadata"]["name"] for kind in ("jobs", "pods", "configmaps", "secrets", "services")
            for o in srv.objects(kind, "default")
            if (o["metadata"].get("labels") or {}).get(names.LABEL_JOB) == "data-job"]


def test_done_when_an_rwo_claim_on_a_two_node_placement_is_refused_before_anything_is_created(k8s):
    srv = k8s.server()
    srv.add_pvc("imagenet", RWO)
    result = _submit(k8s, "--workers", "2", "--gpus", "8", "--data", "imagenet:/data:ro")
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert "claim imagenet is RWO" in line and "gpu-node-0, gpu-node-1" in line
    assert _created(srv) == []


def test_an_rwo_claim_on_one_node_and_an_rwx_claim_anywhere_are_accepted(k8s):
    srv = k8s.server()
    srv.add_pvc("scratch", RWO)
    srv.add_pvc("imagenet", RWX)
    result = _submit(k8s, "--workers", "2", "--gpus", "4", "--data", "imagenet:/data:ro",
                     "--data", "scratch:/scratch")
    assert result.exit_code == 0, result.output
    (worker,) = [p for p in srv.objects("pods", "default")
                 if p["metadata"]["labels"].get(names.LABEL_ROLE) == "worker"]
    assert {"/data", "/scratch"} <= set(_mounts(worker["spec"]))


def test_a_missing_claim_is_refused_with_the_namespace(k8s):
    srv = k8s.server()
    result = _submit(k8s, "--workers", "1", "--gpus", "1", "--data", "nope:/data")
    assert result.exit_code == 2
    assert "no PersistentVolumeClaim nope in namespace default" in result.output
    assert _created(srv) == []


def test_the_local_backend_refuses_pod_volumes_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["submit", "mpi", "--backend", "local", "--workers", "1",
                                 "--data", "imagenet:/data", "python -c pass"])
    assert result.exit_code == 2
    assert "--data applies to Kubernetes pods" in result.output
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.json"))


def test_a_host_dir_comes_with_a_note_about_the_scheduler():
    # GPUs this machine lacks: the dry run shows the pods of a cluster
    result = runner.invoke(app, ["submit", "mpi", "--gpus", "1", "--data-dir", "/mnt/x:/x",
                                 "--dry-run"])
    assert result.exit_code == 0
    assert "hostPath" in result.output and "scheduler does not know" in result.output
