"""Issue 20 defect 7: an MPI Operator too old for a field hvdk8s renders refuses the job
before anything is created, and the MPIJob is created with fieldValidation=Strict, so a
field the CRD does not declare is an error, never a silent drop.

The test API server serves the MPIJob CRD with the operator version's schema
(kubesim/mpijob_crd.py) and prunes or refuses unknown fields as the real
one does (fieldvalidation.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kubesim import mpijob_crd
from launcher.backends.kubernetes import operator_schema
from launcher.backends.kubernetes.client import ApiError
from launcher.backends.kubernetes.rendering import render
from launcher.cli.app import app
from mpijob.jobspec.spec import build_spec
from tests.kubeapi_fixtures import configmaps_made

runner = CliRunner()
ARGS = ("submit", "mpi", "--name", "old", "--workers", "2", "--gpus", "1", "--image",
        "img:1", "--mode", "operator", "python", "t.py")


def mpijob(name: str = "m", **extra_spec) -> dict:
    spec = build_spec(name=name, workers=1, gpus_per_worker=1, command=("python", "t.py"))
    obj = render(spec, mode="operator")[0]
    obj["spec"].update(extra_spec)
    return obj


def test_an_operator_before_v0_5_0_is_refused_naming_its_version_and_the_fields(k8s):
    srv = k8s.server()
    srv.install_mpi_operator(version=mpijob_crd.OLD)
    result = runner.invoke(app, [*ARGS, *k8s.cli_args()])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("error: MPI Operator 0.4.0 does not know "
                           "spec.launcherCreationPolicy (its MPIJob CRD's v2beta1 schema")
    assert "upgrade the MPI Operator to v0.5.0 or later" in line and "--mode pods" in line
    assert srv.objects("mpijobs.kubeflow.org", "default") == []
    assert configmaps_made(srv) == []


def test_a_current_operator_keeps_every_field(k8s):
    srv = k8s.server()
    srv.install_mpi_operator()
    result = runner.invoke(app, [*ARGS, *k8s.cli_args()])
    assert result.exit_code == 0, result.output
    (stored,) = srv.objects("mpijobs.kubeflow.org", "default")
    assert stored["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert stored["spec"]["mpiImplementation"] == "OpenMPI"


def test_strict_field_validation_is_sent_so_a_dropped_field_is_an_error(k8s, monkeypatch):
    """Where the CRD cannot be read first, the create itself refuses: fails on the code
    before, which created the MPIJob without the field and said nothing."""
    srv = k8s.server()
    srv.install_mpi_operator(version=mpijob_crd.OLD)
    monkeypatch.setattr(operator_schema, "check", lambda client, obj: None)
    result = runner.invoke(app, [*ARGS, *k8s.cli_args()])
    assert result.exit_code != 0, result.output
    assert ('MPIJob in version "v2beta1" cannot be handled as a MPIJob: strict decoding '
            'error: unknown field "spec.launcherCreationPolicy"') in result.output
    assert srv.objects("mpijobs.kubeflow.org", "default") == []


def test_the_server_prunes_unknown_fields_warns_by_default_and_refuses_when_strict(k8s):
    k8s.server().install_mpi_operator()
    client = k8s.backend().client
    with pytest.raises(ApiError) as err:
        client.create(mpijob("a", bogus=1, runPolicy={"cleanPodPolicy": "Running",
                                                      "nope": True}),
                      field_validation="Strict")
    assert err.value.status == 400
    assert err.value.message == (
        'MPIJob in version "v2beta1" cannot be handled as a MPIJob: strict decoding error: '
        'unknown field "spec.bogus", unknown field "spec.runPolicy.nope"')
    made, warnings = client.create_with_warnings(mpijob("b", bogus=1))
    assert "bogus" not in made["spec"]
    assert warnings == ['unknown field "spec.bogus"']
    made = client.create(mpijob("c", bogus=1), field_validation="Ignore")
    assert "bogus" not in made["spec"]
