"""Rendered manifests: golden snapshots, schema validity, and the properties that matter."""

import os

import pytest
import yaml

from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.command import shell_join
from mpijob.k8s.render import with_owner
from mpijob.k8s.start_gate import is_gate
from tests.paths import GOLDEN
from tests.render_cases import CASES, FIXED_KEYS, STUB_BENCHMARK, render_case
from tests.schemas import unknown_fields, validate_object


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case):
    text = yaml.safe_dump_all(render_case(case), sort_keys=False)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("HVDK8S_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
        if os.environ.get("HVDK8S_UPDATE_GOLDEN") != "1":
            pytest.fail(f"golden file {path.name} was missing and has been written; re-run")
    assert text == path.read_text(), f"rendering of {case} changed; review and re-run with HVDK8S_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_validates(case):
    for obj in render_case(case, root_uid="0b4e5f3c-1111-2222-3333-444455556666"):
        validate_object(obj)


def test_unknown_field_detector_catches_typos():
    from tests.schemas import mpijob_schema

    (mpijob, _) = render_case("operator-benchmark-intel")
    mpijob["spec"]["slotPerWorker"] = 1  # the typo the API server would silently drop
    assert unknown_fields(mpijob, mpijob_schema()) == [".spec.slotPerWorker"]


def test_pods_mode_root_is_a_suspended_job_and_owns_everything():
    objects = render_case("pods-benchmark-4x1", root_uid="uid-1")
    root, rest = objects[0], objects[1:]
    assert (root["kind"], root["spec"]["suspend"]) == ("Job", True)
    assert "ownerReferences" not in root["metadata"]
    for obj in rest:
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "batch/v1", "kind": "Job", "name": "demo-launcher",
                       "uid": "uid-1", "controller": False, "blockOwnerDeletion": True}
    for obj in objects:
        # The start gate has its own label: status and list never take it for the job's.
        label = names.LABEL_START_GATE if is_gate(obj) else names.LABEL_JOB
        assert obj["metadata"]["labels"][label] == "demo"


def test_without_root_uid_no_owner_reference_is_invented():
    assert all("ownerReferences" not in o["metadata"] for o in render_case("pods-benchmark-4x1"))


def test_launcher_requests_no_gpu_and_workers_hold_theirs():
    objects = render_case("pods-shell-volcano-hostnet")
    job = objects[0]
    launcher = job["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(launcher["resources"])
    workers = [o for o in objects if o["kind"] == "Pod"]
    assert len(workers) == 2
    for w in workers:
        res = w["spec"]["containers"][0]["resources"]
        assert res["limits"]["nvidia.com/gpu"] == "4" == res["requests"]["nvidia.com/gpu"]
        assert w["spec"]["restartPolicy"] == "Never"
        assert w["spec"]["schedulerName"] == "volcano"
        assert w["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "train"
        assert w["spec"]["hostNetwork"] and w["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "schedulerName" not in job["spec"]["template"]["spec"]
    (pg,) = [o for o in objects if o["kind"] == "PodGroup"]
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "research"


def test_hostfile_lists_each_worker_with_its_slots():
    objects = render_case("pods-shell-volcano-hostnet")
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert cm["data"]["hostfile"].splitlines() == [
        "train-worker-0.train-worker.team-a.svc slots=4",
        "train-worker-1.train-worker.team-a.svc slots=4",
    ]
    hydra = [o for o in render_case("pods-cpu-argv-plugins") if o["kind"] == "ConfigMap"][0]
    assert hydra["data"]["hostfile"].splitlines()[0] == "cpu-worker-0.cpu-worker.default.svc:1"


def test_written_mpirun_line():
    job = render_case("pods-shell-volcano-hostnet")[0]
    cmd = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[:2] == ["/bin/sh", "/etc/hvdk8s/launcher.sh"]
    mpirun = cmd[2:]
    assert mpirun[:3] == ["mpirun", "-np", "8"]
    for flag in (["--bind-to", "none"], ["--map-by", "slot"], ["-x", "NCCL_DEBUG"],
                 ["-x", "LD_LIBRARY_PATH"], ["-x", "PATH"], ["-x", "LR"], ["-mca", "pml", "ob1"],
                 ["-mca", "btl", "^openib"], ["-mca", "btl_tcp_if_include", "ib0"]):
        assert any(mpirun[i:i + len(flag)] == flag for i in range(len(mpirun))), flag
    # The user's shell string runs as one argument of sh -c: never re-split or joined.
    assert mpirun[-3:] == ["/bin/sh", "-c", "python train.py --lr $LR"]


def test_user_mpirun_line_passes_through_untouched():
    mpijob, config = render_case("operator-mpirun-kueue")
    assert list(config["data"]) == ["hvdk8s_monitor.py"]  # the launcher runs it from there
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    # After the wait for the workers' sshd (command.wait_then_launch), untouched.
    assert launcher["command"][-3:] == ["/bin/sh", "-c",
                                        "mpirun -np 4 --allow-run-as-root python /examples/train.py"]
    assert mpijob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-q"


def test_argv_with_spaces_stays_one_word():
    job = render_case("pods-cpu-argv-plugins")[0]
    cmd = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[-4:] == ["python", "train.py", "--data", "/data dir"]
    assert cmd[2:5] == ["mpirun", "-n", "2"]  # Hydra's spelling; CPU: one rank per worker
    assert "'/data dir'" in shell_join(cmd)


def test_operator_defaults_avoid_the_traps():
    mpijob, cm = render_case("operator-benchmark-intel")
    spec = mpijob["spec"]
    assert spec["runPolicy"]["cleanPodPolicy"] == "Running"
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["slotsPerWorker"] == 1 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(launcher.get("resources"))
    assert "--use_fp16" in launcher["command"] and "vgg16" in launcher["command"]
    assert cm["kind"] == "ConfigMap" and cm["data"]["hvd_cnn_bench.py"] == STUB_BENCHMARK


def test_operator_gang_counts_only_the_workers_whatever_gang_the_job_asks():
    """An operator run with --gang-scheduling makes a PodGroup for every MPIJob; unset, its
    minMember counts the launcher, which WaitForWorkersReady creates only once the workers
    run: a gang that never completes. Fails on the renderer that set it only under --gang."""
    from kubesim.mpi_operator import operator_objects

    mpijob, _ = render_case("operator-benchmark-intel")  # no --gang
    assert "gang" not in str(mpijob["metadata"].get("labels"))
    workers = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]
    group = operator_objects(mpijob, gang_scheduling="volcano").pod_group
    assert group["spec"]["minMember"] == workers["replicas"] == 3
    requests = workers["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert group["spec"]["minResources"]["nvidia.com/gpu"] == str(
        3 * int(requests["nvidia.com/gpu"]))


def test_benchmark_source_is_required_only_for_the_benchmark():
    spec = build_spec(name="x", command=("python", "t.py"))
    assert render(spec, mode="pods", ssh=FIXED_KEYS)  # no benchmark needed
    with pytest.raises(ValueError):
        render(build_spec(name="x"), mode="pods", ssh=FIXED_KEYS)


def test_with_owner_leaves_the_input_untouched():
    objects = render_case("pods-benchmark-4x1")
    owned = with_owner(objects, "u")
    assert "ownerReferences" not in objects[1]["metadata"]
    assert owned[1]["metadata"]["ownerReferences"][0]["uid"] == "u"


def test_launcher_waits_without_limit_only_under_a_gang_scheduler():
    def wait_seconds(case):
        job = render_case(case)[0]
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        return {e["name"]: e["value"] for e in env}["HVDK8S_WORKER_WAIT_SECONDS"]

    assert wait_seconds("pods-benchmark-4x1") == "600"
    assert wait_seconds("pods-shell-volcano-hostnet") == "0"
