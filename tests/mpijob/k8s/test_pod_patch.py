"""--pod-patch [launcher|worker|all=]FILE: strategic merge on the rendered pod templates in
both modes, shown in --dry-run, validated, and refused where it breaks what hvdk8s needs."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.k8s.podpatch import strategic_merge
from tests.schemas import validate_object

runner = CliRunner()


def test_strategic_merge_follows_the_pod_merge_keys():
    base = {"spec": {"containers": [{"name": "worker", "image": "a",
                                     "env": [{"name": "A", "value": "1"}],
                                     "volumeMounts": [{"name": "x", "mountPath": "/x"}]}],
                     "volumes": [{"name": "x", "emptyDir": {}}, {"name": "y", "emptyDir": {}}],
                     "tolerations": [{"operator": "Exists"}], "hostIPC": True}}
    patch = {"spec": {"containers": [{"name": "worker", "env": [{"name": "B", "value": "2"}]},
                                     {"name": "side", "image": "busybox"}],
                      "volumes": [{"name": "y", "$patch": "delete"}],
                      "tolerations": [{"key": "k", "operator": "Exists"}],  # no merge key
                      "hostIPC": None,
                      "securityContext": {"runAsUser": 1000}}}
    out = strategic_merge(base, patch)
    worker, side = out["spec"]["containers"]
    assert worker["image"] == "a" and worker["env"] == [{"name": "A", "value": "1"},
                                                        {"name": "B", "value": "2"}]
    assert side == {"name": "side", "image": "busybox"}
    assert out["spec"]["volumes"] == [{"name": "x", "emptyDir": {}}]
    assert out["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert "hostIPC" not in out["spec"] and out["spec"]["securityContext"]["runAsUser"] == 1000
    replaced = strategic_merge(base, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced == {"spec": {"containers": []}}


def _write(tmp_path, name, patch):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(patch))
    return str(path)


def _pod_templates(objects):
    for o in objects:
        role = (o["metadata"].get("labels") or {}).get("hvdk8s.io/role")
        if o["kind"] == "Pod":
            yield role, o
        elif o["kind"] == "Job" and "hvdk8s.io/start-gate-of" not in o["metadata"]["labels"]:
            yield "launcher", o["spec"]["template"]  # the start gate takes no --pod-patch
        elif o["kind"] == "MPIJob":
            for r, rs in o["spec"]["mpiReplicaSpecs"].items():
                yield r.lower(), rs["template"]


def _dry_run(*args):
    result = runner.invoke(app, ["submit", "mpi", "--name", "p", "--workers", "2", "--gpus", "1",
                                 *args, "--dry-run", "-o", "json"])
    return result, (json.loads(result.stdout)["items"] if result.exit_code == 0 else None)


SIDECAR = {"spec": {"securityContext": {"runAsNonRoot": False, "fsGroup": 2000},
                    "containers": [{"name": "log-shipper", "image": "busybox:1.36"}],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                           "labelSelector": {"matchLabels": {"x": "y"}}}}]}}},
           "metadata": {"labels": {"team": "vision"}}}


@pytest.mark.parametrize("mode", ["pods", "operator"])
@pytest.mark.parametrize("target", ["worker", "launcher", "all"])
def test_the_patch_reaches_the_targeted_pods_in_both_modes(tmp_path, mode, target):
    path = _write(tmp_path, "p.yaml", SIDECAR)
    result, objects = _dry_run("--mode", mode, "--pod-patch", f"{target}={path}")
    assert result.exit_code == 0, result.output
    for role, template in _pod_templates(objects):
        names = [c["name"] for c in template["spec"]["containers"]]
        patched = target in ("all", role)
        assert ("log-shipper" in names) == patched, (role, names)
        assert (template["metadata"]["labels"].get("team") == "vision") == patched
        if patched:
            assert names[0] == role  # hvdk8s's container stays first, as rendered
            assert template["spec"]["securityContext"]["fsGroup"] == 2000
    for obj in objects:
        validate_object(obj)  # the patched pods are valid Kubernetes objects


def test_a_file_without_a_target_patches_every_pod(tmp_path):
    path = _write(tmp_path, "p.yaml", {"spec": {"priorityClassName": "high"}})
    _, objects = _dry_run("--pod-patch", path)
    assert all(t["spec"]["priorityClassName"] == "high" for _, t in _pod_templates(objects))


@pytest.mark.parametrize("mode", ["pods", "operator"])
@pytest.mark.parametrize("patch, broken", [
    ({"spec": {"containers": [{"name": "worker", "resources": {"limits": {"nvidia.com/gpu": 2},
                                                               "requests": {"nvidia.com/gpu": 2}}}]}},
     "the GPU request"),
    ({"spec": {"containers": [{"name": "worker", "command": ["sleep", "1"]}]}},
     "the worker container's command"),
    ({"metadata": {"labels": {"hvdk8s.io/job-name": "other"}}}, "the job's labels"),
    ({"spec": {"hostNetwork": True}}, "the host network setting"),
])
def test_a_patch_that_breaks_what_hvdk8s_relies_on_is_refused(tmp_path, mode, patch, broken):
    path = _write(tmp_path, "bad.yaml", patch)
    result, _ = _dry_run("--mode", mode, "--pod-patch", f"worker={path}")
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("error: --pod-patch: ") and broken in line and "bad.yaml" in line, line


@pytest.mark.parametrize("patch, broken", [
    ({"spec": {"containers": [{"name": "worker", "ports": [{"name": "ssh", "containerPort": 22}]}]}},
     "the ssh port"),
    ({"spec": {"volumes": [{"name": "hvdk8s-config", "$patch": "delete"}]}},
     "the hostfile and scripts mount"),
    ({"spec": {"containers": [{"name": "worker", "volumeMounts": [
        {"mountPath": "/etc/hvdk8s-ssh", "$patch": "delete"}]}]}}, "the SSH key mount"),
])
def test_pods_mode_keeps_its_ssh_port_and_hostfile(tmp_path, patch, broken):
    path = _write(tmp_path, "bad.yaml", patch)
    result, _ = _dry_run("--pod-patch", f"worker={path}")
    assert result.exit_code == 2 and broken in result.output, result.output


def test_adding_a_port_beside_ssh_is_fine(tmp_path):
    path = _write(tmp_path, "p.yaml", {"spec": {"containers": [
        {"name": "worker", "ports": [{"name": "metrics", "containerPort": 9090}]}]}})
    result, objects = _dry_run("--pod-patch", f"worker={path}")
    assert result.exit_code == 0, result.output
    worker = next(t for r, t in _pod_templates(objects) if r == "worker")
    assert [p["name"] for p in worker["spec"]["containers"][0]["ports"]] == ["ssh", "metrics"]


@pytest.mark.parametrize("content, message", [
    ({"spec": {"securityContex": {"runAsUser": 1}}},
     ".spec.securityContex: no such field in PodSpec"),
    ({"spec": {"containers": [{"name": "worker", "imagePullPolcy": "Always"}]}},
     ".spec.containers[0].imagePullPolcy: no such field in Container"),
    ({"spec": {"securityContext": {"runAsUser": "root"}}}, "expected int, got 'root'"),
    ("- not a mapping", "must hold a pod template patch"),
    ("spec: [unclosed", "not valid YAML at line"),
])
def test_bad_patch_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    result, _ = _dry_run("--pod-patch", str(path))
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: --pod-patch {path}") and message in line, line


def test_unknown_target_and_missing_file(tmp_path):
    r1, _ = _dry_run("--pod-patch", f"sidecar={tmp_path}/x.yaml")
    assert r1.exit_code == 2 and "got target 'sidecar'" in r1.output
    r2, _ = _dry_run("--pod-patch", f"{tmp_path}/missing.yaml")
    assert r2.exit_code == 2 and "cannot read" in r2.output
