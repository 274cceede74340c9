"""The job spec's validation: what is accepted, and that each refusal names its field."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpijob.errors import SpecError
from mpijob.jobspec import names
from mpijob.jobspec.quantity import QuantityError, parse_quantity, scale_quantity
from mpijob.jobspec.spec import build_spec


@pytest.mark.parametrize("text,value", [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), ("4Gi", Decimal(4 * 2**30)),
    ("512Mi", Decimal(512 * 2**20)), ("1e3", Decimal(1000)), ("1.5G", Decimal(1_500_000_000)),
    ("100k", Decimal(100_000)), (".5", Decimal("0.5")),
])
def test_quantities_parse_like_the_api_server(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["4XB", "", "Gi", "1.2.3", "4 Gi", "-", "1ee3", "12gi"])
def test_bad_quantities_are_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("text,factor,expected", [
    ("4Gi", 2, "8Gi"), ("500m", 3, "1500m"), ("2.5", 2, "5"), ("1e3", 2, "2000"),
])
def test_scaled_quantities_keep_their_unit(text, factor, expected):
    assert scale_quantity(text, factor) == expected
    assert parse_quantity(scale_quantity(text, factor)) == parse_quantity(text) * factor


def _field_of(**kw) -> str:
    with pytest.raises(SpecError) as err:
        build_spec(**{"name": "job", **kw})
    return err.value.field


@pytest.mark.parametrize("kw,field", [
    ({"workers": 0}, "workers"),
    ({"gpus_per_worker": -1}, "gpus_per_worker"),
    ({"name": "Bad_Name"}, "name"),
    ({"name": "9lives"}, "name"),
    ({"memory": "4XB"}, "memory"),
    ({"cpu": "0"}, "cpu"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"labels": {"team": "a b"}}, "labels"),
    ({"node_selector": {"bad key!": "x"}}, "node_selector"),
    ({"gang": "kueue"}, "queue"),
    ({"mpi_implementation": "LAM"}, "mpi_implementation"),
    ({"run_policy": {"clean_pod_policy": "Sometimes"}}, "run_policy.clean_pod_policy"),
    ({"benchmark": {"model": "alexnet9"}}, "benchmark.model"),
    ({"namespace": "Not_A_NS"}, "namespace"),
])
def test_each_refusal_names_its_field(kw, field):
    assert _field_of(**kw) == field


def test_name_length_keeps_every_derived_name_a_label():
    longest_ok = "a" * (63 - names.longest_suffix(4))
    spec = build_spec(name=longest_ok, workers=4)
    assert len(names.worker(spec.name, 3)) <= 63
    assert len(names.launcher(spec.name) + "-abcde") <= 63
    with pytest.raises(SpecError) as err:
        build_spec(name=longest_ok + "b", workers=4)
    assert err.value.field == "name" and "at most" in err.value.message


def test_many_workers_shorten_the_allowed_name():
    # 100000 workers: "-worker-99999" (13) is shorter than "-launcher-xxxxx" (15); 10^9 is not.
    assert names.longest_suffix(10**9) == len("-worker-999999999")


def test_ranks_are_gpus_or_workers():
    assert build_spec(name="a", workers=3, gpus_per_worker=2).ranks == 6
    assert build_spec(name="a", workers=3, gpus_per_worker=0).ranks == 3


def test_defaults_avoid_known_traps():
    spec = build_spec(name="a")
    assert spec.run_policy.clean_pod_policy == "Running"
    assert not spec.host_network
    assert parse_quantity(spec.shm_size) >= 2**30  # NCCL needs far more than Docker's 64Mi


@given(st.from_regex(r"[a-z]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True),
       st.integers(min_value=1, max_value=4096))
def test_valid_names_give_valid_derived_names(name, workers):
    try:
        spec = build_spec(name=name, workers=workers)
    except SpecError as err:
        assert err.field == "name"
        return
    label = r"[a-z]([-a-z0-9]*[a-z0-9])?"
    import re
    for derived in (names.launcher(spec.name) + "-x1y2z", names.worker(spec.name, workers - 1),
                    names.service(spec.name), names.config(spec.name), names.ssh_secret(spec.name)):
        assert len(derived) <= 63 and re.fullmatch(label, derived)
