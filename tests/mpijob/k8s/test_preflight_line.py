"""The preflight in every launch line: pods, operator and TrainJob modes and the local
backend run it first, with the job's own mpirun options and hostfile, and then the program;
its program and plan ship in the ConfigMap the ranks mount."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from launcher.backends.kubernetes.rendering import render
from launcher.backends.local.launching import build_launch
from launcher.backends.local.mpi import LocalMpi
from launcher.preparing.planning import plan_job
from mpijob.jobspec.spec import build_spec
from mpijob.k8s.command import MpiDialect, launch_argv
from mpijob.scheduling.cluster import Cluster, Node
from mpijob.scheduling.presets import preset
from tests.render_cases import FIXED_KEYS, STUB_BENCHMARK

TRAIN = ("python train.py --lr 0.1",)


def _spec(**kw):
    base = dict(name="pf", workers=2, gpus_per_worker=4, command=TRAIN, shell=True)
    return build_spec(**{**base, **kw})


def _objects(spec, mode, placement=None, preflight_plan=None, decisions=None):
    return render(spec, decisions=decisions, mode=mode, placement=placement,
                  ssh=FIXED_KEYS if mode == "pods" else None,
                  benchmark_source=STUB_BENCHMARK, preflight_plan=preflight_plan)


def _split(argv: list[str]) -> tuple[str, list[str]]:
    """(the preflight's wrapper script, the program's line it execs)."""
    at = argv.index("hvdk8s-preflight")
    assert argv[at - 2:at - 1] == ["-c"]
    return argv[at - 1], argv[at + 1:]


def _preflight_line(script: str) -> list[str]:
    (line,) = [x for x in script.splitlines() if "hvdk8s_preflight.py" in x]
    return shlex.split(line)


def _launcher_command(objects, mode) -> list[str]:
    root = objects[0]
    if mode == "pods":
        return root["spec"]["template"]["spec"]["containers"][0]["command"]
    if mode == "operator":
        spec = root["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        return spec["containers"][0]["command"]
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    script = cm["data"]["launch.sh"]
    return shlex.split(script[script.index("\nexec ") + len("\nexec "):])


def _config_data(objects) -> dict:
    data: dict = {}
    for o in objects:
        if o["kind"] == "ConfigMap":
            data.update(o["data"])
    return data


@pytest.mark.parametrize("mode", ["pods", "operator", "trainjob"])
def test_every_mode_runs_the_preflight_then_the_program(mode):
    objects = _objects(_spec(preflight="warn"), mode)
    script, program = _split(_launcher_command(objects, mode))
    pre = _preflight_line(script)
    # The program's line is the one without a preflight, whole and last.
    assert program[-3:] == ["/bin/sh", "-c", TRAIN[0]]
    assert program[0] == "mpirun" and pre[0] == "mpirun"
    # The same mpirun options and hostfile: the preflight runs where the program will.
    assert pre[:pre.index("python")] == program[:program.index("/bin/sh")]
    assert pre[pre.index("python"):] == ["python", "/etc/hvdk8s/hvdk8s_preflight.py", "--policy",
                                         "warn", "--plan", "/etc/hvdk8s/preflight.json"]
    data = _config_data(objects)
    assert "def main(" in data["hvdk8s_preflight.py"]
    plan = json.loads(data["preflight.json"])
    assert sum(p["slots"] for p in plan["pods"]) == 8 and plan["gpus"] is True


@pytest.mark.parametrize("mode", ["pods", "operator", "trainjob"])
def test_off_and_undecided_render_no_preflight(mode):
    for spec in (_spec(preflight="off"), _spec()):
        objects = _objects(spec, mode)
        assert "hvdk8s-preflight" not in _launcher_command(objects, mode)
        assert "preflight.json" not in _config_data(objects)


def test_operator_mounts_the_config_for_the_preflight_of_a_users_program():
    # Without the benchmark the operator-mode pods had no ConfigMap: the preflight needs it.
    objects = _objects(_spec(preflight="warn"), "operator")
    templates = objects[0]["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        pod = templates[role]["template"]["spec"]
        mounts = [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]]
        assert "/etc/hvdk8s" in mounts, role
        assert any(v.get("configMap") for v in pod["volumes"]), role


def test_operator_host_network_port_goes_on_both_lines():
    spec = _spec(preflight="warn", host_network=True)
    objects = _objects(spec, "operator")
    script, program = _split(_launcher_command(objects, "operator"))
    pre = _preflight_line(script)
    for line in (pre, program):
        assert line[1:3] == ["-mca", "plm_rsh_args"] and f"-p {spec.ssh_port} " in line[3]


def test_fail_ends_the_launch_before_the_program_warn_goes_on():
    fail, _ = _split(launch_argv(_spec(preflight="fail"), "/etc/hvdk8s/hostfile"))
    warn, _ = _split(launch_argv(_spec(preflight="warn"), "/etc/hvdk8s/hostfile"))
    assert 'exit "$status"' in fail and "--policy fail" in fail
    assert 'exit "$status"' not in warn and "--policy warn" in warn
    assert fail.rstrip().endswith('exec "$@"') and warn.rstrip().endswith('exec "$@"')


def test_users_own_mpirun_line_follows_our_preflight_untouched():
    user = "mpirun -np 8 python train.py"
    _, program = _split(launch_argv(_spec(preflight="warn", command=(user,)), "/h"))
    assert program == ["/bin/sh", "-c", user]


def test_plan_carries_the_models_expectations_into_the_config_map():
    nodes = tuple(Node(name=f"n{i}", gpus=8, topology=preset("dgx-h100"),
                       gpu_model="NVIDIA-H100-80GB-HBM3", network_gbps=100.0) for i in range(2))
    spec = _spec(gpus_per_worker=8)
    plan = plan_job(spec, Cluster(nodes))
    # Kubernetes' default, decided by the plan; the spec stays as asked
    assert (plan.decisions.preflight, plan.spec.preflight) == ("warn", None)
    objects = _objects(plan.spec, "pods", plan.placement, plan.preflight, plan.decisions)
    shipped = json.loads(_config_data(objects)["preflight.json"])
    assert [p["node"] for p in shipped["pods"]] == [a.node for a in plan.placement.assignments]
    assert shipped["pods"][0]["node_path"]["kind"] == "nvlink"
    assert shipped["nodes"]["kind"] == "net"
    # One template (operator mode): pods named by host, each expected the slowest pod's.
    operator = json.loads(_config_data(_objects(plan.spec, "operator", plan.placement,
                                                plan.preflight, plan.decisions))["preflight.json"])
    assert all("node" not in p for p in operator["pods"])
    assert operator["pods"][0]["node_path"] == shipped["pods"][0]["node_path"]


def _local(spec, tmp_path: Path, gpus=()):
    return build_launch(spec, mpi=LocalMpi("/usr/bin/mpirun", MpiDialect("OpenMPI", 4)),
                        hostfile=tmp_path / "hostfile", job_dir=None, gpus=list(gpus),
                        python="/venv/bin/python", cores=8, is_root=False,
                        environ={"PATH": "/usr/bin"})


def test_local_line_runs_the_preflight_with_its_plan_on_the_line(tmp_path):
    spec = build_spec(name="pf", workers=4, command=("python", "train.py"), preflight="warn")
    script, program = _split(_local(spec, tmp_path).argv)
    pre = _preflight_line(script)
    assert program[0] == "/usr/bin/mpirun" and program[-2:] == ["python", "train.py"]
    at = pre.index("/venv/bin/python")
    assert pre[:at] == program[:program.index("python")]
    assert pre[at + 1].endswith("mpijob/k8s/podscripts/hvdk8s_preflight.py")
    plan = json.loads(pre[pre.index("--plan-json") + 1])
    assert plan["pods"][0]["slots"] == 4 and plan["gpus"] is False
    off = build_spec(name="pf", workers=4, command=("python", "train.py"))
    assert "hvdk8s-preflight" not in _local(off, tmp_path).argv


def test_local_plan_decides_the_default_by_gpus():
    from launcher.backends.local.launching import LocalLaunches

    cpu = LocalLaunches().plan(build_spec(name="pf", workers=2, command=TRAIN, shell=True),
                               None, None)
    gpu = LocalLaunches().plan(build_spec(name="pf", workers=1, gpus_per_worker=1, command=TRAIN,
                                          shell=True), None, None)
    asked = LocalLaunches().plan(build_spec(name="pf", workers=2, command=TRAIN, shell=True,
                                            preflight="fail"), None, None)
    assert ((cpu.decisions.preflight, gpu.decisions.preflight, asked.decisions.preflight)
            == ("off", "warn", "fail"))


def test_elastic_pods_run_the_preflight_over_the_workers_ready_at_the_start():
    spec = _spec(preflight="fail", min_workers=1, max_workers=3)
    objects = _objects(spec, "pods")
    command = _launcher_command(objects, "pods")
    assert command[:2] == ["/bin/sh", "/etc/hvdk8s-elastic/elastic.sh"]
    script, program = _split(command)
    assert program[:2] == ["horovodrun", "--gloo"] and "--min-np" in program
    # The hosts and ranks come from elastic.sh's start hostfile and the job's slots, at start.
    assert '"$HVDK8S_HOSTFILE"' in script and "$HVDK8S_SLOTS" in script
    line = next(x for x in script.splitlines() if "hvdk8s_preflight.py" in x)
    assert line.startswith('horovodrun --gloo -np "$np" -H "$hosts" --network-interface eth0')
    assert line.endswith("--policy fail --plan /etc/hvdk8s/preflight.json --uniform-slots 4")
    assert 'exit "$status"' in script
    assert "preflight.json" in _config_data(objects)


def test_elastic_plans_expect_only_a_workers_own_pod():
    from mpijob.perf.preflight import for_elastic

    nodes = tuple(Node(name=f"n{i}", gpus=8, topology=preset("dgx-h100"),
                       gpu_model="NVIDIA-H100-80GB-HBM3", network_gbps=100.0) for i in range(2))
    plan = plan_job(_spec(gpus_per_worker=8, min_workers=1, max_workers=2), Cluster(nodes))
    elastic = for_elastic(plan.preflight, 8)
    assert elastic["pods"] == [{"slots": 8, "nvlinks": 18,
                                "node_path": plan.preflight["pods"][0]["node_path"]}]
    assert not {"nodes", "pairs", "job"} & set(elastic)
    # Pods of another size than one worker's: nothing to expect of a worker's pod.
    assert for_elastic(plan.preflight, 4)["pods"] == [{"slots": 4}]


def test_local_elastic_runs_the_preflight_through_horovodrun(tmp_path, monkeypatch):
    from launcher.backends.local import elastic as local_elastic

    monkeypatch.setattr(local_elastic, "check", lambda spec, python: "/venv/bin/horovodrun")
    spec = build_spec(name="pf", workers=2, min_workers=1, max_workers=2,
                      command=("python", "train.py"), preflight="warn")
    script, program = _split(_local(spec, tmp_path).argv)
    pre = _preflight_line(script)
    assert pre[:8] == ["/venv/bin/horovodrun", "--gloo", "-np", "2", "-H", "localhost:2",
                       "--network-interface", "lo"]
    assert pre[-2:] == ["--uniform-slots", "2"]
    assert program[0] == "/venv/bin/horovodrun" and "--host-discovery-script" in program


def test_submit_says_what_the_preflight_will_expect_and_cost():
    nodes = tuple(Node(name=f"n{i}", gpus=8, topology=preset("dgx-h100"),
                       gpu_model="NVIDIA-H100-80GB-HBM3", network_gbps=100.0) for i in range(2))
    plan = plan_job(_spec(gpus_per_worker=8, preflight="fail"), Cluster(nodes))
    (line,) = [n for n in plan.notes if n.startswith("preflight")]
    assert line.startswith("preflight (fail): about ") and "the program does not start" in line
    assert f"{plan.preflight['nodes']['gbs']:.3g} GB/s across nodes" in line
    off = plan_job(_spec(gpus_per_worker=8, preflight="off"), Cluster(nodes))
    assert off.preflight is None and not [n for n in off.notes if n.startswith("preflight")]


def test_local_users_own_line_runs_alone_as_the_dry_run_says(tmp_path):
    from launcher.backends.local.launching import build_launch as local_launch

    spec = build_spec(name="pf", workers=2, command=("mpirun -np 2 python t.py",), shell=True,
                      preflight="warn")
    launch = local_launch(spec, mpi=None, hostfile=tmp_path / "hostfile", job_dir=None, gpus=[],
                          python="/venv/bin/python", cores=8, is_root=False,
                          environ={"PATH": "/usr/bin"})
    assert launch.argv == ["/bin/sh", "-c", "mpirun -np 2 python t.py"]
