"""scripts/min_constraints.py pins every dependency to its lower bound for the min-versions CI job."""

import importlib.util

from tests.paths import ROOT

_spec = importlib.util.spec_from_file_location("min_constraints", ROOT / "scripts" / "min_constraints.py")
min_constraints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(min_constraints)


def test_lower_bounds_become_exact_pins(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\n'
        'dependencies = ["typer>=0.29,<0.30", "rich[jupyter] >= 13.8", "numpy<2", "six"]\n'
        '[project.optional-dependencies]\nagent = ["grpcio>=1.60; python_version >= \'3.10\'"]\n'
        'dev = ["pytest>=8"]\n')
    assert min_constraints.constraints(pyproject, []) == ["typer==0.29", "rich==13.8"]
    assert min_constraints.constraints(pyproject, ["agent"]) == [
        "typer==0.29", "rich==13.8", "grpcio==1.60"]


def test_every_runtime_dependency_of_the_project_has_a_lower_bound():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {pin.split("==")[0].lower() for pin in min_constraints.constraints(
        ROOT / "pyproject.toml", ["agent"])}
    for requirement in project["dependencies"] + project["optional-dependencies"]["agent"]:
        name = requirement.split(">")[0].split("<")[0].split("=")[0].strip().lower()
        assert name in pinned, f"{requirement}: give it a lower bound that CI can test"
