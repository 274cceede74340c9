"""Operator mode, rehearsed: the MPIJob hvdk8s renders, as the pods, Service, ConfigMap and
SSH Secret the MPI Operator v2 makes of it (launcher/testing/kubeapi/mpi_operator.py), run with real
sshd, dnsmasq as CoreDNS, mpirun and Horovod."""

import pytest

from tests.rehearsal.cluster import OperatorJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.horovod]


def test_operator_workers_accept_the_secret_mounted_key_and_run_the_benchmark(cluster):
    """The operator mounts the SSH Secret at /root/.ssh: a tmpfs whose directory is
    drwxrwxrwt, which sshd's StrictModes (on by default) refuses ("bad ownership or modes
    for directory /root/.ssh"), so every ssh from the launcher fails. Fails without the
    worker's sshd accepting the mounted key (issue 10, defect 5)."""
    job = OperatorJob(cluster, render_job(mode="operator", workers=2))
    out = job.finish(timeout=420)  # minutes only on a loaded machine
    assert out.launcher_exit == 0, out.launcher_log + "\n".join(out.worker_logs.values())
    assert "total images/sec" in out.launcher_log
    assert out.still_running == []
