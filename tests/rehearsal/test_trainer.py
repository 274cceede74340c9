"""Trainer mode, rehearsed: the TrainJob hvdk8s renders on hvdk8s's ClusterTrainingRuntime,
as the JobSet's pods, Service, hostfile ConfigMap and SSH Secret Kubeflow Trainer makes of
it (kubesim/trainer.py, jobset.py), run with real sshd, dnsmasq as CoreDNS,
mpirun and Horovod."""

import pytest

from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render_trainjob import horovod_runtime
from tests.rehearsal.cluster import TrainerJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]


def test_trainjob_launcher_reaches_every_node_by_its_jobset_hostname(cluster):
    """Ranks run `hostname` (no Horovod): the launcher's wait and mpirun reach each node's
    sshd as `<job>-node-0-<i>.<job>`, the hostfile Trainer writes, with Trainer's key."""
    objects = render_job(mode="trainjob", workers=2, command=("hostname",))
    runtime = horovod_runtime(build_spec(name="demo", image="rehearsal"))
    out = TrainerJob(cluster, objects, runtime).finish(timeout=120)
    assert out.launcher_exit == 0, out.launcher_log
    assert {"demo-node-0-0", "demo-node-0-1"} <= set(out.launcher_log.splitlines())
    assert out.still_running == []


@pytest.mark.horovod
def test_submit_in_auto_mode_makes_a_trainjob_whose_pods_run_the_benchmark(cluster, k8s):
    """`hvdk8s submit mpi ... --gang` against a cluster with Kubeflow Trainer and no MPI
    Operator (the test API server's models): --mode auto makes a TrainJob; its JobSet's pods,
    as Trainer makes them of exactly what submit sends (a server dry run shows it), run the
    benchmark here with real sshd and mpirun: the launcher reaches each node's sshd by its
    JobSet hostname with the key Trainer's MPI plugin mounts (private key mode 0640), and
    nothing is left running. The job submitted for real, its launcher printing what the
    rehearsed one printed, ends `wait` with 0. On CPU: --gpus 0."""
    from tests.k8s_env import hvdk8s

    srv = k8s.server()
    srv.install_trainer()
    spec = build_spec(name="demo", image="rehearsal")
    srv.create(horovod_runtime(spec))
    args = ("submit", "mpi", "--name", "demo", "--workers", "2", "--gpus", "0", "--gang",
            "--image", "rehearsal", "--batch-size", "2", "--num-batches", "2",
            "--num-warmup-batches", "1", "--image-size", "32")
    shown = hvdk8s(k8s, *args, "--dry-run=server")
    assert shown.exit_code == 0, shown.output
    import yaml

    objects = [o for o in yaml.safe_load_all(shown.stdout) if o]
    assert [o["kind"] for o in objects] == ["TrainJob", "ConfigMap"]
    out = TrainerJob(cluster, objects, runtime=horovod_runtime(spec)).finish(timeout=420)
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())
    assert "total images/sec" in out.launcher_log
    assert out.still_running == []
    srv.script_pod(r"demo-node-0-\d+-\w{5}", exit_code=None)
    srv.script_pod(r"demo-launcher-0-0-\w{5}", logs=out.launcher_log.splitlines(),
                   exit_code=out.launcher_exit)
    submitted = hvdk8s(k8s, *args)
    assert submitted.exit_code == 0, submitted.output
    waited = hvdk8s(k8s, "wait", "demo", "--timeout", "120")
    assert waited.exit_code == 0, waited.output
    assert "Succeeded" in waited.output
