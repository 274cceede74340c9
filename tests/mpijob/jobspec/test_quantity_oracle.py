"""mpijob's quantity parser against the official client's `kubernetes.utils.parse_quantity`:
the same value, or both refuse. (Ours exists because importing the client's costs every
CLI start ~300 ms; mpijob.jobspec.quantity says so.)"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpijob.jobspec.quantity import QuantityError, parse_quantity

client = pytest.importorskip("kubernetes.utils.quantity")

NUMBER = st.one_of(st.integers(0, 10**6).map(str),
                   st.tuples(st.integers(0, 9999), st.integers(0, 999)).map(
                       lambda t: f"{t[0]}.{t[1]}"),
                   st.integers(0, 999).map(lambda n: f".{n}"))
SUFFIX = st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E",
                          "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2", "e+1", "x", "KB"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", "+"]), NUMBER, SUFFIX)
def test_same_value_as_the_official_client_or_both_refuse(sign, number, suffix):
    text = f"{sign}{number}{suffix}"
    try:
        expected = client.parse_quantity(text)
    except ValueError:
        with pytest.raises(QuantityError):
            parse_quantity(text)
        return
    assert parse_quantity(text) == expected
