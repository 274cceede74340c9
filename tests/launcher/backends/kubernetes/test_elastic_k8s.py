"""Elastic built-in jobs against the test API server (mpijob/k8s/render_elastic.py): the
worker Indexed Job replaces a lost worker, `hvdk8s scale` changes completions and
parallelism together within the bounds, `get` shows the size and its history, and once the
launcher is done no worker comes back."""

from __future__ import annotations

import json

from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec import names
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.render_elastic import horovodrun_argv
from tests.k8s_env import hvdk8s
from tests.launcher.backends.kubernetes.test_production_cluster import gpu_holders
from tests.render_cases import FIXED_KEYS as KEYS


def _workers(srv, job: str) -> list[dict]:
    return sorted((p for p in srv.objects("pods")
                   if p["metadata"]["labels"].get(names.LABEL_JOB) == job
                   and p["metadata"]["labels"].get(names.LABEL_ROLE) == names.ROLE_WORKER
                   and not p["metadata"].get("deletionTimestamp")
                   and p["status"].get("phase") not in ("Succeeded", "Failed")),
                  key=lambda p: p["spec"]["hostname"])


def _hostnames(srv, job: str) -> list[str]:
    return [p["spec"]["hostname"] for p in _workers(srv, job)]


def test_rendered_elastic_job():
    spec = build_spec(name="el", workers=3, min_workers=2, max_workers=4, gpus_per_worker=2,
                      image="img", command=["python", "train.py"])
    objects = render(spec, ssh=KEYS)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert ("Job", "el-worker") in kinds and ("Service", "el-ready") in kinds
    assert not [k for k in kinds if k[0] == "Pod"]
    # The start gate comes before the worker Job, which its pod owns (test_start_gate.py).
    assert kinds.index(("Job", "el-start-gate")) < kinds.index(("Job", "el-worker"))
    job = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == "el-worker")
    assert (job["spec"]["completionMode"], job["spec"]["completions"],
            job["spec"]["parallelism"]) == ("Indexed", 3, 3)
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2"  # one worker per pod
    ready = next(o for o in objects if o["metadata"]["name"] == "el-ready")
    assert ready["spec"]["publishNotReadyAddresses"] is False
    argv = horovodrun_argv(spec)
    assert argv[:8] == ["horovodrun", "--gloo", "-np", "6", "--min-np", "4", "--max-np", "8"]
    assert argv[-2:] == ["python", "train.py"]
    launcher = objects[0]["spec"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:2] == ["/bin/sh", "/etc/hvdk8s-elastic/elastic.sh"]
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["HVDK8S_READY_SERVICE"] == "el-ready.default.svc"
    assert (env["HVDK8S_MIN_WORKERS"], env["HVDK8S_SLOTS"]) == ("2", "2")


def test_a_lost_worker_is_replaced_scale_grows_and_shrinks_and_the_end_frees_all(k8s):
    srv = k8s.server()
    k8s.script_launcher("el", ["horovodrun elastic"], exit_code=None)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "el", "--workers", "2",
                       "--min-workers", "2", "--max-workers", "3", "--gpus", "1",
                       "--image", k8s.image, "python", "train.py")
    assert submitted.exit_code == 0, submitted.output
    srv.wait_for(lambda: _hostnames(srv, "el") == ["el-worker-0", "el-worker-1"])
    srv.wait_for(lambda: "Running" in hvdk8s(k8s, "get", "el").output)
    assert all(p["spec"]["subdomain"] == "el-worker" for p in _workers(srv, "el"))

    lost = _workers(srv, "el")[1]
    srv.delete("pods", lost["metadata"]["name"])
    srv.wait_for(lambda: len(_workers(srv, "el")) == 2 and lost["metadata"]["uid"] not in
                 {p["metadata"]["uid"] for p in _workers(srv, "el")})
    assert _hostnames(srv, "el") == ["el-worker-0", "el-worker-1"]  # the same index back
    got = hvdk8s(k8s, "get", "el")
    assert "Running" in got.output and "WorkerLost" not in got.output, got.output

    grown = hvdk8s(k8s, "scale", "el", "--workers", "3")
    assert grown.exit_code == 0, grown.output
    assert "scaled to 3 workers (elastic 2..3)" in grown.output
    srv.wait_for(lambda: _hostnames(srv, "el") == ["el-worker-0", "el-worker-1", "el-worker-2"])
    job = srv.get("jobs", "el-worker")
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (3, 3)

    def top_size():
        rows = json.loads(hvdk8s(k8s, "top", "job", "-o", "json").stdout)["jobs"]
        return next((r["size"] for r in rows if r["job"] == "el"), None)

    srv.wait_for(lambda: top_size() == "3/3")  # `top job`: running of the size asked
    too_many = hvdk8s(k8s, "scale", "el", "--workers", "4")
    assert too_many.exit_code == 2
    assert too_many.output.strip() == "error: --workers: job el runs 2..3 workers " \
                                      "(--min-workers/--max-workers), not 4"
    assert hvdk8s(k8s, "scale", "el", "--workers", "2").exit_code == 0
    srv.wait_for(lambda: _hostnames(srv, "el") == ["el-worker-0", "el-worker-1"])
    got = hvdk8s(k8s, "get", "el").output
    assert "workers: 2 running (elastic 2..3, started with 2)" in got, got
    assert "scaled to 3 workers (hvdk8s scale)" in got and "scaled to 2 workers" in got
    assert "joined: el-worker-2-" in got

    # The launcher ends: `tidy` stops the worker Job, so nothing replaces the workers
    # removed (these fake workers are never released).
    k8s.script_launcher("el", ["done"], exit_code=0)
    srv.delete("pods", next(p["metadata"]["name"] for p in srv.objects("pods")
                            if p["metadata"]["labels"].get(names.LABEL_ROLE) == "launcher"))
    waited = hvdk8s(k8s, "wait", "el", "--timeout", "30")
    assert waited.exit_code == 0, waited.output
    tidied = hvdk8s(k8s, "tidy", "el").stdout
    assert "job el: stopped its worker Job el-worker\n" in tidied, tidied
    srv.wait_for(lambda: gpu_holders(srv, "el") == [] and srv.get("jobs", "el-worker") is None)


def test_scale_refuses_a_job_that_is_not_elastic(k8s):
    k8s.script_launcher("plain", ["x"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "plain", "--workers", "1", "--gpus", "1",
                  "--image", k8s.image, "python", "t.py").exit_code == 0
    refused = hvdk8s(k8s, "scale", "plain", "--workers", "2")
    assert refused.exit_code == 2
    assert "job plain is not elastic" in refused.output


def test_the_elastic_benchmark_ships_beside_its_loop_and_runs_under_horovodrun():
    spec = build_spec(name="eb", workers=2, min_workers=1, max_workers=3, gpus_per_worker=0,
                      image="img", benchmark={"model": "resnet50", "image_size": 32})
    objects = render(spec, ssh=KEYS, benchmark_source="BENCH", elastic_source="LOOP")
    cm = next(o for o in objects if o["metadata"]["name"] == "eb-elastic")
    assert (cm["data"]["hvd_cnn_bench.py"], cm["data"]["elastic.py"]) == ("BENCH", "LOOP")
    job = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == "eb-worker")
    mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "hvdk8s-elastic", "mountPath": "/etc/hvdk8s-elastic",
            "readOnly": True} in mounts
    argv = horovodrun_argv(spec)
    assert argv[argv.index("--network-interface") + 1] == "eth0"  # one host left: no probing
    program = argv[argv.index("python"):]
    assert program[1] == "/etc/hvdk8s-elastic/hvd_cnn_bench.py" and program[-1] == "--elastic"


def _list_row(k8s, job: str) -> dict:
    rows = json.loads(hvdk8s(k8s, "list", "-o", "json").stdout)
    return next(r for r in rows if r["name"] == job)


def test_scale_up_places_the_new_workers_on_another_node_and_says_so_once_running(k8s):
    """The plan holds what it placed (the 2 workers it starts with); scale places the 2 that
    join on the cluster as it is then: gpu-node-1, gpu-node-0 being full. It used to pin
    them to gpu-node-0, say "scaled" and leave them Pending."""
    srv = k8s.server()
    k8s.script_launcher("el", ["horovodrun elastic"], exit_code=None)
    k8s.script_launcher("big", ["x"], exit_code=None)
    submitted = hvdk8s(k8s, "submit", "mpi", "--name", "el", "--workers", "2",
                       "--min-workers", "2", "--max-workers", "4", "--gpus", "1",
                       "--image", k8s.image, "python", "train.py")
    assert submitted.exit_code == 0, submitted.output
    assert "placement: gpu-node-0: 2 workers, one pod each" in submitted.output
    # What the submit said each worker requests is what each worker pod requests.
    said = next(line for line in submitted.output.splitlines()
                if line.startswith("note: worker requests (each worker's pod)"))
    (worker_job,) = [j for j in srv.objects("jobs") if j["metadata"]["name"] == "el-worker"]
    resources = worker_job["spec"]["template"]["spec"]["containers"][0]["resources"]
    cpu, memory = resources["requests"]["cpu"], resources["requests"]["memory"]
    assert f"cpu {cpu}, memory {memory} + --shm-size 4Gi in its limit" in said
    assert resources["limits"]["memory"] == f"{int(memory.removesuffix('Gi')) + 4}Gi"
    assert hvdk8s(k8s, "submit", "mpi", "--name", "big", "--workers", "1", "--gpus", "6",
                  "--image", k8s.image, "python", "t.py").exit_code == 0
    assert srv.get("pods", "big-worker-0")["spec"].get("nodeName") == "gpu-node-0"

    grown = hvdk8s(k8s, "scale", "el", "--workers", "4", "--timeout", "20")
    assert grown.exit_code == 0, grown.output
    assert grown.output.startswith("job el: scaled to 4 workers (elastic 2..4)")
    new = [p for p in _workers(srv, "el") if p["spec"]["hostname"] in ("el-worker-2",
                                                                        "el-worker-3")]
    assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in new] == [
        ("gpu-node-1", "Running")] * 2
    got = hvdk8s(k8s, "get", "el").output
    assert "workers 4 x 1 GPU" in got and "workers: 4 running (elastic 2..4" in got, got
    row = _list_row(k8s, "el")
    assert (row["workers"], row["gpus_per_worker"]) == (4, 1), row
    table = hvdk8s(k8s, "list").output.splitlines()
    assert next(r.split() for r in table if r.startswith("el "))[4:6] == ["4", "4"]


def test_scale_up_that_cannot_be_placed_is_refused_and_changes_nothing(k8s):
    srv = k8s.server()
    k8s.script_launcher("wide", ["horovodrun elastic"], exit_code=None)
    k8s.script_launcher("hog", ["x"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "wide", "--workers", "1", "--min-workers",
                  "1", "--max-workers", "2", "--gpus", "8", "--image", k8s.image,
                  "python", "t.py").exit_code == 0
    assert hvdk8s(k8s, "submit", "mpi", "--name", "hog", "--workers", "1", "--gpus", "8",
                  "--image", k8s.image, "python", "t.py").exit_code == 0
    refused = hvdk8s(k8s, "scale", "wide", "--workers", "2")
    assert refused.exit_code == 2, refused.output
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("error: job wide: 1 more worker cannot be placed now: ")
    assert line.endswith("; nothing was changed (it runs 1)")
    job = srv.get("jobs", "wide-worker")
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)
    assert "workers 1 x 8 GPU" in hvdk8s(k8s, "get", "wide").output


def test_scale_says_what_it_waits_for_when_the_cluster_has_not_made_the_size(k8s):
    srv = k8s.server()
    k8s.script_launcher("slow", ["horovodrun elastic"], exit_code=None)
    assert hvdk8s(k8s, "submit", "mpi", "--name", "slow", "--workers", "1", "--min-workers",
                  "1", "--max-workers", "2", "--gpus", "1", "--image", k8s.image,
                  "python", "t.py").exit_code == 0
    srv.wait_for(lambda: "Running" in [p["status"].get("phase") for p in _workers(srv, "slow")])
    srv.unpullable_image(k8s.image)  # a worker that joins now never runs
    waited = hvdk8s(k8s, "scale", "slow", "--workers", "2", "--timeout", "1")
    assert waited.exit_code == 124, waited.output
    assert "scaled" not in waited.output
    assert "asked for 2 workers; 1 running after 1s, waiting for: slow-worker-1-" in \
        waited.output
