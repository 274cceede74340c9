"""--min-workers/--max-workers (mpijob/jobspec/elastic.py): validation, the modes that refuse,
and the plan: placed for the workers it starts with, a prediction at every size."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from launcher.cli.app import app
from mpijob.errors import SpecError
from mpijob.jobspec.elastic import sizes
from mpijob.jobspec.spec import build_spec

runner = CliRunner()
CLUSTER = "tests/data/clusters/two-dgx1.yaml"  # 2 nodes x 8 V100


def _spec(**kw):
    return build_spec(**{"name": "e", "command": ["python", "t.py"], **kw})


def test_bounds_default_to_the_starting_count_and_a_plain_job_is_not_elastic():
    plain = _spec(workers=3)
    assert not plain.elastic and (plain.min_size, plain.max_size) == (3, 3)
    assert "min_workers" not in plain.model_dump()  # recorded specs keep their shape
    e = _spec(workers=3, min_workers=2)
    assert e.elastic and (e.min_size, e.max_size) == (2, 3)
    assert _spec(workers=3, max_workers=5).min_size == 3


@pytest.mark.parametrize("fields, field, message", [
    ({"workers": 3, "min_workers": 4}, "min_workers", "4 is more than --workers 3"),
    ({"workers": 3, "max_workers": 2}, "max_workers", "2 is less than --workers 3"),
    ({"workers": 3, "min_workers": 2, "command": ["mpirun python t.py"], "shell": True},
     "command", "not by your own launch line"),
])
def test_bounds_are_checked_naming_the_option(fields, field, message):
    with pytest.raises(SpecError) as err:
        _spec(**fields)
    assert err.value.field == field and message in str(err.value)


def test_sizes_are_every_count_or_a_spread_with_both_ends_and_the_start():
    assert sizes(_spec(workers=3, min_workers=2, max_workers=5)) == [2, 3, 4, 5]
    many = sizes(_spec(workers=37, min_workers=1, max_workers=100))
    assert many[0] == 1 and many[-1] == 100 and 37 in many and len(many) <= 13


def test_the_cli_refuses_bad_bounds_in_one_line_with_exit_2():
    result = runner.invoke(app, ["submit", "mpi", "--name", "e", "--workers", "3",
                                 "--min-workers", "4", "--gpus", "1", "--dry-run"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: --min-workers: 4 is more than --workers 3: the job starts with --workers, "
        "at least the minimum"]


def test_operator_mode_refuses_elastic_saying_why():
    result = runner.invoke(app, ["submit", "mpi", "--name", "e", "--workers", "3",
                                 "--min-workers", "2", "--gpus", "1", "--mode", "operator",
                                 "--dry-run", "python", "t.py"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "MPI Operator has no elastic MPIJob" in line and "--mode pods" in line


def test_plan_places_the_start_size_says_what_would_fit_and_predicts_every_size():
    result = runner.invoke(app, ["plan", "--workers", "3", "--min-workers", "2",
                                 "--max-workers", "6", "--gpus", "4", "--cluster", CLUSTER])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "elastic: 2..6 workers, starting with 3" in out
    assert "the gang is the minimum, 2" in out
    # Placed for the 3 it starts with: nothing holds GPUs for the others (scale places them).
    assert ("elastic: placed for the 3 workers it starts with, one pod each; the others hold "
            "nothing until `hvdk8s scale` places them on the cluster as it is then (up to 4 "
            "would fit now)") in out
    line = next(x for x in out.splitlines() if "predicted images/sec by workers" in x)
    rates = dict(part.split(": ", 1) for part in line.split("workers: ", 1)[1].split(", ")
                 if ": " in part)
    assert set(rates) == {"2", "3", "4", "5", "6"}
    assert all(rates[n][0].isdigit() for n in ("2", "3", "4"))
    assert float(rates["2"].replace(",", "")) < float(rates["4"].replace(",", ""))
    assert rates["5"] == rates["6"] == "- (never: more than the cluster has)"


def test_plan_shows_what_each_elastic_worker_pod_requests():
    """An elastic job's workers are one pod each: plan shows a worker pod's requests (it
    showed the node's merged pod's, which no elastic pod requests)."""
    args = ["plan", "--workers", "2", "--min-workers", "2", "--max-workers", "4", "--gpus",
            "1", "--cluster", CLUSTER]
    data = json.loads(runner.invoke(app, [*args, "-o", "json"]).output)
    requests = data["worker_requests"]
    assert requests and all(r["per"] == "worker pod" for r in requests)
    table = runner.invoke(app, args).output
    assert f"{requests[0]['cpu']} each" in table, table
