"""A CLI that never surprises (issue 22): no silent fall-back to this machine, a dry run of
the backend the command would use, the quick benchmark on a bare local run, hints that
apply to the command that prints them, kubectl's global flags anywhere, and help that
reads at 80 columns."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import typer
from typer.testing import CliRunner

from launcher.cli.app import app

runner = CliRunner()

# Every command that can reach a cluster, with arguments that would otherwise run it.
COMMANDS = {
    "submit": ["submit", "mpi", "-w", "1", "-g", "0", "--name", "kc3", "true"],
    "submit-dry-run": ["submit", "mpi", "-w", "1", "-g", "0", "--name", "kc3", "--dry-run"],
    "list": ["list"],
    "get": ["get", "kc3"],
    "logs": ["logs", "kc3"],
    "wait": ["wait", "kc3"],
    "delete": ["delete", "kc3"],
    "top node": ["top", "node"],
    "top job": ["top", "job"],
    "doctor": ["doctor"],
    "plan": ["plan", "-w", "1", "-g", "1"],
    "install agent": ["install", "agent"],
}


@pytest.fixture
def nothing_configured(tmp_path, monkeypatch):
    """No --kubeconfig, no $KUBECONFIG, no ~/.kube/config, not in a pod."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("HVDK8S_BACKEND", raising=False)
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "hvdk8s"))
    return tmp_path


def _jobs_created(home) -> list[str]:
    jobs = home / "hvdk8s" / "jobs"
    return sorted(p.name for p in jobs.rglob("*") if p.is_dir() and p.parent.parent == jobs) \
        if jobs.exists() else []


def _one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- 1. a kubeconfig that was given but cannot be used is an error naming it -----------
@pytest.mark.parametrize("command", COMMANDS, ids=str)
@pytest.mark.parametrize("form", ["flag-before", "flag-after", "env", "file"])
def test_a_given_but_unusable_kubeconfig_is_an_error_naming_it(command, form, nothing_configured,
                                                               monkeypatch):
    tmp = nothing_configured
    args = list(COMMANDS[command])
    missing = str(tmp / "bad.kubeconfig")
    if form == "flag-before":
        args = ["--kubeconfig", missing, *args]
        named = f"--kubeconfig {missing}"
    elif form == "flag-after":  # kubectl takes its global flags after the subcommand too
        cut = 2 if args[0] in ("submit", "top", "install") else 1
        args = [*args[:cut], "--kubeconfig", missing, *args[cut:]]
        named = f"--kubeconfig {missing}"
    elif form == "env":
        monkeypatch.setenv("KUBECONFIG", missing)
        named = f"$KUBECONFIG={missing}"
    else:  # garbage where kubectl looks by default
        (tmp / "user" / ".kube").mkdir()
        (tmp / "user" / ".kube" / "config").write_text("- not\n- a kubeconfig\n")
        named = "~/.kube/config"
    result = runner.invoke(app, args)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    line = _one_line(result)
    assert line.startswith("error: ") and named in line, line
    assert "backend: local" not in result.output
    assert result.stdout == ""
    assert _jobs_created(tmp) == []


def test_a_named_context_is_named_back_without_the_flag_it_already_gave(nothing_configured):
    for args in (["--context", "prod", "list"], ["list", "--context", "prod"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        line = _one_line(result)
        assert line.startswith("error: --context prod: no kubeconfig found"), line
        assert "--kubeconfig/--context" not in line


@pytest.mark.parametrize(("args", "hint"), [
    (["list", "--backend", "kubernetes"], "see this machine's jobs with --backend local"),
    (["get", "x", "--backend", "kubernetes"], "see this machine's jobs with --backend local"),
    (["top", "node", "--backend", "kubernetes"], "read a cluster file with --cluster FILE"),
    (["install", "agent"], "print the manifests with --dry-run"),
])
def test_each_hint_offers_what_its_command_has(args, hint, nothing_configured):
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    line = _one_line(result)
    assert line == ("error: no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config) and "
                    f"not running in a pod; pass --kubeconfig FILE or set $KUBECONFIG, or {hint}")


def test_a_usable_kubeconfig_after_the_subcommand_selects_the_cluster(kube_server, kubeconfig,
                                                                      nothing_configured):
    result = runner.invoke(app, ["top", "node", "--kubeconfig", kubeconfig, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert {"gpu-node-0", "gpu-node-1"} <= {n["node"] for n in json.loads(result.stdout)["nodes"]}


def test_global_namespace_before_the_subcommand_reaches_it(nothing_configured):
    result = runner.invoke(app, ["-n", "team-a", "submit", "mpi", "--name", "x", "--cluster",
                                 "tests/data/clusters/two-dgx1.yaml", "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert {o["metadata"]["namespace"] for o in json.loads(result.stdout)["items"]} == {"team-a"}


# --- 2. --dry-run shows what the command would do, on the backend it would use ----------
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_dry_run_with_nothing_configured_prints_the_local_mpirun_line(nothing_configured):
    result = runner.invoke(app, ["submit", "mpi", "--gpus", "0", "--workers", "2", "--name", "d",
                                 "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    (described,) = json.loads(result.stdout)["items"]
    assert described["backend"] == "local" and described["ranks"] == 2
    assert described["hostfile"] == "localhost slots=2\n"
    argv = described["command"].split()
    assert argv[0].endswith("mpirun") and argv[argv.index("-np") + 1] == "2"
    assert described["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert "backend: local (no kubeconfig configured and not in a pod)" in result.stderr
    assert _jobs_created(nothing_configured) == []


# --- 3. a bare local benchmark is the quick one, and says so -----------------------------
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_a_bare_local_benchmark_is_the_quick_one(nothing_configured):
    result = runner.invoke(app, ["submit", "mpi", "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    command = json.loads(result.stdout)["items"][0]["command"]
    for flag in ("--image_size 64", "--batch_size 8", "--num_batches 10",
                 "--num_warmup_batches 2"):
        assert flag in command, command
    assert re.search(r"^quick benchmark: resnet50 at 64 px, batch 8, 2 warm-up \+ 10 timed "
                     r"steps on 1 rank .*; (about|predicted) \d+ s", result.stderr, re.M)
    # A size the user gave is theirs: the rest keep the benchmark's own defaults.
    given = runner.invoke(app, ["submit", "mpi", "--batch-size", "16", "--dry-run", "-o", "json"])
    command = json.loads(given.stdout)["items"][0]["command"]
    assert "--batch_size 16" in command and "--num_batches 100" in command
    assert "quick benchmark" not in given.stderr


# --- 4. the design-card command with no cluster and no GPU ------------------------------
def test_gpus_with_no_cluster_and_no_gpu_say_the_three_ways_on(nothing_configured, monkeypatch):
    from launcher.backends.local import gpus

    monkeypatch.setattr(gpus, "gpu_count", lambda: 0)
    result = runner.invoke(app, ["submit", "mpi", "--gpus", "1", "--workers", "4"])
    assert result.exit_code == 2
    line = _one_line(result)
    assert line == (
        "error: no cluster configured (no --kubeconfig, $KUBECONFIG, ~/.kube/config or pod "
        "service account) and this machine has no GPU for --workers 4 --gpus 1: configure a "
        "kubectl context (or pass --kubeconfig FILE), see the plan with --dry-run or --cluster "
        "FILE, or run on this machine's CPU with --gpus 0")
    assert "job name" not in result.output  # no name for a job that was never created
    # The way on that it names works: the dry run shows the objects for a cluster.
    dry = runner.invoke(app, ["submit", "mpi", "--gpus", "1", "--workers", "4", "--dry-run"])
    assert dry.exit_code == 0 and "kind: Job" in dry.stdout
    assert "these are the objects the job would be on a cluster" in dry.stderr


# --- 5. doctor for the local backend ----------------------------------------------------
def test_doctor_with_no_cluster_reports_this_machine_as_json(nothing_configured):
    result = runner.invoke(app, ["doctor", "-o", "json"])
    report = json.loads(result.stdout)
    assert report["backend"] == "local"
    machine = report["machine"]
    assert machine["cores"] >= 1 and machine["usable_cores"] >= 1 and machine["gpus"] >= 0
    checks = {f["check"]: f for f in report["findings"]}
    assert {"cpu", "memory", "gpus", "mpi", "horovod", "tensorflow"} <= set(checks)
    assert "--gpus 0" in checks["cpu"]["effect"]
    assert result.exit_code == (0 if machine["mpirun"] else 1)


# --- 9. help at 80 columns ----------------------------------------------------------------
def _paths(command, path=()):
    yield path
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _paths(sub, (*path, name))


ROOT = typer.main.get_command(app)
PATHS = list(_paths(ROOT))


def _command(path):
    command = ROOT
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "hvdk8s")
def test_help_at_80_columns_cuts_no_value_and_splits_no_choice(path):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "…" not in text  # rich's sign of a value cut to fit
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = re.sub(r"[\s│]+", " ", text)
    for param in _command(path).params:
        if param.hidden:
            continue
        for value in getattr(param, "choice_values", ()):
            assert re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text), (param.name, value)
        for opt in param.opts:
            if opt.startswith("-"):
                assert opt in flat, opt
    # Every example is whole on its lines (a long one continues with a backslash).
    if "Examples:" in text:
        for line in text.split("Examples:", 1)[1].splitlines():
            assert not line.strip(" │").startswith(("-", "\"")) or line.startswith("       ")


def test_the_agent_command_is_hidden_from_the_command_list():
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "80"})
    assert not re.search(r"^\W+agent +\w", result.output, re.M)
    assert re.search(r"^\W+doctor +\w", result.output, re.M)  # how a command's row reads
    assert runner.invoke(app, ["agent", "--help"]).exit_code == 0  # still there for the pod


def test_plan_help_points_to_the_cluster_file_page():
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "80"})
    assert "docs/cluster-file.md" in result.output


def test_the_cluster_file_page_example_is_the_file_that_loads():
    from pathlib import Path

    from launcher.formats.clusterfile import load_cluster

    page = Path("docs/cluster-file.md").read_text()
    example = Path("docs/examples/cluster-file.yaml").read_text()
    body = example.split("\n", 2)[2]  # the page shows it without its two comment lines
    assert body.strip() in page
    cluster = load_cluster("docs/examples/cluster-file.yaml")
    assert [n.name for n in cluster.nodes] == ["dgx1-a", "dgx1-b", "pcie-box", "measured"]


# --- 8. kubectl's conventions ------------------------------------------------------------
def test_age_is_kubectls_human_duration():
    from datetime import datetime, timedelta, timezone

    from launcher.timestamps import age, format_utc

    now = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)
    # The cases of k8s.io/apimachinery/pkg/util/duration's HumanDuration.
    for seconds, shown in ((0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
                           (600, "10m"), (3 * 3600 - 60, "179m"), (3 * 3600, "3h"),
                           (5 * 3600 + 12 * 60, "5h12m"), (30 * 3600, "30h"),
                           (3 * 86400 + 4 * 3600, "3d4h"), (120 * 86400, "120d"),
                           (3 * 365 * 86400 + 30 * 86400, "3y30d"), (9 * 365 * 86400, "9y")):
        assert age(format_utc(now - timedelta(seconds=seconds)), now) == shown, seconds
    assert age(format_utc(now + timedelta(seconds=5)), now) == "<invalid>"
    assert age(None, now) == "<unknown>"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_list_has_age_wide_columns_and_says_when_there_is_nothing(local_jobs, nothing_configured):
    empty = runner.invoke(app, ["list"])
    assert empty.exit_code == 0 and empty.stdout == ""
    assert empty.stderr.strip() == "No jobs found in namespace default."
    assert runner.invoke(app, ["list", "-A"]).stderr.strip() == "No jobs found."
    created = runner.invoke(app, ["submit", "mpi", "--name", "t1", "-o", "json", "--wait", "true"])
    assert created.exit_code == 0, created.output
    try:
        submitted = runner.invoke(app, ["submit", "mpi", "--name", "t2", "-o", "json", "true"])
        assert submitted.exit_code == 0, submitted.output
        job = json.loads(submitted.stdout)  # the created job, as `get -o json` prints it
        assert job["name"] == "t2" and job["backend"] == "local"
        runner.invoke(app, ["wait", "t2"])
        listed = runner.invoke(app, ["list"]).stdout.splitlines()
        assert listed[0].split() == ["NAME", "NAMESPACE", "BACKEND", "PHASE", "WORKERS", "GPUS",
                                     "IMAGES/SEC", "AGE"]
        assert re.fullmatch(r"\d+s", listed[1].split()[-1])
        wide = runner.invoke(app, ["list", "-o", "wide"]).stdout.splitlines()
        assert wide[0].split()[-3:] == ["NODES", "MODE", "CREATED"]
        assert wide[1].split()[-2] == "local"
        got = json.loads(runner.invoke(app, ["get", "t2", "-o", "json"]).stdout)
        assert [r["exit_code"] for r in got["replicas"]] == [0]  # succeeded: 0, not null
    finally:
        runner.invoke(app, ["delete", "t1", "t2"])


def test_top_with_no_cluster_shows_this_machine_and_its_jobs(nothing_configured):
    node = runner.invoke(app, ["top", "node", "-o", "json"])
    assert node.exit_code == 0, node.output
    (row,) = json.loads(node.stdout)["nodes"]
    assert row["backend"] == "local" and row["cores"] >= 1 and row["gpus"] >= 0
    wide = runner.invoke(app, ["top", "node", "-o", "wide"])
    assert wide.stdout.splitlines()[0].split()[-2:] == ["CPU", "BINDING"]
    jobs = runner.invoke(app, ["top", "job", "--backend", "local"])
    assert jobs.exit_code == 0 and jobs.stderr.strip() == "No running jobs found in namespace default."


@pytest.mark.parametrize("args", [
    ["plan", "-w", "4", "-g", "1", "--cluster", "tests/data/clusters/two-dgx1.yaml"],
    ["top", "node", "--cluster", "tests/data/clusters/two-dgx1.yaml"],
], ids=["plan", "top node"])
def test_no_box_characters_when_stdout_is_not_a_terminal(args):
    result = runner.invoke(app, args)  # CliRunner's stdout is no terminal
    assert result.exit_code == 0, result.output
    assert not set("│┃━─┏┗╇┡") & set(result.stdout), result.stdout


# --- 7. completion, and one-line usage errors everywhere ----------------------------------
@pytest.mark.parametrize("shell, marker", [("bash", "complete -o default -F _hvdk8s_completion hvdk8s"),
                                           ("zsh", "#compdef hvdk8s"), ("fish", "complete")])
def test_completion_scripts_generate(shell, marker):
    result = runner.invoke(app, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert marker in result.stdout and "_HVDK8S_COMPLETE" in result.stdout


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_completion_completes_a_job_name_in_bash_and_zsh(local_jobs, nothing_configured):
    import os
    import subprocess
    import sys

    assert runner.invoke(app, ["submit", "mpi", "--name", "comp-me", "--wait", "true"]).exit_code == 0
    try:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}

        def complete(**shell_env) -> str:
            return subprocess.run([sys.executable, "-m", "launcher.cli.app"], env={**env, **shell_env},
                                  capture_output=True, text=True, timeout=120).stdout

        assert complete(_HVDK8S_COMPLETE="complete_bash", COMP_WORDS="hvdk8s logs co",
                        COMP_CWORD="2").split() == ["comp-me"]
        assert '"comp-me"' in complete(_HVDK8S_COMPLETE="complete_zsh",
                                       _TYPER_COMPLETE_ARGS="hvdk8s delete ")
    finally:
        runner.invoke(app, ["delete", "comp-me"])


@pytest.mark.parametrize("args", [["--bogus"], ["--kubeconfig"], ["bogus"], ["top", "bogus"],
                                  ["completion", "tcsh"]])
def test_usage_errors_are_one_line_at_every_level(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert _one_line(result).startswith("error: ")


# --- 10. smaller edges ------------------------------------------------------------------
@pytest.mark.parametrize(("command", "base"), [
    (['python -c "import sys; print(\'hi\')"'], "python"),
    (["python", "-c", "import sys; print('hi')"], "python"),
    (["python3 -m pkg.train --lr 0.1"], "train"),
    (["python train.py --lr 0.1"], "train"),
])
def test_a_generated_name_takes_the_programs_name(command, base):
    from mpijob.jobspec.jobname import base_name

    shell = len(command) == 1
    assert base_name("resnet50", tuple(command), shell) == base


def test_the_result_line_stays_out_of_what_people_read():
    from launcher.formats.benchmark_result import is_result_line

    assert is_result_line('HVDK8S_RESULT {"world_size": 1}')
    assert is_result_line('[job-worker-0] HVDK8S_RESULT {"world_size": 1}')
    assert not is_result_line("total images/sec: 21.76")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("rm", [False, True])
def test_ctrl_c_during_wait_says_the_job_runs_on_or_stops_it_with_rm(rm, local_jobs,
                                                                      nothing_configured,
                                                                      monkeypatch):
    from launcher.backends.local.backend import LocalBackend

    def interrupted(self, name, namespace=None, *, timeout=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalBackend, "wait", interrupted)
    args = ["submit", "mpi", "--name", "nap", "--wait", *(["--rm"] if rm else []), "sleep", "60"]
    result = runner.invoke(app, args)
    assert result.exit_code == 130
    try:
        last = result.stderr.strip().splitlines()[-1]
        if rm:
            assert last == "interrupted: job nap deleted (--rm)"
            assert _jobs_created(nothing_configured) == []
        else:
            assert last == ("interrupted: job nap is still running; stop it with: "
                            "hvdk8s delete nap --backend local")
            assert _jobs_created(nothing_configured) == ["nap"]
    finally:
        runner.invoke(app, ["delete", "nap"])


def test_rm_needs_wait(nothing_configured):
    result = runner.invoke(app, ["submit", "mpi", "--rm", "true"])
    assert result.exit_code == 2
    assert _one_line(result) == "error: --rm deletes the job when --wait ends: give --wait too"


def test_calibrate_with_an_unwritable_home_fails_before_fitting(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "file" / "home"))
    result = runner.invoke(app, ["calibrate", "benchmarks/calibration/measured/1rank"])
    assert result.exit_code == 1
    assert _one_line(result).startswith(
        f"error: cannot write the calibration to {tmp_path / 'file' / 'home'}/calibration.json")
    assert "calibrated on" not in result.stdout  # nothing fitted, nothing printed
