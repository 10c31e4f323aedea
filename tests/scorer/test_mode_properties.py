"""Relations between the modes that must hold for every input (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import instance
from toolscore.scorer import ToolCall

names = st.sampled_from(["a", "b", "c"])
values = st.sampled_from([1, 1.0, "1", "x", "y", None, True])
calls = st.builds(
    ToolCall, names, st.dictionaries(st.sampled_from(["p", "q", "r"]), values, max_size=3)
)
call_lists = st.lists(calls, max_size=5)

STRICT = instance()
FLEXIBLE = instance(order="flexible")
UNORDERED = instance(order="unordered")
SUBSEQUENCE = instance(order="subsequence")
GROUPED = instance(order="grouped")
PREFIX = instance(length_mismatch="prefix")
ALL = [
    STRICT,
    FLEXIBLE,
    UNORDERED,
    SUBSEQUENCE,
    GROUPED,
    PREFIX,
    instance(order="unordered", length_mismatch="prefix", args="levenshtein"),
    instance(order="subsequence", length_mismatch="prefix", args="jaro_winkler"),
    instance(order="grouped", length_mismatch="prefix", args="normalized"),
    instance(order="flexible", length_mismatch="prefix", args="json"),
]


def value(metric, predicted, reference):
    result = metric.score(predicted, reference)
    assert result.error is None
    assert result.value == metric.value(predicted, reference)
    return result.value


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_every_mode_scores_in_the_unit_interval(predicted, reference):
    for metric in ALL:
        assert 0.0 <= value(metric, predicted, tuple(reference)) <= 1.0


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_optimal_pairing_never_scores_below_sorted_pairing(predicted, reference):
    ref = tuple(reference)
    assert value(UNORDERED, predicted, ref) >= value(FLEXIBLE, predicted, ref) - 1e-12


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_subsequence_never_scores_below_strict(predicted, reference):
    ref = tuple(reference)
    assert value(SUBSEQUENCE, predicted, ref) >= value(STRICT, predicted, ref) - 1e-12


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_singleton_groups_are_strict_order(predicted, reference):
    ref = tuple(reference)
    singletons = tuple((c,) for c in reference)
    assert value(GROUPED, predicted, singletons) == value(STRICT, predicted, ref)


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_one_group_is_unordered_when_names_match(predicted, reference):
    ref = tuple(reference)
    one_group = (tuple(reference),) if reference else ()
    grouped = value(GROUPED, predicted, one_group)
    if sorted(c.name for c in predicted) == sorted(c.name for c in reference):
        assert grouped == value(UNORDERED, predicted, ref)
    else:
        assert grouped == 0.0 or not reference


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_prefix_agrees_with_zero_when_lengths_match(predicted, reference):
    ref = tuple(reference)
    if len(predicted) == len(reference):
        assert value(PREFIX, predicted, ref) == value(STRICT, predicted, ref)
    else:
        assert value(STRICT, predicted, ref) == 0.0
