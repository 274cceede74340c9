"""Built-in mode with MPICH's Hydra (`--mpi mpich`), rehearsed: real sshd, dnsmasq as CoreDNS
and Debian's mpiexec.hydra as the image's mpirun.

Horovod here is built against OpenMPI, so the ranks run `hostname`, not the benchmark: what
this proves is Hydra's own wiring (ssh to each worker, then every hydra_pmi_proxy calling
back to the launcher by the launcher's hostname), which is what a cluster breaks."""

import pytest

from tests.rehearsal.cluster import PodsJob
from tests.rehearsal.jobs import render_job
from tests.rehearsal.kubelet import IMAGE_ENV

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow]


@pytest.fixture
def mpich_image(cluster):
    """The "image" with MPICH: its mpirun is Hydra's (OpenMPI stays this machine's default).
    In the cluster's work directory, since pods get a /tmp of their own."""
    bin_dir = cluster.workdir / "mpich-bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").symlink_to("/usr/bin/mpiexec.hydra")
    # Hydra starts the proxy from its own directory on every host, as in an MPICH image.
    (bin_dir / "hydra_pmi_proxy").symlink_to("/usr/bin/hydra_pmi_proxy")
    return {"PATH": f"{bin_dir}:{IMAGE_ENV['PATH']}"}


def test_hydra_proxies_call_the_launcher_back_by_its_hostname(cluster, mpich_image):
    """Fails without the launcher's hostname/subdomain and a Service that selects it: each
    worker's hydra_pmi_proxy is told to connect to the launcher pod's own hostname (the Job
    controller's `demo-launcher-xxxxx`), which no DNS answers (issue 10, defect 2)."""
    job = PodsJob(cluster, render_job(workers=2, mpi_implementation="MPICH",
                                      command=("hostname",)),
                  launcher_env=mpich_image)
    out = job.finish(timeout=60)  # seconds when it works; Hydra waits forever when not
    assert out.launcher_exit == 0, out.launcher_log
    lines = out.launcher_log.splitlines()
    assert "demo-worker-0" in lines and "demo-worker-1" in lines, out.launcher_log
    assert out.phase == "Succeeded" and out.still_running == []
