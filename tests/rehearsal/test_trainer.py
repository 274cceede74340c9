"""Trainer mode, rehearsed: the TrainJob hvdk8s renders on hvdk8s's ClusterTrainingRuntime,
as the JobSet's pods, Service, hostfile ConfigMap and SSH Secret Kubeflow Trainer makes of
it (launcher/testing/kubeapi/trainer.py, jobset.py), run with real sshd, dnsmasq as CoreDNS,
mpirun and Horovod."""

import pytest

from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render_trainjob import horovod_runtime
from tests.rehearsal.cluster import TrainerJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]


@pytest.mark.horovod
def test_trainjob_nodes_accept_trainers_key_and_run_the_benchmark(cluster):
    """The launcher reaches each node's sshd by its JobSet hostname with the key Trainer's
    MPI plugin mounts (private key mode 0640), and mpirun runs the benchmark on both."""
    objects = render_job(mode="trainjob", workers=2)
    runtime = horovod_runtime(build_spec(name="demo", image="rehearsal"))
    job = TrainerJob(cluster, objects, runtime)
    out = job.finish(timeout=420)  # minutes only on a loaded machine
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())
    assert "total images/sec" in out.launcher_log
    assert out.still_running == []


def test_trainjob_launcher_reaches_every_node_by_its_jobset_hostname(cluster):
    """Ranks run `hostname` (no Horovod): the launcher's wait and mpirun reach each node's
    sshd as `<job>-node-0-<i>.<job>`, the hostfile Trainer writes, with Trainer's key."""
    objects = render_job(mode="trainjob", workers=2, command=("hostname",))
    runtime = horovod_runtime(build_spec(name="demo", image="rehearsal"))
    out = TrainerJob(cluster, objects, runtime).finish(timeout=120)
    assert out.launcher_exit == 0, out.launcher_log
    assert {"demo-node-0-0", "demo-node-0-1"} <= set(out.launcher_log.splitlines())
    assert out.still_running == []
