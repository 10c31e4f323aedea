"""Explanations: what was paired, each argument's score, and why points were lost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import call, instance, score
from toolscore.scorer import parse_sample

STRICT = instance()
FLEXIBLE = instance(order="flexible")
F1 = instance(type="tool_call_f1")


def test_lost_points_name_the_argument_with_both_values():
    result = score(
        STRICT,
        [call("get_time", timezone="Tokyo")],
        [call("get_time", timezone="Asia/Tokyo")],
    )
    assert result.value == 0.0
    assert result.details["pairs"] == [
        {"expected": 0, "predicted": 0, "name": "get_time", "score": 0.0, "args": {"timezone": 0.0}}
    ]
    assert result.details["reasons"] == [
        "expected get_time(timezone='Asia/Tokyo'), got get_time(timezone='Tokyo')"
    ]


def test_missing_argument_is_reported_as_missing():
    result = score(STRICT, [call("search", q="x")], [call("search", q="x", limit=10)])
    assert result.value == 0.5
    assert result.details["pairs"][0]["args"] == {"q": 1.0, "limit": 0.0}
    assert result.details["reasons"] == ["expected search(limit=10), got search(limit missing)"]


def test_flexible_pairing_reports_original_positions():
    predicted = [call("b", x=1), call("a", x=2)]
    reference = [call("a", x=2), call("b", x=1)]
    result = score(FLEXIBLE, predicted, reference)
    assert result.value == 1.0
    pairs = {(p["expected"], p["predicted"]) for p in result.details["pairs"]}
    assert pairs == {(0, 1), (1, 0)}
    assert result.details["reasons"] == []


def test_failed_gate_is_the_first_reason():
    result = score(STRICT, [call("b"), call("a")], [call("a"), call("b")])
    assert result.value == 0.0
    assert result.details["aligned"] is False
    assert result.details["reasons"][0] == (
        "tool names differ at position 0: expected [a, b], got [b, a]"
    )
    assert result.details["unmatched_expected"] == [0, 1]


def test_length_mismatch_reason_says_why_it_scores_zero():
    result = score(STRICT, [call("a"), call("a")], [call("a")])
    assert result.value == 0.0
    assert "expected 1 calls, got 2" in result.details["reasons"][0]
    assert result.details["unmatched_predicted"] == [1]


def test_f1_lists_missing_and_unexpected_calls_once_each():
    predicted = [call("a", x=1), call("a", x=1), call("c")]
    reference = [call("a", x=1), call("b", y="z")]
    result = score(F1, predicted, reference)
    assert result.details["true_positives"] == 1
    assert result.details["false_positives"] == 1  # duplicates collapse, as in Ragas
    assert result.details["reasons"] == ["expected b(y='z') was not called", "unexpected call c()"]


names = st.sampled_from(["a", "b", "c"])
values = st.sampled_from([1, 1.0, "1", True, None, "x", "y", [1], {"k": 1}])
calls = st.tuples(names, st.dictionaries(st.sampled_from(["x", "y"]), values, max_size=2))
call_lists = st.lists(calls, max_size=4)


def _sample(predicted, reference):
    tool_calls = [{"name": n, "args": a} for n, a in predicted]
    return parse_sample(
        {
            "user_input": [{"type": "ai", "content": "", "tool_calls": tool_calls}],
            "reference_tool_calls": [{"name": n, "args": a} for n, a in reference],
        }
    )


@settings(max_examples=400, deadline=None)
@given(call_lists, call_lists)
def test_default_fast_path_explains_exactly_like_the_general_path(predicted, reference):
    sample = _sample(predicted, reference)
    for inst in (STRICT, FLEXIBLE):
        metric = inst.metric
        fast = metric.evaluate(sample.predicted_tool_calls, sample.reference_tool_calls)
        general = metric._evaluate_general(  # type: ignore[union-attr]
            sample.predicted_tool_calls, sample.reference_tool_calls
        )
        assert fast == general
        assert fast[0] == inst.value(sample.predicted_tool_calls, sample.reference_tool_calls)
