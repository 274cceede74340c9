"""Built-in mode with OpenMPI, rehearsed: real sshd, dnsmasq as CoreDNS, mpirun, Horovod."""

import pytest

from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.horovod]


def test_two_workers_one_slot_each_run_the_benchmark(cluster):
    """Fails without OMPI_MCA_orte_keep_fqdn_hostnames: OpenMPI cuts the hostfile's
    `demo-worker-0.demo-worker.default.svc` to `demo-worker-0` and calls `ssh demo-worker-0`,
    which cluster DNS does not answer (issue 10, defect 1)."""
    job = PodsJob(cluster, render_job(workers=2))
    out = job.finish(timeout=150)
    assert out.launcher_exit == 0, out.launcher_log
    assert "total images/sec" in out.launcher_log
    assert out.phase == "Succeeded" and out.reason is None
    assert out.still_running == []
    assert all(code == 0 for code in out.worker_exits.values()), out.worker_logs
