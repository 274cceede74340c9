"""The CPU training image, built by images/build.sh, checked and rehearsed from the inside.

The checks run the image's own programs (`buildah run --isolation chroot`). The rehearsals
run every pod in the image's root filesystem (tests/rehearsal/image.py, podinit.py): its
sshd, sshd_config and ssh_config.d, users, Python, OpenMPI and Horovod, under the kubelet's
mounts, as root and as uid 1000. Skipped, with the reason, where the image cannot be built
(no root, no namespaces, no buildah); a failed build fails.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.rehearsal.cluster import OperatorJob, PodsJob
from tests.rehearsal.image import Image
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]

MPIUSER_UID = 1000
# What a restricted Pod Security namespace asks of a pod (pod-security-admission
# policy/check_runAsNonRoot.go, check_allowPrivilegeEscalation.go, check_capabilities_restricted.go).
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def run_in(image: Image, *argv: str, user: str | None = None) -> subprocess.CompletedProcess:
    ctr = subprocess.run(["buildah", "from", "--pull=false", "--quiet", image.ref],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        return subprocess.run(["buildah", "run", "--isolation", "chroot",
                               *(["--user", user] if user else []), ctr, "--", *argv],
                              capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)


# --- the image itself ----------------------------------------------------------------------
# Python, TensorFlow, Horovod, what tf.keras is, Open MPI, of each flavour (images/build.sh).
# tf.keras is Keras 2 in both: TensorFlow 2.15's own, tf-keras under 2.20 (its own would be
# Keras 3, keras._tf_keras.keras, which Horovod 0.28.1 cannot drive).
VERSIONS = {"cpu": (["(3,", "11)", "2.15.1", "0.28.1", "keras.api._v2.keras"], "(Open MPI) 4.1."),
            "cpu-trixie": (["(3,", "13)", "2.20.0", "0.28.1", "tf_keras.api._v2.keras"],
                           "(Open MPI) 5.0.")}


def test_image_reports_the_versions_it_was_built_with(train_image, flavour):
    versions = run_in(train_image, "python", "-c",
                      "import sys, tensorflow, horovod; print(sys.version_info[:2], "
                      "tensorflow.__version__, horovod.__version__, "
                      "tensorflow.keras.__name__)")
    assert versions.returncode == 0, versions.stderr
    python_tf_horovod_keras, openmpi = VERSIONS[flavour]
    assert versions.stdout.split() == python_tf_horovod_keras, versions.stdout
    mpirun = run_in(train_image, "mpirun", "--version")
    assert mpirun.returncode == 0 and openmpi in mpirun.stdout, mpirun.stdout
    build = run_in(train_image, "horovodrun", "--check-build")
    assert build.returncode == 0, build.stderr
    for framework in ("TensorFlow", "MPI", "Gloo"):
        assert f"[X] {framework}" in build.stdout, build.stdout
    assert "[X] NCCL" not in build.stdout  # the CPU flavour: no GPU operations


def test_sshd_accepts_the_image_config_as_root_and_as_mpiuser(train_image,
                                                             train_image_nonroot):
    root = run_in(train_image, "/usr/sbin/sshd", "-t")
    assert root.returncode == 0, root.stderr
    # The root image's host keys are root's: its sshd cannot serve as anyone else.
    assert run_in(train_image, "/usr/sbin/sshd", "-t", user="mpiuser").returncode != 0
    nonroot = run_in(train_image_nonroot, "/usr/sbin/sshd", "-t", user="mpiuser")
    assert nonroot.returncode == 0, nonroot.stderr
    assert train_image_nonroot.user == "mpiuser"
    ident = run_in(train_image_nonroot, "id", "-u", user="mpiuser")
    assert ident.stdout.strip() == str(MPIUSER_UID)


# --- pods made from it -----------------------------------------------------------------------
def _rendered_as(uid: int | None, **fields) -> list[dict]:
    """The job as `--run-as-user UID` renders it, taken as it is (issue 20): the rehearsal
    runs what hvdk8s sends, so a setting the renderer misses shows here."""
    objects = render_job(**fields, **({"run_as_user": uid} if uid is not None else {}))
    if uid is not None:
        for o in objects:
            for spec in _pod_specs(o):
                assert spec["securityContext"]["runAsUser"] == uid
                assert all(c["securityContext"] == RESTRICTED_CONTAINER
                           for c in spec["containers"])
    return objects


def _pod_specs(obj: dict) -> list[dict]:
    if obj["kind"] == "Pod":
        return [obj["spec"]]
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]["spec"]]
    if obj["kind"] == "MPIJob":
        return [r["template"]["spec"] for r in obj["spec"]["mpiReplicaSpecs"].values()]
    return []


def test_a_pod_runs_in_the_image_as_its_user_with_the_kubelets_mounts(cluster, train_image):
    probe = ("id -u; cat /etc/debian_version; test -x /usr/local/bin/hvdk8s-sshd && echo sshd-ok; "
             "grep CapEff /proc/self/status; grep -c demo-worker-0 /etc/hosts; "
             "df -k /dev/shm | tail -1 | awk '{print \"shm\", $2}'; grep ^search /etc/resolv.conf")
    cluster.image = train_image
    objects = _rendered_as(MPIUSER_UID, workers=1, command=("sh", "-c", probe), shell=False)
    out = PodsJob(cluster, objects).finish(timeout=90)
    assert out.launcher_exit == 0, out.launcher_log
    lines = out.launcher_log.splitlines()
    assert str(MPIUSER_UID) in lines and "sshd-ok" in lines, out.launcher_log
    assert "CapEff:\t0000000000000000" in lines  # capabilities drop ALL, uid 1000
    assert "shm 4194304" in lines  # the dshm volume's sizeLimit, 4Gi
    assert any(x.startswith("search default.svc.cluster.local") for x in lines)


def _benchmark_result(log: str) -> dict:
    lines = log.splitlines()
    assert sum("total images/sec" in line for line in lines) == 1, log
    return json.loads(next(line for line in lines if "HVDK8S_RESULT " in line)
                      .split("HVDK8S_RESULT ", 1)[1])


@pytest.mark.parametrize("uid", [None, MPIUSER_UID], ids=["root", "uid1000"])
def test_builtin_mode_runs_the_benchmark_in_the_image(cluster, train_image, uid):
    cluster.image = train_image
    objects = _rendered_as(uid, workers=2)
    out = PodsJob(cluster, objects).finish(timeout=600)
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())
    result = _benchmark_result(out.launcher_log)
    assert result["world_size"] == 2 and result["hostname"] == "demo-worker-0", result
    assert out.phase == "Succeeded" and out.still_running == []


@pytest.mark.parametrize("uid", [None, MPIUSER_UID], ids=["root", "uid1000"])
def test_operator_mode_runs_the_benchmark_in_the_image(request, cluster, flavour, uid):
    """The worker runs `sshd -De` under the image's sshd_config (Port 2222), the launcher
    waits on ssh, then mpirun. Fails on the old wait script, which probed port 22
    (issue 20, defect 1): the launcher gives up after its wait limit (here 60 s)."""
    # uid 1000 needs the non-root image: sshd reads its host keys as that user.
    image = request.getfixturevalue("train_image" if uid is None else "train_image_nonroot")
    cluster.image = image
    # With --run-as-user the MPIJob's sshAuthMountPath is the user's ~/.ssh, where the
    # operator mounts its SSH Secret (the default /root/.ssh serves root only).
    objects = _rendered_as(uid, mode="operator", workers=2)
    job = OperatorJob(cluster, objects, launcher_env={"HVDK8S_WORKER_WAIT_SECONDS": "60"})
    out = job.finish(timeout=600)
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())
    result = _benchmark_result(out.launcher_log)
    assert result["world_size"] == 2, result
    assert out.still_running == []


def test_a_failing_rank_fails_the_job_with_each_ranks_output_and_mpiruns_notice(cluster,
                                                                              train_image):
    """Each rank's output reaches the launcher's log, and a rank's exit code is the job's,
    with mpirun's notice naming the rank: the same under Open MPI 4.1 (mpirun) and 5
    (prterun; it gives the notice when the failure ends the others, as here, and only the
    exit code when they had all ended by themselves: measured with 5.0.7)."""
    cluster.image = train_image
    # Rank 1 fails a moment after both have spoken: a rank still starting when mpirun
    # aborts the job never speaks (seen under load), which would prove nothing here.
    script = ('echo "out of rank $OMPI_COMM_WORLD_RANK"; '
              'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 3; exit 3; else sleep 60; fi')
    out = PodsJob(cluster, render_job(workers=2, command=("sh", "-c", script))).finish(timeout=120)
    assert out.launcher_exit == 3, out.launcher_log
    lines = out.launcher_log.splitlines()
    assert {"out of rank 0", "out of rank 1"} <= set(lines), out.launcher_log
    assert "detected that one or more processes exited with non-zero status" in out.launcher_log
    named = [line.split() for line in lines if line.split()[:2] == ["Process", "name:"]]
    assert len(named) == 1 and named[0][2].endswith(",1]"), out.launcher_log  # rank 1
    assert any(line.split() == ["Exit", "code:", "3"] for line in lines), out.launcher_log
    assert out.phase == "Failed" and out.still_running == []
