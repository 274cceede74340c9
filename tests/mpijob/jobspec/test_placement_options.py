"""Option values shared by plan and submit: KEY=VALUE and tolerations (mpijob.jobspec.options)."""

from __future__ import annotations

import pytest

from mpijob.errors import SpecError
from mpijob.jobspec.options import parse_key_value
from mpijob.jobspec.toleration import parse_toleration
from mpijob.scheduling.cluster import Taint
from mpijob.scheduling.placement import tolerates


@pytest.mark.parametrize(
    ("text", "expected"),
    [("pool=train", ("pool", "train")), ("A=b=c", ("A", "b=c")), ("k=", ("k", "")),
     (" nvidia.com/gpu.product=Tesla-T4", ("nvidia.com/gpu.product", "Tesla-T4"))],
)
def test_parse_key_value(text, expected):
    assert parse_key_value(text, "--selector") == expected


@pytest.mark.parametrize("text", ["pool", "=x", ""])
def test_parse_key_value_names_the_option(text):
    with pytest.raises(SpecError) as info:
        parse_key_value(text, "-e")
    assert info.value.field == "-e" and "KEY=VALUE" in str(info.value)


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("text", "operator", "key", "value", "effect"),
    [
        ("nvidia.com/gpu=present:NoSchedule", "Equal", "nvidia.com/gpu", "present", "NoSchedule"),
        ("nvidia.com/gpu:NoSchedule", "Exists", "nvidia.com/gpu", None, "NoSchedule"),
        ("nvidia.com/gpu", "Exists", "nvidia.com/gpu", None, None),
        ("nvidia.com/gpu=present", "Equal", "nvidia.com/gpu", "present", None),
        ("all", "Exists", None, None, None),
    ],
)
def test_parse_toleration_forms(text, operator, key, value, effect):
    t = parse_toleration(text)
    assert (t.operator, t.key, t.value, t.effect) == (operator, key, value, effect)
    assert tolerates(t, GPU_TAINT)


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("nvidia.com/gpu=absent:NoSchedule", GPU_TAINT),
        ("nvidia.com/gpu:NoExecute", GPU_TAINT),
        ("other", GPU_TAINT),
    ],
)
def test_tolerations_that_do_not_match(text, taint):
    assert not tolerates(parse_toleration(text), taint)


@pytest.mark.parametrize(("text", "words"), [("gpu:Sometimes", "unknown effect"), (":NoSchedule", "missing the taint key"), ("", "expected")])
def test_bad_tolerations(text, words):
    with pytest.raises(SpecError) as info:
        parse_toleration(text)
    assert info.value.field == "--toleration" and words in str(info.value)
