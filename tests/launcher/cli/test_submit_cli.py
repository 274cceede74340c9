"""`hvdk8s submit mpi` through typer's CliRunner: dry runs, exit codes, one-line errors."""

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from launcher.cli.app import app
from tests.schemas import validate_object

runner = CliRunner()
BASE = ["submit", "mpi", "--name", "demo", "--workers", "4", "--gpus", "1",
        "--image", "horovod/horovod:0.28.1", "--dry-run"]


def invoke(args):
    return runner.invoke(app, args)


def test_version():
    result = invoke(["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("hvdk8s ")


def test_dry_run_prints_valid_multi_document_yaml():
    result = invoke([*BASE, "-o", "yaml"])
    assert result.exit_code == 0, result.stderr
    objects = list(yaml.safe_load_all(result.stdout))
    kinds = [o["kind"] for o in objects]
    assert kinds[:4] == ["Job", "ConfigMap", "Secret", "Service"] and kinds.count("Pod") == 4
    for obj in objects:
        validate_object(obj)
    # No private key in what a dry run prints (CI logs keep it): submit makes the pair.
    assert all("PLACEHOLDER" in v for v in objects[2]["stringData"].values())


def test_operator_mode_validates_against_the_crd():
    result = invoke([*BASE, "--mode", "operator", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    import json

    items = json.loads(result.stdout)["items"]
    assert items[0]["kind"] == "MPIJob"
    for obj in items:
        validate_object(obj)


@pytest.mark.parametrize("change,option", [
    (["--workers", "0"], "--workers"),
    (["--name", "Bad_Name"], "--name"),
    (["--memory", "4XB"], "--memory"),
    (["--gpus", "-1"], "--gpus"),
    (["-e", "NOEQUALS"], "--env"),
    # names only a POSIX shell takes: Trainer's launch script and local ranks `export` them
    (["-e", "A.B=1"], "--env"),
    (["-e", "A-B=1"], "--env"),
    (["-e", "1A=1"], "--env"),
    (["--mode", "trainjob", "-e", "A.B=1"], "--env"),
    (["--backend", "local", "-e", "A-B=1"], "--env"),
    (["--cpu", "lots"], "--cpu"),
    (["--toleration", "k=v:Sometimes"], "--toleration"),
    (["--mode", "helm"], "--mode"),
    (["--workers", "four"], "--workers"),
    (["--model", "alexnet"], "--model"),
    (["--placement", "random"], "--placement"),
    (["--priority", "Bad_Prio"], "--priority"),
    (["--scheduler-name", "Bad Name"], "--scheduler-name"),
    (["--network-interface", "eth0"], "--network-interface"),
    (["--queue", "q1"], "--queue"),
    (["--timeout", "-1"], "--timeout"),
    (["--schedule-timeout", "0"], "--schedule-timeout"),
])
def test_bad_values_exit_2_with_one_line_naming_the_option(change, option):
    result = invoke([*BASE, *change])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and option in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_user_command_after_the_options_is_not_parsed_as_ours():
    result = invoke([*BASE, "python", "train.py", "--workers", "9", "--lr", "0.1"])
    assert result.exit_code == 0, result.stderr
    job = next(yaml.safe_load_all(result.stdout))
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-6:] == [
        "python", "train.py", "--workers", "9", "--lr", "0.1"]


_value = st.one_of(st.text(max_size=12), st.integers(-3, 70).map(str))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({
    "--name": st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,60}", fullmatch=True), _value),
    "--workers": _value, "--gpus": _value, "--memory": _value, "--cpu": _value,
    "-e": _value, "--selector": _value, "--toleration": _value, "--shm-size": _value,
}))
def test_any_option_values_render_valid_objects_or_exit_2(options):
    args = ["submit", "mpi", "--dry-run", "-o", "yaml"]
    for key, value in options.items():
        args += [key, value]
    result = invoke(args)
    if result.exit_code == 0:
        for obj in yaml.safe_load_all(result.stdout):
            validate_object(obj)
    else:
        assert result.exit_code == 2, (args, result.stderr, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, lines)


TWO_DGX1 = "tests/data/clusters/two-dgx1.yaml"


def _pods(stdout):
    return [o for o in yaml.safe_load_all(stdout) if o["kind"] == "Pod"]


def test_dry_run_with_a_cluster_renders_the_placed_pods():
    args = ["submit", "mpi", "--name", "vgg16", "--workers", "4", "--gpus", "1", "--gang",
            "--gputopology", "--cluster", TWO_DGX1, "--model", "vgg16", "--dry-run"]
    result = invoke(args)
    assert result.exit_code == 0, result.stderr
    (pod,) = _pods(result.stdout)  # one pod holds all four GPUs on one node
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    quad = {int(g) for g in pod["metadata"]["annotations"]["hvdk8s.io/gpus"].split(",")}
    assert quad in ({0, 1, 2, 3}, {4, 5, 6, 7})
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms[0]["matchFields"][0]["values"]) == 1
    assert "predicted:" in result.stderr
    job = next(yaml.safe_load_all(result.stdout))
    assert "hvdk8s.io/prediction" in job["metadata"]["annotations"]

    spread = invoke([a for a in args if a != "--gputopology"] + ["--placement", "spread"])
    assert spread.exit_code == 0, spread.stderr
    pods = _pods(spread.stdout)
    assert len(pods) == 4
    nodes = {p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0] for p in pods}
    assert len(nodes) == 2


def test_a_job_that_cannot_fit_is_refused_before_anything_is_rendered():
    result = invoke(["submit", "mpi", "--name", "big", "--workers", "3", "--gpus", "8",
                     "--cluster", TWO_DGX1, "--dry-run"])
    assert result.exit_code == 2
    assert result.stdout == "" and "cannot be placed" in result.stderr
