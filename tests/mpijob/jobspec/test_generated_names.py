"""Jobs without `--name`: a readable, valid name, free in the namespace, shown to the user."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from launcher.cli.app import app
from launcher.pipeline import jobnames
from mpijob.jobspec import names
from mpijob.jobspec.jobname import SUFFIX_ALPHABET, base_name, generate
from mpijob.jobspec.spec import DNS1035, build_spec

runner = CliRunner()
GENERATED = re.compile(rf"^(?P<base>[a-z][-a-z0-9]*)-[{SUFFIX_ALPHABET}]{{5}}$")


@pytest.mark.parametrize(("model", "command", "shell", "expected"), [
    ("resnet50", (), False, "resnet50"),
    ("inception3", (), False, "inception3"),
    ("resnet50", ("python train.py --lr 0.1",), True, "train"),
    ("resnet50", ("mpirun", "-np", "4", "python3", "/opt/My_Train.py"), False, "my-train"),
    ("resnet50", ("env", "LR=1", "/usr/bin/python3.11", "-u", "bench.py"), False, "bench"),
    ("resnet50", ("horovodrun -np 2 python 'unbalanced",), True, "unbalanced"),
    ("resnet50", ("42",), False, "job"),
])
def test_the_readable_part_says_what_runs(model, command, shell, expected):
    assert base_name(model, command, shell) == expected


@pytest.mark.parametrize("workers", [1, 9, 10, 4096])
def test_long_bases_are_cut_so_every_derived_name_stays_valid(workers):
    name = generate("a" * 80 + "-b", workers, set(), ["x7k2p"])
    assert DNS1035.match(name) and name.endswith("-x7k2p")
    assert len(name) + names.longest_suffix(workers) <= 63
    build_spec(name=name, workers=workers)  # the spec's own length check agrees


def test_a_taken_name_is_skipped():
    assert generate("vgg16", 1, {"vgg16-bbbbb"}, ["bbbbb", "ccccc"]) == "vgg16-ccccc"
    with pytest.raises(ValueError):
        generate("vgg16", 1, {"vgg16-bbbbb"}, ["bbbbb"])


def test_random_names_are_valid_and_differ():
    made = {jobnames.generated_name(model="resnet50", command=(), shell=False, workers=4,
                                    backend=None, namespace=None) for _ in range(200)}
    assert len(made) == 200
    assert all(GENERATED.match(n) and GENERATED.match(n)["base"] == "resnet50" for n in made)


def _fixed_suffixes(monkeypatch, *suffixes):
    monkeypatch.setattr(jobnames, "random_suffixes", lambda: iter(suffixes))


def test_dry_run_prints_the_manifests_of_a_generated_name():
    result = runner.invoke(app, ["submit", "mpi", "--gpus", "1", "--workers", "4", "--dry-run"])
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    job = objects[0]["metadata"]["labels"][names.LABEL_JOB]
    assert GENERATED.match(job) and job.startswith("resnet50-")
    assert objects[0]["metadata"]["name"] == names.launcher(job)
    # The start gate is the job's by a label of its own (status and list never count it).
    assert all((o["metadata"]["labels"].get(names.LABEL_JOB)
                or o["metadata"]["labels"].get(names.LABEL_START_GATE)) == job for o in objects)
    assert f"job name: {job} (generated" in result.stderr


def test_kubernetes_picks_a_name_no_job_in_the_namespace_has(k8s, monkeypatch):
    taken = "resnet50-bbbbb"
    first = runner.invoke(app, ["submit", "mpi", "--name", taken, "--image", k8s.image,
                                *k8s.cli_args()])
    assert first.exit_code == 0, first.output
    _fixed_suffixes(monkeypatch, "bbbbb", "ccccc")
    result = runner.invoke(app, ["submit", "mpi", "--image", k8s.image, *k8s.cli_args()])
    try:
        assert result.exit_code == 0, result.output
        assert "job name: resnet50-ccccc (generated" in result.stderr
        assert "hvdk8s logs -f resnet50-ccccc" in result.stderr  # the follow-up hint
        listed = runner.invoke(app, ["list", "-o", "json", *k8s.cli_args()])
        assert {"resnet50-bbbbb", "resnet50-ccccc"} <= {
            j["name"] for j in yaml.safe_load(listed.stdout)}
    finally:
        runner.invoke(app, ["delete", "resnet50-bbbbb", "resnet50-ccccc", *k8s.cli_args()])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun")
def test_local_picks_a_name_no_job_in_hvdk8s_home_has(local_jobs, monkeypatch):
    local = ["--backend", "local"]
    first = runner.invoke(app, ["submit", "mpi", *local, "--name", "sleep-bbbbb", "sleep", "30"])
    assert first.exit_code == 0, first.output
    _fixed_suffixes(monkeypatch, "bbbbb", "ccccc")
    try:
        result = runner.invoke(app, ["submit", "mpi", *local, "sleep", "30"])
        assert result.exit_code == 0, result.output
        assert "job name: sleep-ccccc (generated" in result.stderr
        assert "hvdk8s logs -f sleep-ccccc --backend local" in result.stderr
        listed = runner.invoke(app, ["list", *local])
        assert "sleep-bbbbb" in listed.stdout and "sleep-ccccc" in listed.stdout
    finally:
        runner.invoke(app, ["delete", *local, "sleep-bbbbb", "sleep-ccccc"])


def test_a_backend_that_cannot_list_still_gets_a_name():
    from launcher.errors import UserError

    class Forbidden:
        def list(self, namespace):
            raise UserError("pods is forbidden: cannot list resource")

    name = jobnames.generated_name(model="vgg16", command=(), shell=False, workers=2,
                                   backend=Forbidden(), namespace="team-a")
    assert GENERATED.match(name) and name.startswith("vgg16-")
