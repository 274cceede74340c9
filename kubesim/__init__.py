"""In-process fake Kubernetes API server for end-to-end tests with the real client.

    from kubesim import KubeAPIServer, Run

    with KubeAPIServer() as srv:                      # 127.0.0.1, ephemeral port
        srv.add_node("gpu-node-0", gpus=8, labels={...}, taints=["k=v:NoSchedule"])
        path = srv.write_kubeconfig(tmp_path / "kc")  # context "test", namespace "default"
        srv.script_pod(r"train-\\w{5}", logs=["start", (0.5, "done")], exit_code=0)
        srv.install_crd("mpijob"); srv.install_group("volcano")
        srv.forbid("create", "pods", namespace="default")
        srv.fail_next(2, status=503, method="GET", path_regex=r"/pods$")

Modules: store (objects, resourceVersion, watch history), lifecycle (create/update/delete,
GC), admission (defaults/validation, webhooks), admission_policy + cel (ValidatingAdmissionPolicy),
rest + httpapp (HTTP, SelfSubjectAccessReview),
watch, logs, scheduler (with Volcano/coscheduling gangs), kubelet, jobs, auth, faults,
discovery; models of cluster components from their sources: mpi_operator
(srv.install_mpi_operator), kueue (srv.install_kueue, srv.kueue_queue), volcano (enqueue,
pod webhook).  Pytest fixtures live in tests/kubeapi_fixtures.py.
"""

from .kubelet import PodScript, Run
from .server import KubeAPIServer

__all__ = ["KubeAPIServer", "PodScript", "Run"]
