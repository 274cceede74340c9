"""The test API server's Kubeflow Trainer and JobSet models (kubesim/
trainer.py, jobset.py) against what their sources do: the webhook, the objects a TrainJob
gets, suspend, conditions, and JobSet's success, failure and restart policies."""

from __future__ import annotations

import pytest

from kubesim.errors import ApiError
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import render_trainjob as tj

TRAINJOBS, JOBSETS = "trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io"


def _setup(srv, name: str = "m", workers: int = 2, **kw):
    srv.install_trainer()
    spec = build_spec(name=name, workers=workers, gpus_per_worker=1, image="img:1",
                      command=("python", "t.py"), **kw)
    srv.create(tj.horovod_runtime(spec))
    return render(spec, mode="trainjob")


def _cond(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype and c["status"] == "True"), None)


def test_the_webhook_refuses_a_trainjob_whose_runtime_is_missing(kube_server):
    trainjob, _ = _setup(kube_server)
    trainjob["spec"]["runtimeRef"]["name"] = "gone"
    with pytest.raises(ApiError) as err:
        kube_server.create(trainjob)
    assert err.value.code == 422
    assert "must be created before the TrainJob is created" in err.value.message


def test_the_webhook_refuses_reserved_mpi_env_and_env_patched_into_node(kube_server):
    trainjob, _ = _setup(kube_server)
    trainjob["spec"]["trainer"]["env"].append(
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/x"})
    node = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["env"] = [{"name": "A", "value": "1"}]
    with pytest.raises(ApiError) as err:
        kube_server.create(trainjob)
    assert "must not have reserved envs" in err.value.message
    assert "must not have envs for the" in err.value.message


def test_a_trainjob_gets_its_secret_hostfile_and_jobset_and_completes(kube_server):
    trainjob, config = _setup(kube_server)
    kube_server.script_pod(r"m-node-0-\d+-\w{5}", exit_code=None)
    kube_server.script_pod(r"m-launcher-0-0-\w{5}", logs=["ok"], exit_code=0)
    kube_server.create(config)
    kube_server.create(trainjob)
    kube_server.wait_for(lambda: _cond(kube_server.get(TRAINJOBS, "m"), "Complete"))
    secret = kube_server.get("secrets", "m-mpi-ssh-auth")
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert kube_server.get("configmaps", "m-mpi-hostfile")["data"]["hostfile"] == (
        "m-node-0-0.m slots=1\nm-node-0-1.m slots=1\n")
    js = kube_server.get(JOBSETS, "m")
    assert js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert _cond(js, "Completed")["reason"] == "AllJobsCompleted"
    # The JobSet finished: its node Jobs (sshd) are deleted, so no pod keeps its GPU.
    kube_server.wait_for(lambda: not [p for p in kube_server.objects("pods", "default")
                                      if "node" in p["metadata"]["name"]
                                      and not p["metadata"].get("deletionTimestamp")])


def test_suspend_keeps_the_jobset_suspended_and_resume_starts_it(kube_server):
    trainjob, config = _setup(kube_server, name="s")
    kube_server.script_pod(r"s-node-0-\d+-\w{5}", exit_code=None)
    trainjob["spec"]["suspend"] = True
    kube_server.create(config)
    kube_server.create(trainjob)
    kube_server.wait_for(lambda: _cond(kube_server.get(TRAINJOBS, "s"), "Suspended"))
    kube_server.wait_for(lambda: (kube_server.get(JOBSETS, "s") or {}).get("spec", {}).get(
        "suspend") is True)
    assert not [p for p in kube_server.objects("pods", "default")
                if p["metadata"]["name"].startswith("s-")]
    kube_server.store.mutate("trainer.kubeflow.org/trainjobs", "default", "s",
                             lambda o: o["spec"].__setitem__("suspend", False))
    kube_server.wait_for(lambda: [p for p in kube_server.objects("pods", "default")
                                  if p["metadata"]["name"].startswith("s-node-0-")])
    resumed = next(c for c in kube_server.get(TRAINJOBS, "s")["status"]["conditions"]
                   if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed")


def test_a_failed_node_fails_the_trainjob_after_the_jobsets_restarts(kube_server):
    trainjob, config = _setup(kube_server, name="f")
    runtime = kube_server.get("clustertrainingruntimes.trainer.kubeflow.org",
                              trainjob["spec"]["runtimeRef"]["name"], "")

    def with_restart(r):
        r["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    kube_server.store.mutate("trainer.kubeflow.org/clustertrainingruntimes", "",
                             runtime["metadata"]["name"], with_restart)
    starts = kube_server.script_pod(r"f-node-0-\d+-\w{5}", exit_code=3)
    kube_server.create(config)
    kube_server.create(trainjob)
    kube_server.wait_for(lambda: _cond(kube_server.get(TRAINJOBS, "f"), "Failed"), timeout=30)
    failed = _cond(kube_server.get(TRAINJOBS, "f"), "Failed")
    assert failed["reason"] == "ReachedMaxRestarts"
    assert kube_server.get(JOBSETS, "f")["status"]["restarts"] == 1
    assert starts.starts >= 2  # the node pods ran again after the restart
