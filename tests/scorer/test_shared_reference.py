"""A reference written exactly as the predicted calls is read as those very calls (one set of
objects), and the metrics' shortcut for ``predicted is reference`` gives what comparing two
equal copies gives, for every instance and with or without explanations."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import instance
from tests.scorer.strategies import call_lists, samples
from toolscore.scorer import SampleError, default_config
from toolscore.scorer.parse import read_calls

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INSTANCES = [
    *default_config().instances.values(),
    instance(order="flexible"),
    instance(order="unordered"),
    instance(args="levenshtein"),
    instance(duplicates="collapse"),
]


def _identical(calls: list[Any]) -> dict[str, Any]:
    return {
        "user_input": [
            {"type": "human", "content": "q"},
            {"type": "ai", "content": "", "tool_calls": calls},
        ],
        "reference_tool_calls": [dict(c) for c in calls],
    }


@SETTINGS
@given(st.one_of(samples(), call_lists.map(_identical)))
def test_a_shared_reference_scores_as_an_equal_copy(sample: Any) -> None:
    try:
        _, predicted, reference = read_calls(sample)
    except SampleError:
        return
    shared = reference is predicted
    event("shared" if shared else "apart")
    if reference is None:
        return
    copy: Any = list(reference)  # the same calls, another object: no shortcut
    for inst in INSTANCES:
        assert inst.score(predicted, reference) == inst.score(predicted, copy)
        assert inst.value(predicted, reference) == inst.value(predicted, copy)


def test_only_calls_written_alike_are_shared() -> None:
    call = {"name": "search", "args": {"q": "x", "n": 2}}
    assert _shared(_identical([call]))
    for other in (
        {"name": "search", "args": {"q": "x", "n": 2.0}},  # equal (==) but printed 2.0
        {"name": "search", "args": {"q": "x", "n": True}},
        {"name": "search", "args": {"n": 2, "q": "x"}},  # another key order
    ):
        sample = _identical([call])
        sample["reference_tool_calls"] = [other]
        assert not _shared(sample), other
    big = {"name": "search", "args": {"n": 2**70}}  # beyond what orjson writes
    assert not _shared(_identical([big]))


def _shared(sample: dict[str, Any]) -> bool:
    _, predicted, reference = read_calls(sample)
    return reference is predicted
