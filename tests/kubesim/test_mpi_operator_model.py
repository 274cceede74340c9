"""The MPI Operator model in kubesim/mpi_operator.py behaves as the real controller
(kubeflow/mpi-operator v0.8.2, pkg/controller/mpi_job_controller.go and podgroup.go)."""

from __future__ import annotations

import base64

import pytest

from kubesim import KubeAPIServer
from kubesim.mpi_operator import completed_pods, min_resources, operator_objects

NS = "default"


def mpijob(name="pi", workers=2, gpus=1, slots=1, **spec) -> dict:
    worker = {"name": "worker", "image": "img:1",
              "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "2"}}}
    run_policy = spec.pop("runPolicy", {"cleanPodPolicy": "Running"})
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": NS, "uid": "u-1"},
            "spec": {"slotsPerWorker": slots, "runPolicy": run_policy, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "launcher", "image": "img:1", "command": ["mpirun", "hostname"],
                     "resources": {"requests": {"cpu": "1"}}}]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [worker]}}}},
                **spec}}


def env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


# --- the pure part: what the controller builds --------------------------------------------------
def test_objects_carry_the_operators_names_and_content():
    objs = operator_objects(mpijob(slots=4), ssh_keys=("PRIV", "PUB\n"))
    assert objs.errors == []
    assert objs.service["metadata"]["name"] == "pi"
    assert objs.service["spec"]["clusterIP"] == "None"
    assert objs.service["spec"]["selector"] == {"training.kubeflow.org/operator-name":
                                                "mpi-operator",
                                                "training.kubeflow.org/job-name": "pi"}
    assert objs.config_map["metadata"]["name"] == "pi-config"
    assert objs.config_map["data"]["hostfile"] == (
        "pi-worker-0.pi.default.svc slots=4\npi-worker-1.pi.default.svc slots=4\n")
    assert objs.config_map["data"]["discover_hosts.sh"] == "#!/bin/sh\n"  # none Running yet
    assert objs.secret["metadata"]["name"] == "pi-ssh"
    assert objs.secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(objs.secret["data"]["ssh-privatekey"]) == b"PRIV"
    assert [w["metadata"]["name"] for w in objs.workers] == ["pi-worker-0", "pi-worker-1"]
    w1 = objs.workers[1]
    assert (w1["spec"]["hostname"], w1["spec"]["subdomain"]) == ("pi-worker-1", "pi")
    assert w1["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert w1["metadata"]["ownerReferences"][0]["controller"] is True
    c = w1["spec"]["containers"][0]
    assert c["command"] == ["/usr/sbin/sshd", "-De"]  # no command given: sshd
    assert env(c)["K_MPI_JOB_ROLE"] == "worker"
    ssh = next(v for v in w1["spec"]["volumes"] if v["name"] == "ssh-auth")
    assert ssh["secret"]["secretName"] == "pi-ssh" and ssh["secret"]["defaultMode"] == 0o600
    assert [i["path"] for i in ssh["secret"]["items"]] == ["id_rsa", "id_rsa.pub",
                                                          "authorized_keys"]
    assert {"name": "ssh-auth", "mountPath": "/root/.ssh"} in c["volumeMounts"]
    assert w1["spec"]["restartPolicy"] == "Never"
    job = objs.launcher_job
    assert job["metadata"]["name"] == "pi-launcher"
    assert job["spec"]["podReplacementPolicy"] == "Failed" and "suspend" not in job["spec"]
    lc = job["spec"]["template"]["spec"]["containers"][0]
    assert env(lc)["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env(lc)["OMPI_MCA_orte_set_default_slots"] == "4"
    assert env(lc)["NVIDIA_VISIBLE_DEVICES"] is None  # blanked: no GPU for the launcher
    assert {"name": "mpi-job-config", "mountPath": "/etc/mpi"} in lc["volumeMounts"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert objs.pod_group is None  # no --gang-scheduling: no PodGroup


def test_completed_pods_are_launcher_then_workers():
    pods = completed_pods(mpijob(workers=3))
    assert pods[0]["metadata"]["generateName"] == "pi-launcher-"
    assert pods[0]["spec"]["hostname"] == "pi-launcher"
    assert [p["metadata"]["name"] for p in pods[1:]] == [f"pi-worker-{i}" for i in range(3)]
    key = base64.b64decode(operator_objects(mpijob())
                           .secret["data"]["ssh-privatekey"]).decode()
    assert key.startswith("-----BEGIN EC PRIVATE KEY-----")


def test_intel_hostfile_and_cluster_domain():
    objs = operator_objects(mpijob(mpiImplementation="Intel"), cluster_domain="cluster.local",
                            running_workers=["pi-worker-1"])
    assert objs.config_map["data"]["hostfile"].splitlines()[0] == \
        "pi-worker-0.pi.default.svc.cluster.local:1"
    assert objs.config_map["data"]["discover_hosts.sh"] == \
        "#!/bin/sh\necho pi-worker-1.pi.default.svc.cluster.local\n"


def test_gang_scheduling_decorates_pods_and_sizes_the_pod_group():
    volcano = operator_objects(mpijob(workers=4, gpus=2, runPolicy={
        "cleanPodPolicy": "Running", "schedulingPolicy": {"queue": "q1"}}),
        gang_scheduling="volcano")
    pg = volcano.pod_group
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert pg["metadata"]["name"] == "pi"
    assert pg["spec"]["minMember"] == 5 and pg["spec"]["queue"] == "q1"
    assert pg["spec"]["minResources"] == {"nvidia.com/gpu": "8", "cpu": "9"}
    for pod in [*volcano.workers]:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pi"
    assert volcano.launcher_job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    plugins = operator_objects(mpijob(), gang_scheduling="scheduler-plugins-scheduler")
    assert plugins.pod_group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert plugins.pod_group["spec"]["scheduleTimeoutSeconds"] == 0
    assert plugins.workers[0]["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert plugins.workers[0]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "pi"


def test_min_resources_counts_only_the_workers_min_available_admits():
    job = mpijob(workers=4, gpus=2, runPolicy={"cleanPodPolicy": "Running",
                                               "schedulingPolicy": {"minAvailable": 3}})
    job["spec"]["launcherCreationPolicy"] = "AtStartup"
    from kubesim.mpi_operator import defaulted
    # minAvailable 3 = launcher + 2 workers.
    assert min_resources(defaulted(job)) == {"nvidia.com/gpu": "4", "cpu": "5"}


def test_validation_refuses_names_that_cannot_be_hostnames():
    assert operator_objects(mpijob(name="Bad_Name")).errors
    assert operator_objects(mpijob(name="x" * 60, workers=10)).errors  # x...-worker-9 > 63


# --- the control loop ----------------------------------------------------------------------------
@pytest.fixture
def srv():
    s = KubeAPIServer(controllers=False, start_delay=0.0)
    s.add_node("gpu-0", gpus=8)
    s.add_node("gpu-1", gpus=8)
    yield s
    s.stop()


def conditions(srv, name="pi") -> dict:
    job = srv.get("mpijobs", name)
    return {c["type"]: (c["status"], c["reason"])
            for c in (job.get("status") or {}).get("conditions") or []}


def launcher_env(srv, name="pi") -> dict:
    return env(srv.get("jobs", f"{name}-launcher")["spec"]["template"]["spec"]["containers"][0])


def test_at_startup_creates_everything_and_finishes(srv):
    srv.install_mpi_operator()
    srv.script_pod(r"pi-launcher-\w{5}", logs=["done"], exit_code=0, duration=0.05)
    srv.script_pod(r"pi-worker-\d+", exit_code=None)
    srv.create(mpijob())
    srv.step()
    assert srv.get("jobs", "pi-launcher") is not None  # AtStartup: launcher at once
    assert srv.get("services", "pi") and srv.get("configmaps", "pi-config")
    assert srv.get("secrets", "pi-ssh")["type"] == "kubernetes.io/ssh-auth"
    assert conditions(srv)["Created"] == ("True", "MPIJobCreated")
    srv.wait_for(lambda: conditions(srv).get("Succeeded", ("",))[0] == "True")
    assert conditions(srv)["Running"][0] == "False"
    # cleanPodPolicy Running: the idle workers are gone once the launcher finished.
    srv.wait_for(lambda: not [p for p in srv.objects("pods", NS)
                              if p["metadata"]["name"].startswith("pi-worker")
                              and not p["metadata"].get("deletionTimestamp")])
    reasons = [e["reason"] for e in srv.events_for("pi")]
    assert "MPIJobCreated" in reasons and "MPIJobSucceeded" in reasons


def test_wait_for_workers_ready_holds_the_launcher(srv):
    srv.install_mpi_operator()
    srv.script_pod(r"pi-worker-\d+", exit_code=None, ready_after=0.3)
    job = mpijob(launcherCreationPolicy="WaitForWorkersReady")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "readinessProbe"] = {"tcpSocket": {"port": 22}}
    srv.create(job)
    srv.step(3)
    assert len([p for p in srv.objects("pods", NS) if "worker" in p["metadata"]["name"]]) == 2
    assert srv.get("jobs", "pi-launcher") is None  # workers not Ready yet
    srv.wait_for(lambda: srv.get("jobs", "pi-launcher"))
    assert "pi-worker-0.pi.default.svc" in srv.get("configmaps", "pi-config")["data"][
        "discover_hosts.sh"]
    assert launcher_env(srv)["OMPI_MCA_orte_set_default_slots"] == "1"


def test_suspend_creates_no_workers_and_resume_starts_the_launcher_at_once(srv):
    srv.install_mpi_operator()
    srv.script_pod(r"pi-worker-\d+", exit_code=None, ready_after=5.0)
    job = mpijob(launcherCreationPolicy="WaitForWorkersReady",
                 runPolicy={"cleanPodPolicy": "Running", "suspend": True})
    srv.create(job)
    srv.step(2)
    assert [p for p in srv.objects("pods", NS)] == []
    # With no workers, "every worker Ready" holds: the launcher Job exists, suspended.
    assert srv.get("jobs", "pi-launcher")["spec"]["suspend"] is True
    assert conditions(srv)["Suspended"] == ("True", "MPIJobSuspended")
    assert conditions(srv)["Running"] == ("False", "MPIJobSuspended")
    # What Kueue does on admission: unsuspend. The launcher Job resumes in the same sync,
    # before any worker is Ready (the race the hvdk8s launcher must survive).
    srv.store.mutate("kubeflow.org/mpijobs", NS, "pi",
                     lambda j: j["spec"]["runPolicy"].__setitem__("suspend", False))
    srv.step()
    assert srv.get("jobs", "pi-launcher")["spec"].get("suspend") is False
    workers = [p for p in srv.objects("pods", NS) if "worker" in p["metadata"]["name"]]
    assert len(workers) == 2
    assert not any(c.get("type") == "Ready" and c.get("status") == "True"
                   for p in workers for c in (p.get("status") or {}).get("conditions") or [])
    assert conditions(srv)["Suspended"] == ("False", "MPIJobResumed")


def test_pod_group_only_with_gang_scheduling_flag(srv):
    srv.install_group("volcano")
    srv.install_mpi_operator()  # the default deployment: no --gang-scheduling
    job = mpijob()
    for rs in job["spec"]["mpiReplicaSpecs"].values():
        rs["template"]["spec"]["schedulerName"] = "volcano"
    srv.create(job)
    srv.step(2)
    assert srv.objects("podgroups.scheduling.volcano.sh", NS) == []
    assert srv.get("pods", "pi-worker-0")["spec"]["schedulerName"] == "volcano"
    assert "annotations" not in srv.get("pods", "pi-worker-0")["metadata"]
    srv.create(mpijob(name="pg"))
    srv.install_mpi_operator(gang_scheduling="volcano")
    srv.step(2)
    pg = srv.get("podgroups.scheduling.volcano.sh", "pg")
    assert pg["spec"]["minMember"] == 3
    assert pg["metadata"]["ownerReferences"][0]["name"] == "pg"


def test_an_object_of_the_same_name_stops_the_sync(srv):
    srv.install_mpi_operator()
    srv.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "pi-config", "namespace": NS}, "data": {"x": "1"}})
    srv.create(mpijob())
    srv.step(2)
    assert [e["message"] for e in srv.events_for("pi", reason="ErrResourceExists")] == [
        "Resource 'pi-config' of Kind 'ConfigMap' already exists and is not managed by MPIJob"]
    assert srv.get("configmaps", "pi-config")["data"] == {"x": "1"}  # not overwritten
    assert srv.objects("pods", NS) == [] and srv.get("jobs", "pi-launcher") is None


def test_failed_launcher_fails_the_mpijob_with_the_pods_reason(srv):
    srv.install_mpi_operator()
    srv.script_pod(r"pi-launcher-\w{5}", logs=["ssh: connect refused"], exit_code=1)
    srv.script_pod(r"pi-worker-\d+", exit_code=None)
    job = mpijob(runPolicy={"cleanPodPolicy": "Running", "backoffLimit": 0})
    srv.create(job)
    srv.wait_for(lambda: conditions(srv).get("Failed", ("",))[0] == "True")
    assert conditions(srv)["Failed"][1].startswith("BackoffLimitExceeded")


def test_validation_error_is_an_event_and_nothing_is_created(srv):
    srv.install_mpi_operator()
    job = mpijob()
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    srv.create(job)
    srv.step()
    assert srv.events_for("pi", reason="ValidationError")
    assert srv.get("services", "pi") is None
