"""Built-in mode with MPICH's Hydra (`--mpi mpich`), rehearsed: real sshd, dnsmasq as CoreDNS,
Debian's mpiexec.hydra as the image's mpirun, and Horovod built against MPICH.

The "MPICH image" (the `mpich_image` fixture, tests/rehearsal/conftest.py) puts Hydra's
mpirun and a Horovod linked with libmpich first on every pod's PATH; Hydra forwards the
launcher's PATH to the ranks (`-envlist PATH,...`), so each rank's `python` is that image's.
"""

import json

import pytest

from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import render_job

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]

def test_hydra_proxies_call_the_launcher_back_by_its_hostname(cluster, mpich_image):
    """Fails without the launcher's hostname/subdomain and a Service that selects it: each
    worker's hydra_pmi_proxy is told to connect to the launcher pod's own hostname (the Job
    controller's `demo-launcher-xxxxx`), which no DNS answers (issue 10, defect 2)."""
    job = PodsJob(cluster, render_job(workers=2, mpi_implementation="MPICH",
                                      command=("hostname",)),
                  extra_env=mpich_image)
    out = job.finish(timeout=60)  # seconds when it works; Hydra waits forever when not
    assert out.launcher_exit == 0, out.launcher_log
    lines = out.launcher_log.splitlines()
    assert "demo-worker-0" in lines and "demo-worker-1" in lines, out.launcher_log
    assert out.phase == "Succeeded" and out.still_running == []


@pytest.mark.horovod
def test_mpich_ranks_in_two_pods_run_the_benchmark(cluster, mpich_image):
    """The built-in benchmark under Hydra: two Horovod ranks, one per worker pod, joined by
    MPICH (a Horovod built against OpenMPI would start as two singletons of size 1, each
    printing its own total). Fails without the launcher's hostname and Service, as above."""
    job = PodsJob(cluster, render_job(workers=2, mpi_implementation="MPICH"),
                  extra_env=mpich_image)
    out = job.finish(timeout=420)  # minutes only on a loaded machine
    assert out.launcher_exit == 0, out.launcher_log
    lines = out.launcher_log.splitlines()
    assert sum("total images/sec" in line for line in lines) == 1, out.launcher_log
    result = json.loads(next(line for line in lines if line.startswith("HVDK8S_RESULT "))
                        .split(" ", 1)[1])
    assert result["world_size"] == 2 and len(result["per_rank_images_per_sec"]) == 2, result
    assert result["hostname"] == "demo-worker-0", result  # rank 0, in its own pod
    assert out.phase == "Succeeded" and out.still_running == []
    assert all(code == 0 for code in out.worker_exits.values()), out.worker_logs
