"""`--mode auto`'s decision table (mpijob.k8s.modes), row by row, and the refusals of a mode
asked by name: refused before anything is advised, suggesting only installed modes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpijob.jobspec.spec import PodPatch, build_spec
from mpijob.k8s import modes
from mpijob.k8s.modes import Installed, blockers, choose_mode

ROOT = Path(__file__).resolve().parents[3]
NOTHING = Installed()
OPERATOR = Installed(operator=True)
TRAINER = Installed(trainer=True)  # with hvdk8s's runtime for the image
NO_RUNTIME = Installed(trainer=True, runtime_problem="no ClusterTrainingRuntime runs image img")
BOTH = Installed(operator=True, trainer=True)
OFFLINE = Installed(known=False)


def _spec(**kw):
    return build_spec(**{"name": "m", "workers": 2, "gpus_per_worker": 1, "image": "img",
                         "command": ("python", "t.py"), **kw})


PATCH = PodPatch(target="worker", patch={"spec": {"priorityClassName": "x"}}, source="p.yaml")
# What a TrainJob cannot carry, each alone (the operator carries them all).
TRAINJOB_CANNOT = {
    "--pod-patch": {"pod_patches": (PATCH,)},
    "--rdma on": {"rdma": "on"},
    "--extra-resource": {"extra_resources": {"rdma/hca": 1}},
    "--gpu-request dra": {"gpu_request": "dra"},
    "--host-network": {"host_network": True},
    "--working-dir": {"working_dir": "/work"},
    "--mpi mpich": {"mpi_implementation": "MPICH"},
}

# One case per row of the table (the module docstring, the README): (row, installed, job
# asks, gang unserved, mode picked).
ROWS = [
    ("elastic", BOTH, {"min_workers": 1, "max_workers": 3}, False, "pods"),
    ("operator", OPERATOR, {}, False, "operator"),
    ("operator", BOTH, {}, False, "operator"),
    ("trainjob", TRAINER, {}, False, "trainjob"),
    ("else", NOTHING, {}, False, "pods"),
    ("else", NO_RUNTIME, {}, False, "pods"),
    ("else", OFFLINE, {}, False, "pods"),
    ("else", OPERATOR, {"host_network": True, "mpi_implementation": "MPICH"}, False, "pods"),
    ("trainjob", BOTH, {}, True, "trainjob"),  # --gang, no gang scheduler: not the operator
    ("else", OPERATOR, {}, True, "pods"),
    *(("else", TRAINER, asks, False, "pods") for asks in TRAINJOB_CANNOT.values()),
    *(("operator", BOTH, asks, False, "operator") for asks in TRAINJOB_CANNOT.values()),
]


@pytest.mark.parametrize("row, installed, asks, gang_unserved, picked", ROWS)
def test_auto_picks_by_the_table(row, installed, asks, gang_unserved, picked):
    choice = choose_mode("auto", _spec(**asks), installed, gang_unserved=gang_unserved)
    assert choice.mode == picked, choice.line
    assert choice.line.startswith(f"mode: {picked} (--mode auto")
    # A mode is chosen only where the whole job runs in it.
    assert blockers(_spec(**asks), picked, gang_unserved=gang_unserved) == []


def test_every_row_of_the_table_has_a_case():
    assert {r[0] for r in ROWS} == {"elastic", "operator", "trainjob", "else"}


def test_auto_says_why_it_left_trainer():
    choice = choose_mode("auto", _spec(), NO_RUNTIME)
    assert "not Kubeflow Trainer: no ClusterTrainingRuntime runs image img" in choice.line
    patched = choose_mode("auto", _spec(pod_patches=(PATCH,)), TRAINER)
    assert "not Kubeflow Trainer: --pod-patch: a TrainJob carries no pod patches" in patched.line


@pytest.mark.parametrize("name", sorted(TRAINJOB_CANNOT))
def test_trainjob_asked_for_what_it_cannot_carry_suggests_only_installed_modes(name):
    spec = _spec(**TRAINJOB_CANNOT[name])
    alone = choose_mode("trainjob", spec, NO_RUNTIME)
    assert alone.mode is None
    # Refused for what the job asks, not for the missing runtime: no install advice.
    assert "install" not in alone.line and "--ssh-port" not in alone.line
    assert alone.line.endswith("; use --mode pods"), alone.line
    with_operator = choose_mode("trainjob", spec, Installed(operator=True, trainer=True))
    assert with_operator.line.endswith("; use --mode pods or --mode operator")


def test_a_mode_not_installed_is_refused_naming_what_is():
    op = choose_mode("operator", _spec(), TRAINER)
    assert op.mode is None
    assert op.line == ("--mode operator: the Kubeflow MPI Operator is not installed (no "
                       "kubeflow.org/v2beta1 MPIJob in the API); install it, or use --mode pods or "
                       "--mode trainjob")
    assert choose_mode("operator", _spec(), NO_RUNTIME).line.endswith("use --mode pods")
    tj = choose_mode("trainjob", _spec(), NOTHING)
    assert tj.mode is None and tj.line.startswith("--mode trainjob: Kubeflow Trainer is not "
                                                  "installed")
    assert tj.line.endswith("; install it, or use --mode pods")


def test_elastic_in_a_mode_without_elastic_jobs_is_refused():
    elastic = _spec(min_workers=1, max_workers=3)
    for mode in ("operator", "trainjob"):
        refused = choose_mode(mode, elastic, BOTH)
        assert refused.mode is None and refused.line.startswith("--min-workers/--max-workers")
        assert refused.line.endswith("; use --mode pods")
    assert choose_mode("pods", elastic, NOTHING).mode == "pods"


def test_a_mode_asked_offline_is_checked_against_the_job_only():
    assert choose_mode("operator", _spec(), OFFLINE).mode == "operator"
    refused = choose_mode("trainjob", _spec(host_network=True), OFFLINE)
    assert refused.line == ("--host-network: a TrainJob cannot put its pods on the host "
                            "network; use --mode pods")


def _table_rows(text: str) -> list[tuple[str, ...]]:
    start = text.index("| job asks")
    rows = []
    for line in text[start:].splitlines():
        if not line.startswith("|"):
            break
        if not re.match(r"^\|[- |]+\|$", line):
            rows.append(tuple(c.strip() for c in line.strip("|").split("|")))
    return rows


def test_the_readme_table_is_the_modules():
    readme = (ROOT / "README.md").read_text()
    assert _table_rows(readme) == _table_rows(modes.__doc__ or "")
