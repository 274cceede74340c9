"""Operator mode against the MPI Operator model (kubesim/mpi_operator.py), end to end
through the CLI: what the MPIJob asks of the operator's launcher Job and PodGroup."""

from __future__ import annotations

from kubesim import mpi_operator
from kubesim.kubelet import Run
from launcher.backends.kubernetes.client import MPIJOB
from launcher.backends.kubernetes.gang import control as gang_control
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from tests.k8s_env import hvdk8s


def test_failed_launcher_is_not_retried_while_workers_hold_gpus(k8s):
    """Issue 10 #6: unset, runPolicy.backoffLimit leaves the launcher Job at its default of 6
    retries, each while the workers keep their GPUs."""
    srv = k8s.server()
    srv.install_mpi_operator()
    srv.script_pod(r"bo-worker-\d+", exit_code=None)
    launcher_script = srv.script_pod(r"bo-launcher-\w{5}",
                                     runs=[Run([f"attempt {i}"], exit_code=1) for i in range(1, 8)])
    result = hvdk8s(k8s, "submit", "mpi", "--name", "bo", "--workers", "2", "--gpus", "1",
                    "--image", "img:1", "--mode", "operator", "python", "train.py")
    assert result.exit_code == 0, result.output
    assert srv.get("mpijobs.kubeflow.org", "bo")["spec"]["runPolicy"]["backoffLimit"] == 0
    waited = hvdk8s(k8s, "wait", "bo", "--timeout", "60")
    assert waited.exit_code not in (0, 124), waited.output
    launcher = srv.get("jobs", "bo-launcher")
    assert launcher["spec"]["backoffLimit"] == 0
    assert any(c["type"] == "Failed" for c in launcher["status"]["conditions"])
    # The launcher's restartPolicy is Never (render_operator): one start; the default limit
    # ran it up to 7 times.
    assert launcher_script.starts == 1, "mpirun was retried while the workers held GPUs"


def test_backoff_limit_given_by_the_user_is_kept():
    spec = build_spec(name="b", workers=2, gpus_per_worker=1, command=("python", "t.py"),
                      run_policy={"backoff_limit": 3})
    mpijob, _config = render(spec, mode="operator")
    assert mpijob["spec"]["runPolicy"]["backoffLimit"] == 3


def _operator_pod_group(gang: str, workers: int, gpus: int, cpu: str | None = None):
    spec = build_spec(name="g", workers=workers, gpus_per_worker=gpus, gang=gang,
                      command=("python", "t.py"), cpu=cpu)
    mpijob, _config = render(spec, mode="operator")
    # What the operator makes of it (podgroup.go newPodGroup), as its model computes it.
    return mpijob, mpi_operator.new_pod_group(mpi_operator.defaulted(mpijob), gang)


def test_operator_gang_counts_only_the_workers_that_can_exist_before_the_launcher():
    """Issue 10 #4: with WaitForWorkersReady the launcher exists only after every worker is
    Ready, so a PodGroup of workers + 1 is never complete."""
    for gang in ("volcano", "scheduler-plugins"):
        mpijob, group = _operator_pod_group(gang, workers=3, gpus=2, cpu="4")
        assert mpijob["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
        assert group["spec"]["minMember"] == 3, gang
        # Every worker's GPUs, not the launcher's CPU in place of one worker.
        assert group["spec"]["minResources"] == {"nvidia.com/gpu": "6", "cpu": "12"}, gang


def test_no_hvdk8s_object_takes_a_name_the_operator_creates():
    """Issue 10 #3: the operator refuses a job whose `<job>-config` (or any name it makes)
    another object holds. Its names: pkg/controller/mpi_job_controller.go (configSuffix,
    sshAuthSecretSuffix, launcherSuffix, workerName, newJobService) and podgroup.go."""
    spec = build_spec(name="j", workers=3, gpus_per_worker=1, gang="volcano")  # benchmark
    objects = render(spec, mode="operator", benchmark_source="print(1)\n")
    operator_names = {("ConfigMap", "j-config"), ("Secret", "j-ssh"), ("Job", "j-launcher"),
                      ("Service", "j"), ("Service", "j-worker"), ("PodGroup", "j"),
                      *(("Pod", f"j-worker-{i}") for i in range(3))}
    ours = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] != "MPIJob"}
    assert ("ConfigMap", "j-benchmark") in ours
    assert not ours & operator_names


class _EndedJobCluster:
    """MPIJob `e` has already ended (`ended` its condition): the operator deleted its
    PodGroup and its running workers, as it does for a finished job."""

    def __init__(self, ended: str):
        self.ended = ended

    def get(self, kind, name, namespace):
        if kind == MPIJOB and name == "e":
            return {"metadata": {"name": "e"},
                    "status": {"conditions": [{"type": self.ended, "status": "True"}]}}
        return None

    def items(self, kind, namespace, label_selector=None):
        return []


def test_submit_says_a_job_that_ended_before_its_pod_group_was_seen_ended():
    """A short job can end, and its PodGroup go with it, before submit looks: submit then
    reports the end the MPIJob records, at once, not 'is the operator running?'."""
    spec = build_spec(name="e", workers=2, gpus_per_worker=1, gang="volcano",
                      command=("python", "t.py"))
    control = gang_control("volcano")
    assert control is not None
    for ended in ("Succeeded", "Failed"):
        said = control.operator_created(_EndedJobCluster(ended), {}, spec, timeout=0.5,
                                        poll=0.01)
        assert said == f"MPIJob e created; the MPI operator ran it and it has already " \
                       f"{ended.lower()}"
